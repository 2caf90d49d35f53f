"""Uvicorn's HTTP protocol with every response written in one piece: no half-sent answer."""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class CoalescingTransport:
    """Joins the writes made in one event-loop step into a single transport.write.

    Uvicorn writes a response's status line and headers at http.response.start and its body at
    http.response.body; Starlette sends both without yielding, so here they leave as one send():
    a replica frozen or killed mid-answer has then sent Nginx nothing at all, and Nginx can retry the
    request on another replica instead of passing on a cut response. A stream's chunks, sent in
    separate steps, still go out one by one.
    """

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self._pending:
            self._loop.call_soon(self.flush)
        self._pending.append(bytes(data))

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if not self._pending:
            return
        data = b"".join(self._pending)
        self._pending.clear()
        if not self._transport.is_closing():
            self._transport.write(data)

    def close(self) -> None:
        self.flush()  # a `connection: close` response is written, then closed, in the same step
        self._transport.close()

    def abort(self) -> None:
        self._pending.clear()
        self._transport.abort()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + sum(len(p) for p in self._pending)

    def __getattr__(self, name: str) -> Any:
        # Everything else (is_closing, pause_reading, get_extra_info...) is the socket transport's.
        return getattr(self._transport, name)


class OneWriteProtocol(HttpToolsProtocol):
    """HttpToolsProtocol whose responses go through a CoalescingTransport (uvicorn's `http=` class)."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.transport = CoalescingTransport(transport, self.loop)  # type: ignore[assignment]
