"""YAML locale files (Rails i18n) through PyYAML's node marks: string values replaced where they lie."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence

import yaml

from hunyuan_serve.localization.formats.base import Document, Edit, FormatError, Options, splice

_STR = "tag:yaml.org,2002:str"


def parse_yaml(content: str, options: Options) -> Document:
    """String values are segments (keys, anchors, comments kept); a Rails root key naming the source
    language is renamed to the target."""
    try:
        root = yaml.compose(content, Loader=yaml.SafeLoader)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        problem = getattr(err, "problem", None) or str(err)
        raise FormatError(f"not valid YAML: {problem}", mark.line + 1 if mark else None) from None
    values = list(_strings(root, (), set()))
    locale = _locale_key(root, options)

    def rebuild(translations: Sequence[str], failed: frozenset[int]) -> str:
        edits = [
            _value_edit(content, node, new)
            for index, ((_, node), new) in enumerate(zip(values, translations, strict=True))
            if index not in failed and new != node.value
        ]
        return splice(content, [*edits, *locale] if edits else [])

    labels = tuple(".".join(path) for path, _ in values)
    return Document("yaml", tuple(node.value for _, node in values), labels, rebuild)


def _value_edit(content: str, node: yaml.ScalarNode, new: str) -> Edit:
    """The scalar's text replaced by a double-quoted string (valid for any text, one line); its anchor or
    tag before it, and the line break a block scalar's span ends with, are kept."""
    start, end = node.start_mark.index, node.end_mark.index
    while content[start] in "&!":  # `&anchor ` or `!!str `: part of the node's span, not of its text
        start += len(content[start:end].split(None, 1)[0])
        start += len(content[start:end]) - len(content[start:end].lstrip())
    span = content[start:end]
    return Edit(start, start + len(span.rstrip()), json.dumps(new, ensure_ascii=False))


def _strings(
    node: yaml.Node | None, path: tuple[str, ...], seen: set[int]
) -> Iterator[tuple[tuple[str, ...], yaml.ScalarNode]]:
    if node is None or id(node) in seen:
        return  # an alias repeats its anchor's node: translated once, where the anchor is
    seen.add(id(node))
    if isinstance(node, yaml.ScalarNode):
        if node.tag == _STR and node.value.strip():
            yield path, node
    elif isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            yield from _strings(value, (*path, str(key.value)), seen)
    elif isinstance(node, yaml.SequenceNode):
        for index, value in enumerate(node.value):
            yield from _strings(value, (*path, str(index)), seen)


def _locale_key(root: yaml.Node | None, options: Options) -> list[Edit]:
    if not isinstance(root, yaml.MappingNode) or len(root.value) != 1 or not options.target:
        return []
    key = root.value[0][0]
    if not isinstance(key, yaml.ScalarNode) or key.value != (options.source or "en") or key.style:
        return []
    return [Edit(key.start_mark.index, key.end_mark.index, options.target)]
