"""OpenAI request parsing: bytes in, checked prompts and sampling (or Weblate's strings), or a 400."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from dataclasses import dataclass
from typing import Any

from hunyuan_serve.config import ReplicaConfig
from hunyuan_serve.families.base import GLOSSARY, GlossaryInvalid, Prompt
from hunyuan_serve.families.build import CHAT_MAX_TOKENS, families_with, feature_limits
from hunyuan_serve.families.glossary import Terms, parse_request_glossary
from hunyuan_serve.languages import Language, UnknownLanguage, find_language
from hunyuan_serve.replica.apis.openai_tasks import Task, structured_task
from hunyuan_serve.replica.apis.openai_tools import tool_task
from hunyuan_serve.replica.context import ReplicaContext
from hunyuan_serve.replica.engine.interface import Sampling
from hunyuan_serve.replica.errors import ApiError
from hunyuan_serve.replica.schema import TranslateRequest, decode_body, parse_sampling

# Weblate's OpenAI backend (weblate/machinery/openai.py): strings joined by SEPARATOR in one user message,
# the languages in its system prompt ("from language 'en'\nto language 'cs'"); it splits the answer on it.
WEBLATE_SEPARATOR = "\n==WEBLATE_PART==\n"
_WEBLATE_GLOSSARY = "Use the following glossary during the translation:\n"
_WEBLATE_LANGUAGES = re.compile(r"from language '([^'\n]{1,64})'\s+to language '([^'\n]{1,64})'")

# Fields that do not change the answer (accepted, ignored) and those we cannot honour (a 400 naming them,
# unless sent with the value that means "off").
_IGNORED = {"user", "store", "metadata", "service_tier", "parallel_tool_calls", "reasoning_effort"}
# llama.cpp's server fields that SubtitleEdit's batch engines send (LlamaCppAdvancedClient.cs): a cache
# hint (ignored), and its name for repetition_penalty (taken as that).
_IGNORED |= {"cache_prompt"}
_ALIASES = {"repeat_penalty": "repetition_penalty"}
_OFF_VALUES: dict[str, tuple[Any, ...]] = {
    "n": (None, 1),
    "tools": (None, []),
    "tool_choice": (None, "none"),
    "functions": (None, []),
    "function_call": (None, "none"),
    "logprobs": (None, False),
    "top_logprobs": (None, 0),
    "logit_bias": (None, {}),
    "modalities": (None, ["text"]),
    "audio": (None,),
    "prediction": (None,),
    "seed": (None,),
    "echo": (None, False),
    "suffix": (None, ""),
    "best_of": (None, 1),
}
_BUDGETS = ("max_tokens", "max_completion_tokens")
_SAMPLING = {"temperature", "top_p", "top_k", "repetition_penalty", *_BUDGETS}
_COMMON = {"model", "stream", "stream_options", "stop", "presence_penalty", "frequency_penalty", *_SAMPLING}
_COMMON |= set(_ALIASES)
_CHAT_KEYS = {"messages", "response_format", *_COMMON, *_IGNORED, *_OFF_VALUES} - {
    "echo",
    "suffix",
    "best_of",
}
_COMPLETION_KEYS = {"prompt", "response_format", *_COMMON, *_IGNORED, *_OFF_VALUES} - {
    "tools",
    "tool_choice",
    "functions",
}
_ROLES = {"system", "developer", "user", "assistant"}
MAX_STOPS = 4  # OpenAI's own limit
_QUOTED_CHARS = 40  # an unsupported parameter's value is quoted in the refusal up to this long


def _bad(code: str, message: str) -> ApiError:
    return ApiError(400, code, message)


@dataclass(frozen=True)
class Parsed:
    """A checked request: its prompts (or Weblate's strings), sampling and stream options."""

    prompts: tuple[Prompt, ...]
    sampling: Sampling
    stream: bool
    include_usage: bool
    weblate: TranslateRequest | None = None
    weblate_parts: tuple[str, ...] = ()  # every string as sent; blank ones are answered as they came
    task: Task | None = None  # Weblate 2026's structured localization task, answered with JSON built here


def _check_fields(data: dict[str, Any], known: set[str]) -> None:
    unknown = sorted(set(data) - known)
    if unknown:
        raise _bad("unknown_parameter", f"unrecognized request argument(s): {', '.join(unknown)[:200]}")
    for key, off in _OFF_VALUES.items():
        if key in data and not _is_off(data[key], off):
            raise _bad("unsupported_parameter", _unsupported(key, data[key], off))


def _is_off(value: Any, off: tuple[Any, ...]) -> bool:
    """One of the values that mean "off", of its JSON type too (0 is not false, as in JSON)."""
    return any(value == each and type(value) is type(each) for each in off)


def _unsupported(key: str, value: Any, off: tuple[Any, ...]) -> str:
    """The refusal of a parameter set to a value this server cannot honour: a short value quoted whole,
    a long one (a list of tools) not at all (never cut mid-way), and the values it takes."""
    shown = json.dumps(value, ensure_ascii=False)
    given = f"{key}={shown}" if len(shown) <= _QUOTED_CHARS else key
    taken = " or ".join(json.dumps(each) for each in off)
    return f"{given} is not supported here; send {taken}, or leave {key} out"


def _model(data: dict[str, Any], served: str) -> None:
    model = data.get("model")
    if model is None:
        return  # lenient: the one model served
    if not isinstance(model, str):
        raise _bad("invalid_parameter", "model must be a string")
    if model != served:
        raise ApiError(
            404, "model_not_found", f"the model '{model[:100]}' does not exist; this server serves '{served}'"
        )


def _penalty(data: dict[str, Any], key: str) -> float:
    value = data.get(key)
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _bad("invalid_parameter", f"{key} must be a number, got {json.dumps(value)[:40]}")
    if not -2.0 <= value <= 2.0:
        raise _bad("invalid_parameter", f"{key} must be in [-2, 2], got {value}")
    return float(value)


def _sampling(data: dict[str, Any], replica: ReplicaContext) -> Sampling:
    """OpenAI's fields onto ours (the family's defaults where none is sent); top_k and repetition_penalty
    are vLLM's extra body fields."""
    fields = {key: data[key] for key in _SAMPLING if key in data}
    for theirs, ours in _ALIASES.items():
        if theirs in data and ours in data:  # both sent: the alias is still checked, then left
            parse_sampling({ours: data[theirs]}, replica.sampling, 1, replica.engine.max_model_len)
        elif theirs in data:
            fields[ours] = data[theirs]
    if "max_completion_tokens" in fields:
        fields.setdefault("max_tokens", fields.pop("max_completion_tokens"))
        fields.pop("max_completion_tokens", None)
    base = parse_sampling(fields, replica.sampling, replica.cfg.max_tokens, replica.engine.max_model_len)
    return dataclasses.replace(
        base,
        presence_penalty=_penalty(data, "presence_penalty"),
        frequency_penalty=_penalty(data, "frequency_penalty"),
    )


def _stops(data: dict[str, Any]) -> tuple[str, ...]:
    stop = data.get("stop")
    if stop is None:
        return ()
    stops = [stop] if isinstance(stop, str) else stop
    if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops):
        raise _bad("invalid_parameter", "stop must be a non-empty string or a list of them")
    if len(stops) > MAX_STOPS:
        raise _bad("invalid_parameter", f"stop has {len(stops)} strings; the limit is {MAX_STOPS}")
    return tuple(stops)


def _stream_options(data: dict[str, Any]) -> tuple[bool, bool]:
    stream = data.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise _bad("invalid_parameter", "stream must be true or false")
    options = data.get("stream_options")
    if options is None:
        return stream, False
    if not isinstance(options, dict) or set(options) - {"include_usage", "include_obfuscation"}:
        raise _bad("invalid_parameter", "stream_options must be an object with include_usage")
    usage = options.get("include_usage", False)
    if not isinstance(usage, bool):
        raise _bad("invalid_parameter", "stream_options.include_usage must be true or false")
    return stream, usage


def _text(value: Any, where: str) -> str:
    """A message's content: a string, or OpenAI's list of text parts (joined)."""
    if isinstance(value, list):
        parts = []
        for index, part in enumerate(value):
            if (
                not isinstance(part, dict)
                or part.get("type") != "text"
                or not isinstance(part.get("text"), str)
            ):
                raise _bad(
                    "unsupported_content", f"{where}[{index}] must be a text part; only text is supported"
                )
            parts.append(part["text"])
        value = "\n".join(parts)
    if not isinstance(value, str):
        raise _bad("invalid_parameter", f"{where} must be a string or a list of text parts")
    if "\x00" in value:
        raise _bad("invalid_text", f"{where} contains a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise _bad("invalid_text", f"{where} contains a lone surrogate (\\u escape)") from None
    return value


def _messages(data: dict[str, Any], cfg: ReplicaConfig) -> list[tuple[str, str]]:
    messages = data.get("messages")
    if not isinstance(messages, list):
        raise _bad("invalid_parameter", "messages must be a list of {role, content} objects")
    if not messages:
        raise _bad("empty_messages", "messages must not be empty")
    if len(messages) > cfg.max_chat_messages:
        limit = cfg.max_chat_messages
        raise _bad("too_many_messages", f"{len(messages)} messages; the limit is {limit} (max_chat_messages)")
    out: list[tuple[str, str]] = []
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, dict) or set(message) - {"role", "content", "name"}:
            raise _bad("invalid_parameter", f"{where} must be an object with role and content (name allowed)")
        role = message.get("role")
        if not isinstance(role, str) or role not in _ROLES:
            raise _bad("unsupported_role", f"{where}.role must be one of {', '.join(sorted(_ROLES))}")
        content = message.get("content")
        out.append(
            (role, "" if content is None and role == "assistant" else _text(content, where + ".content"))
        )
    if not any(role == "user" for role, _ in out):
        raise _bad("missing_user_message", "messages need at least one user message")
    return out


def system_text(messages: list[tuple[str, str]]) -> str:
    """Every system (or developer) message's text, in order, a blank line between them."""
    return "\n\n".join(text for role, text in messages if role in {"system", "developer"} and text.strip())


def fold_system(messages: list[tuple[str, str]], mode: str) -> tuple[dict[str, str], ...]:
    """The chat without system turns: the models have no system prompt, so with `prepend` the system
    text and a blank line open the first user message; `drop` leaves it out; `reject` is a 400."""
    system = system_text(messages)
    if system and mode == "reject":
        raise _bad(
            "unsupported_system_prompt", "system messages are refused here (system_prompt_mode reject)"
        )
    turns: list[dict[str, str]] = []
    for role, text in messages:
        if role in {"system", "developer"}:
            continue
        if role == "user" and system and mode == "prepend" and not any(t["role"] == "user" for t in turns):
            text = f"{system}\n\n{text}"
        turns.append({"role": role, "content": text})
    return tuple(turns)


def _language(code: str) -> Language:
    try:
        return find_language(code)
    except UnknownLanguage as err:
        raise _bad("unsupported_language", f"Weblate's system prompt names {err}") from None


def weblate_glossary(system: str, family: str, cfg: ReplicaConfig) -> Terms:
    """Weblate's glossary (its heading, then `source<TAB>target` lines) for a family with a terminology
    prompt, each string's prompt getting the terms in it; () for the others, which have no place for it."""
    head = system.find(_WEBLATE_GLOSSARY)
    if head < 0 or family not in families_with(GLOSSARY):
        return ()
    pairs = []
    for line in system[head + len(_WEBLATE_GLOSSARY) :].split("\n"):
        if "\t" not in line:
            break  # the glossary ends at the first line that is not a pair
        source, _, target = line.partition("\t")
        pairs.append({"source": source, "target": target})
    limits = feature_limits(cfg)
    try:
        return parse_request_glossary(pairs, limits.glossary_terms, limits.term_chars)
    except GlossaryInvalid as err:
        raise _bad("invalid_glossary", f"Weblate's glossary: {err}") from None


def weblate_request(
    messages: list[tuple[str, str]], sampling: Sampling, cfg: ReplicaConfig, family: str
) -> tuple[TranslateRequest, tuple[str, ...]] | None:
    """A Weblate chat (system prompt naming the languages, then one user message of strings) as a batch
    of its strings, the blank ones left out; None when it is not one."""
    found = _WEBLATE_LANGUAGES.search(system_text(messages))
    users = [text for role, text in messages if role == "user"]
    if (
        not cfg.weblate_split
        or found is None
        or len(users) != 1
        or any(r == "assistant" for r, _ in messages)
    ):
        return None
    parts = tuple(users[0].split(WEBLATE_SEPARATOR))
    texts = tuple(part for part in parts if part.strip())
    if not texts:
        raise _bad("empty_text", "every string of the Weblate request is empty")
    if len(texts) > cfg.max_batch_texts:
        raise _bad(
            "too_many_texts", f"{len(texts)} strings in one request; the limit is {cfg.max_batch_texts}"
        )
    source, target = _language(found.group(1)), _language(found.group(2))
    glossary = weblate_glossary(system_text(messages), family, cfg)
    req = TranslateRequest(
        texts=texts, batch=True, source=source, target=target, sampling=sampling, glossary=glossary
    )
    return req, parts


def _response_format(data: dict[str, Any]) -> None:
    """Only text: a JSON object or schema asks the model to write JSON around the translations, which a
    translation model does not do reliably; the refusal says what works instead. The tools whose shape
    is known (Weblate's, Tolgee's, SubtitleEdit's) get their JSON built as a task before this."""
    fmt = data.get("response_format")
    if fmt is None or fmt == {"type": "text"}:
        return
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    raise _bad(
        "unsupported_response_format",
        f"response_format {json.dumps(kind)[:40]} is not supported here: the model is a translation model "
        "and answers with the translation alone, never JSON; send one text per request without "
        'response_format (or {"type": "text"}), or batch strings through /translate, /v2/translate '
        "or /libretranslate/translate",
    )


def parse_chat(raw: bytes, replica: ReplicaContext) -> Parsed:
    data = decode_body(raw)
    _check_fields(data, _CHAT_KEYS)
    _model(data, replica.engine.model_name)
    messages = _messages(data, replica.cfg)
    stream, usage = _stream_options(data)
    stops = _stops(data)
    # Weblate's chats are matched on their shape, whatever system_prompt_mode does with others.
    task = structured_task(messages, replica.cfg.max_batch_texts) if replica.cfg.weblate_split else None
    task = task or tool_task(messages, data, replica.cfg.max_batch_texts)
    if task is not None:
        # The client's budget is for the whole JSON it expected (SubtitleEdit sizes it by the batch,
        # Tolgee asks 800), not for one string: each string gets the family's own.
        unbudgeted = {key: value for key, value in data.items() if key not in _BUDGETS}
        return Parsed((), _sampling(unbudgeted, replica), stream, usage, task=task)
    sampling = _sampling(data, replica)
    _response_format(data)
    packed = weblate_request(messages, sampling, replica.cfg, replica.translator.family)
    if packed is not None:
        return Parsed((), sampling, stream, usage, packed[0], packed[1])
    turns = fold_system(messages, replica.cfg.system_prompt_mode)
    sampling = _chat_budget(data, sampling, replica.translator.family)
    return Parsed((Prompt(messages=turns, stop=stops),), sampling, stream, usage)


def _chat_budget(data: dict[str, Any], sampling: Sampling, family: str) -> Sampling:
    """A chat that names no max_tokens, for a family whose model ends no chat turn: at most the family's
    chat budget (the request may still ask for more)."""
    bound = CHAT_MAX_TOKENS.get(family)
    if bound is None or data.get("max_tokens") is not None or data.get("max_completion_tokens") is not None:
        return sampling
    return dataclasses.replace(sampling, max_tokens=min(sampling.max_tokens, bound))


def parse_completion(raw: bytes, replica: ReplicaContext) -> Parsed:
    data = decode_body(raw)
    _check_fields(data, _COMPLETION_KEYS)
    _model(data, replica.engine.model_name)
    _response_format(data)
    prompt = data.get("prompt")
    items = [prompt] if isinstance(prompt, str) else prompt
    if not isinstance(items, list) or not items:
        raise _bad("invalid_parameter", "prompt must be a string or a non-empty list of strings")
    if len(items) > replica.cfg.max_batch_texts:
        raise _bad("too_many_prompts", f"{len(items)} prompts; the limit is {replica.cfg.max_batch_texts}")
    texts = [
        _text(item, f"prompt[{index}]") if isinstance(item, str) else None for index, item in enumerate(items)
    ]
    if any(text is None or not text.strip() for text in texts):
        raise _bad("invalid_parameter", "every prompt must be a non-blank string (token ids are not taken)")
    stream, usage = _stream_options(data)
    if stream and len(items) > 1:
        raise _bad("unsupported_parameter", "stream works with one prompt, not a list")
    stops = _stops(data)
    prompts = tuple(Prompt(text=text, stop=stops) for text in texts if text is not None)
    return Parsed(prompts, _sampling(data, replica), stream, usage)
