"""HY-MT1.5-1.8B / HY-MT1.5-7B (2025-12): new templates, terminology, contextual and formatted translation."""

from __future__ import annotations

from hunyuan_serve.families.base import (
    CONTEXT,
    GLOSSARY,
    PRESERVE_FORMAT,
    Features,
    Prompt,
    chinese_side,
    user_prompt,
)
from hunyuan_serve.families.format_tags import wrap
from hunyuan_serve.languages import Language

NAME = "hy-mt1.5"
FEATURES = (GLOSSARY, CONTEXT, PRESERVE_FORMAT)

# Source for every template here: Tencent-Hunyuan/HY-MT, README.md (and README_CN.md, same text), "Prompts".
# "Prompt Template for ZH<=>XX Translation."
ZH_TEMPLATE = "将以下文本翻译为{target}，注意只需要输出翻译后的结果，不要额外解释：\n\n{text}"
# "Prompt Template for XX<=>XX Translation, excluding ZH<=>XX."
EN_TEMPLATE = "Translate the following segment into {target}, without additional explanation.\n\n{text}"
# "Prompt Template for terminology intervention." One "X 翻译成 Y" line per term (the README shows one;
# Hy-MT2's README, same wording, shows several, one a line). Chinese instruction for every pair: the
# README has no English variant, so the target is named in Chinese.
TERMS_HEAD = "参考下面的翻译：\n"
TERM_LINE = "{source} 翻译成 {target}\n"
TERMS_TAIL = "\n将以下文本翻译为{target}，注意只需要输出翻译后的结果，不要额外解释：\n{text}"
# "Prompt Template for contextual translation." The README's code block ends with an empty line after
# {source_text}; no other template ends so, and it reads as the block's layout, so no trailing newline.
CONTEXT_TEMPLATE = (
    "{context}\n参考上面的信息，把下面的文本翻译成{target}，注意不需要翻译上文，也不要额外解释：\n{text}"
)
# "Prompt Template for formatted translation." The README's text says "翻译为中文" (into Chinese) where
# every other template has {target_language}: it is the example's target, so the target goes there.
FORMAT_TEMPLATE = (
    "将以下<source></source>之间的文本翻译为{target}，注意只需要输出翻译后的结果，不要额外解释，"
    "原文中的<sn></sn>标签表示标签内文本包含格式信息，需要在译文中相应的位置尽量保留该标签。"
    "输出格式为：<target>str</target>\n\n<source>{text}</source>"
)


def build(source: Language, target: Language, text: str, features: Features) -> Prompt:
    """The README's template for the one feature asked for, else the plain ZH<=>XX / XX<=>XX one."""
    if features.terms:
        lines = "".join(TERM_LINE.format(source=s, target=t) for s, t in features.terms)
        return user_prompt(TERMS_HEAD + lines + TERMS_TAIL.format(target=target.chinese_name, text=text))
    if features.context:
        content = CONTEXT_TEMPLATE.format(context=features.context, target=target.chinese_name, text=text)
        return user_prompt(content)
    if features.preserve_format:
        return user_prompt(FORMAT_TEMPLATE.format(target=target.chinese_name, text=wrap(text).text))
    if chinese_side(source, target):
        return user_prompt(ZH_TEMPLATE.format(target=target.chinese_name, text=text))
    return user_prompt(EN_TEMPLATE.format(target=target.name, text=text))
