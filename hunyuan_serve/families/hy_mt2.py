"""Hy-MT2-1.8B / 7B / 30B-A3B (2026-05): each instruction in Chinese and English, style and background."""

from __future__ import annotations

from collections.abc import Sequence

from hunyuan_serve.families.base import CONTEXT, GLOSSARY, STYLE, Features, Prompt, chinese_side, user_prompt
from hunyuan_serve.languages import Language

NAME = "hy-mt2"
FEATURES = (GLOSSARY, CONTEXT, STYLE)

# Source for every template here: Tencent-Hunyuan/Hy-MT2, README.md and README_CN.md (the same table),
# "Hy-MT2 Translation Task Instruction Examples (Chinese-English Comparison)". The table is Markdown:
# its bold/italic marks and <br> line breaks are rendering, so the text is the rendered one ("<br>" is
# "\n"), and the spaces Markdown needs around the `{target_lang}` code spans are dropped in the Chinese
# prompts (HY-MT1.5's identical sentence has none). The README's transformers example
# ("将以下文本翻译成英语,注意...:") disagrees with its own table in one character and in ASCII
# punctuation; the table is the documented template, so the table wins (pinned in tests/families).
# Which column to use is not stated: as in both earlier generations, the Chinese prompt when Chinese is
# on either side, else the English one; the note under the table asks for Chinese language names in
# Chinese prompts and English names in English ones.
ZH, EN = "zh", "en"
DEFAULT = {
    ZH: "将以下文本翻译为{target}，注意只需要输出翻译后的结果，不要额外解释：\n\n{text}",
    EN: "Translate the following text into {target}. Note that you should only output the translated "
    "result without any additional explanation:\n\n{text}",
}
# "Terminology": the Chinese column has no empty line between the terms and the instruction, the
# English one has; each column is kept as written.
TERMS = {
    ZH: (
        "参考下面的翻译：\n",
        "{source} 翻译成 {target}\n",
        "将以下文本翻译为{target}，注意只需要输出翻译后的结果，不要额外解释：\n\n{text}",
    ),
    EN: (
        "Reference the following translations:\n",
        "{source} translates to {target}\n",
        "\nTranslate the following text into {target}. Note that you must ONLY output the translated "
        "result without any additional explanation:\n\n{text}",
    ),
}
STYLE_TEMPLATE = {
    ZH: "请将以下文本翻译为{target}。\n注意翻译的风格要严格符合【{style}】\n\n{text}",
    EN: "Please translate the following text into {target}. Note that the translation style must strictly "
    "conform to [{style}]:\n\n{text}",
}
# "Structured Data 2" is the background prompt: the service's `context` field.
BACKGROUND = {
    ZH: "【背景信息】\n{context}\n\n请结合背景信息将以下文本翻译为{target}。\n\n【待翻译文本】\n{text}",
    EN: "[Background Information]\n{context}\n\nPlease translate the following text into {target}, taking "
    "the provided background information into consideration.\n\n[Source Text]\n{text}",
}
# "Personalization": numbered user preferences, the last item the translation task.
PERSONALIZATION = {
    ZH: (
        "【待翻译文本】\n{text}\n\n【翻译任务】\n",
        "{n}、{item}\n",
        "{n}、将【待翻译文本】翻译为{target}。",
    ),
    EN: (
        "[Source Text]\n{text}\n\n[Translation Tasks]\n",
        "{n}. {item}\n",
        "{n}. Translate the [Source Text] into {target}.",
    ),
}
DELIMITERS = {
    ZH: "请将以下文本准确翻译为{target}。\n你必须在译文中保留等量的分隔符，"
    "绝对不可遗漏、转义或翻译该符号，并注意分隔符的位置。\n\n{text}",
    EN: "Please accurately translate the following text into {target}.\nYou must retain the exact same "
    "number of delimiters in the translation. Strictly do not omit, escape, or translate these symbols, "
    "and pay close attention to their placement.\n\n{text}",
}
# "Structured Data 1". Only the English column: the Chinese one puts `{source_text}` inside its task
# line as well as under "# 数据输入", which would send the data twice (a slip in the table).
STRUCTURED = (
    "### Task\nTranslate the user-facing text within the following {format_type} data into {target}.\n\n"
    "### Strict Rules\n1. Structure Preservation: You MUST preserve the original {format_type} data "
    "structure, nesting, hierarchy, and indentation exactly as they are.\n2. Selective Translation: "
    "Translate ONLY the visible, user-facing text content/values.\n3. Strict Non-Translation: NEVER "
    "translate or alter code tags, keys, properties, object names, or variable placeholders. Leave them "
    "exactly in their original English/code form.\n\n### Source Data\n{text}"
)


def _lang(source: Language, target: Language) -> tuple[str, str]:
    """The column and the target's name in that column's language."""
    return (ZH, target.chinese_name) if chinese_side(source, target) else (EN, target.name)


def build(source: Language, target: Language, text: str, features: Features) -> Prompt:
    """The table's prompt for the one feature asked for, else its default translation prompt."""
    col, name = _lang(source, target)
    if features.terms:
        head, line, tail = TERMS[col]
        lines = "".join(line.format(source=s, target=t) for s, t in features.terms)
        return user_prompt(head + lines + tail.format(target=name, text=text))
    if features.context:
        return user_prompt(BACKGROUND[col].format(context=features.context, target=name, text=text))
    if features.style:
        return user_prompt(STYLE_TEMPLATE[col].format(style=features.style, target=name, text=text))
    return user_prompt(DEFAULT[col].format(target=name, text=text))


def personalization(source: Language, target: Language, text: str, preferences: Sequence[str]) -> Prompt:
    """The "Personalization" prompt: each preference a numbered task, then the translation task."""
    col, name = _lang(source, target)
    head, item, tail = PERSONALIZATION[col]
    items = "".join(item.format(n=n, item=pref) for n, pref in enumerate(preferences, 1))
    return user_prompt(head.format(text=text) + items + tail.format(n=len(preferences) + 1, target=name))


def delimiters(source: Language, target: Language, text: str) -> Prompt:
    """The "Delimiters" prompt: keep every delimiter, in number and place."""
    col, name = _lang(source, target)
    return user_prompt(DELIMITERS[col].format(target=name, text=text))


def structured(target: Language, text: str, format_type: str) -> Prompt:
    """The "Structured Data 1" prompt (English column, see STRUCTURED) for JSON, YAML, XML... data."""
    return user_prompt(STRUCTURED.format(format_type=format_type, target=target.name, text=text))
