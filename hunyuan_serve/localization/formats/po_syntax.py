"""The PO grammar GNU msgfmt holds a catalog to: strings closed, escapes known, entries whole, none twice."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from hunyuan_serve.localization.formats.base import FormatError

_WORD = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?:\[\s*(\d+)\s*\])?")
_KEYWORDS = ("msgctxt", "msgid", "msgid_plural", "msgstr")
_ESCAPES = frozenset('ntbrfva\\"')  # msgfmt's own list: C's, less \' and \?
_NUMERIC_ESCAPE = re.compile(r"[0-7]{1,3}|x[0-9a-fA-F]+")
_SHOWN = 60  # characters of a msgid quoted in a duplicate's message


@dataclass(frozen=True)
class _Token:
    kind: str  # a keyword ("msgstr[]" for msgstr[N]), "string" or "comment"
    line: int  # 1-based
    text: str  # a string's content as written (escapes kept); a keyword as written
    obsolete: bool  # on a `#~` line
    index: int | None = None  # N of msgstr[N]


@dataclass(frozen=True)
class _Message:
    line: int  # of its msgctxt, or msgid
    context: str | None
    msgid: str


def check_po(content: str) -> int | None:
    """Raise a FormatError (problem and line, in msgfmt's words) where msgfmt would refuse the catalog's
    syntax; else the line of its header entry (msgid "" without msgctxt), or None when it has none."""
    tokens = list(_tokens(content))
    seen: dict[tuple[str | None, str], int] = {}
    at = 0
    while at < len(tokens):
        if tokens[at].kind == "comment":
            at += 1
            continue
        message, at = _message(tokens, at)
        key = (message.context, message.msgid)
        if key in seen:
            raise FormatError(f"{_describe(message)} defined twice (first at line {seen[key]})", message.line)
        seen[key] = message.line
    return seen.get((None, ""))


def _describe(message: _Message) -> str:
    text = message.msgid if len(message.msgid) <= _SHOWN else message.msgid[:_SHOWN] + "..."
    context = "" if message.context is None else f' with msgctxt "{message.context}"'
    return f'duplicate message: msgid "{text}"{context}'


def _tokens(content: str) -> Iterator[_Token]:
    """Keywords, strings and comments; whitespace (line ends too) only separates them, as in msgfmt."""
    line, pos, obsolete, line_start = 1, 0, False, True
    while pos < len(content):
        char = content[pos]
        if char == "\n":
            line, pos, obsolete, line_start = line + 1, pos + 1, False, True
        elif char.isspace():
            pos += 1
        elif content.startswith("#~", pos) and line_start and not content.startswith("#~|", pos):
            obsolete, pos, line_start = True, pos + 2, False  # the rest of the line is an obsolete entry's
        elif char == "#":
            yield _Token("comment", line, "", obsolete)
            end = content.find("\n", pos)
            pos = len(content) if end < 0 else end
        elif char == '"':
            end, lines = _string_end(content, pos, line)
            yield _Token("string", line, content[pos + 1 : end - 1], obsolete)
            pos, line, line_start = end, line + lines, False
        else:
            token, pos = _keyword(content, pos, line, obsolete)
            line_start = False
            yield token


def _keyword(content: str, pos: int, line: int, obsolete: bool) -> tuple[_Token, int]:
    """The keyword at pos, and the offset after it."""
    found = _WORD.match(content, pos)
    if found is None:
        raise FormatError(f"syntax error: unexpected {content[pos]!r}", line)
    word, index = found.group(1), found.group(2)
    if word not in _KEYWORDS or (index is not None and word != "msgstr"):
        raise FormatError(f'keyword "{found.group()}" unknown', line)
    if index is None:
        return _Token(word, line, word, obsolete), found.end()
    return _Token("msgstr[]", line, found.group(), obsolete, int(index)), found.end()


def _string_end(content: str, start: int, line: int) -> tuple[int, int]:
    """The offset after the string opened at start, and the line ends inside it (a backslash's)."""
    pos, lines = start + 1, 0
    while pos < len(content):
        char = content[pos]
        if char == '"':
            return pos + 1, lines
        if char == "\n":
            break
        if char == "\\":
            after = content[pos + 1 : pos + 2]
            ends = "\r\n" if content.startswith("\r\n", pos + 1) else "\n" if after == "\n" else ""
            if ends:  # a backslash before the line end continues the string on the next line
                pos, lines = pos + 1 + len(ends), lines + 1
                continue
            numeric = _NUMERIC_ESCAPE.match(content, pos + 1)
            if after in _ESCAPES:
                pos += 2
            elif numeric is not None:
                pos = numeric.end()
            else:
                raise FormatError(f"invalid control sequence \\{after}", line + lines)
            continue
        pos += 1
    raise FormatError("end-of-line within string", line + lines)


def _message(tokens: Sequence[_Token], at: int) -> tuple[_Message, int]:
    """The entry that starts at tokens[at]: [msgctxt] msgid, then msgstr or msgid_plural and msgstr[N]."""
    first = tokens[at]
    if first.kind == "string":
        raise FormatError("syntax error: a string with no keyword before it", first.line)
    if first.kind not in ("msgctxt", "msgid"):
        raise FormatError(f"syntax error: '{first.text}' with no msgid before it", first.line)
    context: str | None = None
    start = at
    if first.kind == "msgctxt":
        context, at = _strings(tokens, at)
        if _kind(tokens, at) != "msgid":
            raise FormatError("missing 'msgid' section after 'msgctxt'", first.line)
    msgid_line = tokens[at].line
    msgid, at = _strings(tokens, at)
    follows = _kind(tokens, at)
    if follows == "msgstr":
        _, at = _strings(tokens, at)
    elif follows == "msgid_plural":
        _, at = _strings(tokens, at)
        at = _plural_forms(tokens, at, msgid_line)
    elif follows == "msgstr[]":
        raise FormatError("missing 'msgid_plural' section", tokens[at].line)
    else:
        raise FormatError("missing 'msgstr' section", msgid_line)
    if len({token.obsolete for token in tokens[start:at]}) > 1:
        raise FormatError("inconsistent use of #~", first.line)
    return _Message(first.line, context, msgid), at


def _kind(tokens: Sequence[_Token], at: int) -> str | None:
    return tokens[at].kind if at < len(tokens) else None


def _strings(tokens: Sequence[_Token], at: int) -> tuple[str, int]:
    """The strings after the keyword at tokens[at], joined; and the index after them. One at least."""
    keyword, at = tokens[at], at + 1
    parts: list[str] = []
    while _kind(tokens, at) == "string":
        parts.append(tokens[at].text)
        at += 1
    if not parts:
        raise FormatError(f"syntax error: '{keyword.text}' without its string", keyword.line)
    return "".join(parts), at


def _plural_forms(tokens: Sequence[_Token], at: int, msgid_line: int) -> int:
    """msgstr[0], msgstr[1]... in order after a msgid_plural; the index after the last."""
    if _kind(tokens, at) == "msgstr":
        raise FormatError(
            "syntax error: 'msgstr' after 'msgid_plural' (it takes msgstr[0]...)", tokens[at].line
        )
    if _kind(tokens, at) != "msgstr[]":
        raise FormatError("missing 'msgstr[0]' section", msgid_line)
    expected = 0
    while _kind(tokens, at) == "msgstr[]":
        if tokens[at].index != expected:
            problem = (
                "first plural form has nonzero index" if expected == 0 else "plural form has wrong index"
            )
            raise FormatError(problem, tokens[at].line)
        _, at = _strings(tokens, at)
        expected += 1
    return at
