"""JSON localization files (flat, nested, i18next) and Flutter ARB: string values replaced where they lie."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hunyuan_serve.localization.formats.base import Document, Edit, FormatError, Options, splice
from hunyuan_serve.localization.formats.plurals import CATEGORIES, reshape

Path_ = tuple[str | int, ...]
_WHITESPACE = " \t\n\r"
_SCANNER = json.JSONDecoder()
# The json module's own string scanner (C where built), which reports where each string ends.
scanstring: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]


@dataclass(frozen=True)
class _String:
    """A string value: its path of keys and where its characters (between the quotes) lie."""

    path: Path_
    start: int
    end: int
    text: str
    key_start: int = -1  # where its key's opening quote lies (a member of an object)
    key_end: int = -1  # just past its key's closing quote


def parse_json(content: str, target: str | None = None) -> Document:
    """A JSON object of strings, flat or nested (lists too): strings are segments, the rest is kept.

    With a target, i18next's plural keys (key_one, key_other...: v4) become the target's CLDR
    categories: the ones it lacks are added after the group, the ones it does not have dropped.
    """
    strings = _strings(content)
    plurals = _plural_groups(strings) if target else []
    return _document("json", content, strings, plurals=plurals, target=target)


def parse_json_options(content: str, options: Options) -> Document:
    return parse_json(content, options.target)


def parse_arb(content: str, options: Options) -> Document:
    """Flutter ARB: message values are segments; "@" metadata kept; "@@locale" set to the target."""
    found = _strings(content)
    messages = [s for s in found if not str(s.path[0]).startswith("@")]
    locale = next((s for s in found if s.path == ("@@locale",)), None)
    extra = (
        [] if locale is None or options.target is None else [Edit(locale.start, locale.end, options.target)]
    )
    return _document("arb", content, messages, extra)


def _document(
    fmt: str,
    content: str,
    strings: Sequence[_String],
    extra: Sequence[Edit] = (),
    plurals: Sequence[dict[str, int]] = (),
    target: str | None = None,
) -> Document:
    ascii_only = content.isascii() and "\\u" in content  # a file written with \\u escapes keeps them

    def encode(text: str) -> str:
        return json.dumps(text, ensure_ascii=ascii_only)[1:-1]

    def rebuild(translations: Sequence[str], failed: frozenset[int]) -> str:
        taken = dict(enumerate(translations))
        edits = [
            edit
            for group in plurals
            for edit in _plural_edits(content, strings, group, taken, failed, target, encode)
        ]
        dropped = [(e.start, e.end) for e in edits if e.end > e.start]
        edits += [
            Edit(s.start, s.end, encode(taken[index]))
            for index, s in enumerate(strings)
            if index not in failed
            and taken[index] != s.text
            and not any(a <= s.start < b for a, b in dropped)
        ]
        return splice(content, [*edits, *extra] if edits else [])

    return Document(fmt, tuple(s.text for s in strings), tuple(_label(s.path) for s in strings), rebuild)


_PLURAL_KEY = re.compile(rf"^(.+)_({'|'.join(CATEGORIES)})$")


def _plural_groups(strings: Sequence[_String]) -> list[dict[str, int]]:
    """i18next v4 plural groups (sibling keys base_one, base_other...: {category: string index}).

    A group needs its _other form; ordinal groups (base_ordinal_one...) are left as they are.
    """
    groups: dict[tuple[Path_, str], dict[str, int]] = {}
    for index, s in enumerate(strings):
        found = _PLURAL_KEY.match(str(s.path[-1])) if s.path and s.key_start >= 0 else None
        if found and not found.group(1).endswith("_ordinal"):
            groups.setdefault((s.path[:-1], found.group(1)), {})[found.group(2)] = index
    return [group for group in groups.values() if "other" in group]


def _plural_edits(
    content: str,
    strings: Sequence[_String],
    group: dict[str, int],
    taken: dict[int, str],
    failed: frozenset[int],
    target: str | None,
    encode: Callable[[str], str],
) -> list[Edit]:
    """The target's forms: kept ones take their source's translation, missing ones added, others dropped.

    Changes `taken` in place for a kept form translated from another (Russian _one from _other).
    """
    plan = reshape({c: strings[i].text for c, i in group.items()}, target)
    if "zero" in plan.drop:  # i18next reads _zero for a count of 0 in every language: it stays
        plan.drop.remove("zero")
        plan.keep["zero"] = "zero"
    for category, source in plan.keep.items():
        if source != category:
            ok = group[source] not in failed
            taken[group[category]] = taken[group[source]] if ok else strings[group[category]].text
    kept = max((strings[group[c]] for c in plan.keep), key=lambda s: s.key_start)
    at, base = kept.end + 1, str(kept.path[-1]).rsplit("_", 1)[0]
    separator = "," + (content[_skip_back(content, kept.key_start) : kept.key_start] or " ")
    colon = content[kept.key_end : kept.start - 1]
    edits = [
        Edit(at, at, f'{separator}{json.dumps(base + "_" + c)}{colon}"{encode(taken[group[source]])}"')
        for c, source in plan.add
        if group[source] not in failed
    ]
    return edits + _drop_edits(content, [strings[group[c]] for c in plan.drop])


def _drop_edits(content: str, dropped: Sequence[_String]) -> list[Edit]:
    """Remove each dropped member with the comma before it (the object's first: the comma after it)."""
    by_start = {s.key_start: s for s in dropped}
    edits: list[Edit] = []
    consumed: set[int] = set()
    for s in sorted(dropped, key=lambda s: s.key_start):
        if s.key_start in consumed:
            continue
        before = _skip_back(content, s.key_start)
        if content[before - 1] == ",":
            edits.append(Edit(before - 1, s.end + 1, ""))
            continue
        end = s.end + 1  # the first member: up to the next kept member's key
        while True:
            after = _skip(content, end)
            after = _skip(content, after + 1) if content[after] == "," else after
            follower = by_start.get(after)
            if follower is None:
                break
            consumed.add(after)
            end = follower.end + 1
        edits.append(Edit(s.key_start, after, ""))
    return edits


def _skip_back(content: str, at: int) -> int:
    while at > 0 and content[at - 1] in _WHITESPACE:
        at -= 1
    return at


def _strings(content: str) -> list[_String]:
    try:
        data = json.loads(content)
    except json.JSONDecodeError as err:
        raise FormatError(f"not valid JSON: {err.msg} (column {err.colno})", err.lineno) from None
    if not isinstance(data, dict):
        raise FormatError("a JSON localization file must be an object mapping keys to strings")
    found: list[_String] = []
    _walk(content, _skip(content, 0), (), found)
    return found


def _walk(
    content: str, at: int, path: Path_, found: list[_String], key_span: tuple[int, int] = (-1, -1)
) -> int:
    """Walk the value at `at` with the json module's own scanners; return where it ends."""
    char = content[at]
    if char == '"':
        text, end = scanstring(content, at + 1)
        found.append(_String(path, at + 1, end - 1, text, *key_span))
        return end
    if char not in "{[":
        return int(_SCANNER.raw_decode(content, at)[1])
    closing, index = ("}" if char == "{" else "]"), 0
    at = _skip(content, at + 1)
    while content[at] != closing:
        if char == "{":
            key_at = at
            key, at = scanstring(content, at + 1)
            key_end = at
            at = _skip(content, _skip(content, at) + 1)  # past the ':'
            at = _walk(content, at, (*path, key), found, (key_at, key_end))
        else:
            at = _walk(content, at, (*path, index), found)
            index += 1
        at = _skip(content, at)
        if content[at] == ",":
            at = _skip(content, at + 1)
    return at + 1


def _skip(content: str, at: int) -> int:
    while at < len(content) and content[at] in _WHITESPACE:
        at += 1
    return at


def _label(path: Path_) -> str:
    return "".join(
        f"[{part}]" if isinstance(part, int) else ("." if i else "") + part for i, part in enumerate(path)
    )
