"""Formatted translation: inline markup to numbered <sN></sN> tags and back, checking every tag returned."""

from __future__ import annotations

import re
from dataclasses import dataclass

from hunyuan_serve.text.placeholders import VOID_ELEMENTS

# HY-MT1.5's formatted-translation prompt (Tencent-Hunyuan/HY-MT, README.md, "Prompt Template for
# formatted translation") says: the <sn></sn> tags in the source mark text that carries formatting and
# should be kept at the matching place; the answer comes as <target>str</target>. So each piece of
# inline markup becomes <s1>...</s1>, <s2>...</s2> (a void element such as <br/> an empty pair), and
# the numbers map back to the original markup afterwards.
_HTML_TAG = re.compile(r"<(/?)([A-Za-z][\w:-]*)\b[^<>]*?(/?)>")
# Markdown inline markup, one at a time, in this order (links before emphasis, ** before *).
_MARKDOWN = (
    re.compile(r"(\[)([^\[\]\n]+)(\]\([^()\s]+\))"),
    re.compile(r"(`)([^`\n]+)(`)"),
    re.compile(r"(\*\*)(?=\S)([^*\n]+?)(?<=\S)(\*\*)"),
    re.compile(r"(__)(?=\S)([^_\n]+?)(?<=\S)(__)"),
    re.compile(r"(~~)(?=\S)([^~\n]+?)(?<=\S)(~~)"),
    re.compile(r"(?<![*\w])(\*)(?=\S)([^*\n]+?)(?<=\S)(\*)(?![*\w])"),
)
_SN_TAG = re.compile(r"</?s(\d+)>")
_TARGET = re.compile(r"<target>(.*?)(?:</target>|\Z)", re.DOTALL)


@dataclass(frozen=True)
class Wrapped:
    """The text with <sN> tags in place of markup, and the markup each N stands for (open, close)."""

    text: str
    markup: tuple[tuple[str, str], ...]

    def restore(self, tagged: str) -> str:
        """Put the original markup back for every <sN> / </sN> (no check; see unwrap)."""

        def original(match: re.Match[str]) -> str:
            index = int(match.group(1)) - 1
            if not 0 <= index < len(self.markup):
                return ""
            opening, closing = self.markup[index]
            return closing if match.group().startswith("</") else opening

        return _SN_TAG.sub(original, tagged)


@dataclass(frozen=True)
class Unwrapped:
    """The translation with its markup restored, and the markup that did not come back intact."""

    text: str
    lost: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.lost


def wrap(text: str) -> Wrapped:
    """Replace HTML tags and Markdown emphasis/code/links with numbered <sN>...</sN> pairs."""
    markup: list[tuple[str, str]] = []
    tagged = _wrap_html(text, markup)
    for pattern in _MARKDOWN:
        tagged = pattern.sub(lambda m: _pair(markup, m.group(1), m.group(3), m.group(2)), tagged)
    return _in_reading_order(tagged, markup)


def _in_reading_order(tagged: str, markup: list[tuple[str, str]]) -> Wrapped:
    """Number the pairs s1, s2, ... as they open in the text (the passes above number them by kind)."""
    order = list(dict.fromkeys(int(n) for n in re.findall(r"<s(\d+)>", tagged)))
    new_number = {old: new for new, old in enumerate(order, 1)}

    def renumber(match: re.Match[str]) -> str:
        return match.group().replace(match.group(1), str(new_number[int(match.group(1))]))

    renumbered = _SN_TAG.sub(renumber, tagged)
    return Wrapped(renumbered, tuple(markup[old - 1] for old in order))


def _pair(markup: list[tuple[str, str]], opening: str, closing: str, inner: str) -> str:
    markup.append((opening, closing))
    n = len(markup)
    return f"<s{n}>{inner}</s{n}>"


def _wrap_html(text: str, markup: list[tuple[str, str]]) -> str:
    """Pair opening and closing tags by name (a stack); void and unpaired tags become empty pairs."""
    tags = list(_HTML_TAG.finditer(text))
    partner: dict[int, int] = {}
    stack: list[int] = []
    for i, tag in enumerate(tags):
        closing, name, self_closing = tag.group(1) == "/", tag.group(2).lower(), tag.group(3) == "/"
        if self_closing or name in VOID_ELEMENTS:
            continue
        if not closing:
            stack.append(i)
            continue
        opener = next((j for j in reversed(stack) if tags[j].group(2).lower() == name), None)
        if opener is not None:
            del stack[stack.index(opener) :]
            partner[opener], partner[i] = i, opener
    out: list[str] = []
    numbers: dict[int, int] = {}
    last = 0
    for i, tag in enumerate(tags):
        out.append(text[last : tag.start()])
        last = tag.end()
        if i in partner and partner[i] > i:
            markup.append((tag.group(), tags[partner[i]].group()))
            numbers[i] = len(markup)
            out.append(f"<s{numbers[i]}>")
        elif i in partner:
            out.append(f"</s{numbers[partner[i]]}>")
        else:
            markup.append((tag.group(), ""))
            out.append(f"<s{len(markup)}></s{len(markup)}>")
    out.append(text[last:])
    return "".join(out)


def unwrap(output: str, wrapped: Wrapped) -> Unwrapped:
    """The answer inside <target>...</target> with markup restored; names each tag pair that was lost.

    A pair is intact when <sN> and </sN> each occur exactly once, in that order. Lost or unexpected tags
    are dropped from the text rather than returned as broken markup, and reported in `lost`.
    """
    found = _TARGET.search(output)
    body = (found.group(1) if found else output).strip()
    lost: list[str] = []
    for n, (opening, closing) in enumerate(wrapped.markup, 1):
        opens, closes = body.count(f"<s{n}>"), body.count(f"</s{n}>")
        if opens != 1 or closes != 1 or body.index(f"<s{n}>") > body.index(f"</s{n}>"):
            lost.append(opening + closing)
            body = body.replace(f"<s{n}>", "").replace(f"</s{n}>", "")
    return Unwrapped(wrapped.restore(body), tuple(lost))
