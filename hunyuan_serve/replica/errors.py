"""ApiError: a refusal with a status, a stable code and a message, rendered as its API declares."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping

from fastapi.responses import JSONResponse

from hunyuan_serve.edge.dialects import Dialect, dialect_of
from hunyuan_serve.families.base import FeatureUnsupported

CHAT_TEMPLATE_MISSING = "chat_template_missing"
# Messages a tokenizer or engine error puts in a 400 are cut here (a template may quote a whole prompt).
_FAULT_CHARS = 300


class ApiError(Exception):
    """An HTTP error: status, machine-readable code, message for people, and optional headers."""

    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}


def render_error(dialect: Dialect, err: ApiError) -> JSONResponse:
    """A refusal as its API answers it: the status it declares for the code, its shape, its headers."""
    status = dialect.status_of(err.code, err.status)
    body = dialect.shape(err.code, err.message, status)
    return JSONResponse(body, status_code=status, headers={**err.headers, **dialect.headers})


def renderer(path: str) -> Callable[[ApiError], JSONResponse]:
    """The error renderer of the API a path belongs to (edge/dialects.py's declarations)."""
    return functools.partial(render_error, dialect_of(path))


class FeatureRefused(ApiError):
    """The 400 for request fields the model family has no prompt for: each API can name them as its
    clients call them (named)."""

    def __init__(self, cause: FeatureUnsupported) -> None:
        super().__init__(400, "unsupported_feature", str(cause))
        self.cause = cause

    def named(self, names: Mapping[str, str]) -> ApiError:
        """The same refusal with the features called by `names` (feature -> the API's parameter)."""
        return ApiError(self.status, self.code, self.cause.message(names), self.headers)


class NoChatTemplate(ValueError):
    """The checkpoint's tokenizer has no chat template, so chat messages cannot become a prompt."""

    def __init__(self) -> None:
        super().__init__(
            "this model's checkpoint has no chat template (tokenizer.chat_template is not set), so chat "
            "messages cannot be turned into a prompt for it; send the text as a prompt to /v1/completions, "
            "or translate it with /translate"
        )


def request_fault(err: Exception) -> ApiError | None:
    """The 400 for an engine-side error that the request caused, or None for a failure of the engine.

    The chat template's own refusals (jinja's TemplateError, e.g. roles that do not alternate) and the
    ValueErrors with which the tokenizer and vLLM refuse an input are the request's fault, as vLLM's own
    server answers them: retrying the same request elsewhere would fail the same way.
    """
    from jinja2 import TemplateError

    if isinstance(err, NoChatTemplate):
        return ApiError(400, CHAT_TEMPLATE_MISSING, str(err))
    if isinstance(err, (ValueError, TemplateError)):
        detail = str(err)[:_FAULT_CHARS] or type(err).__name__
        return ApiError(400, "invalid_request", f"the model cannot take this request: {detail}")
    return None
