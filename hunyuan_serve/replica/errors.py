"""ApiError: a refusal with a status, a stable code and a message; each API renders it in its own shape."""

from __future__ import annotations


class ApiError(Exception):
    """An HTTP error: status, machine-readable code, message for people, and optional headers."""

    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}
