"""A replica-like FastAPI app under uvicorn for the one-write test: `one_write_server.py PORT PROTOCOL`."""

from __future__ import annotations

import sys

import uvicorn
from fastapi import FastAPI
from fastapi.responses import JSONResponse

from hunyuan_serve.replica.onewrite import OneWriteProtocol

BODY_TEXT = "译" * 60_000  # ~180 KB of UTF-8: far more than one TCP segment on loopback

app = FastAPI()


@app.post("/translate")
async def translate() -> JSONResponse:
    return JSONResponse({"translation": BODY_TEXT, "end": "END-OF-BODY"})


def main() -> None:
    port, protocol = int(sys.argv[1]), sys.argv[2]
    http: object = OneWriteProtocol if protocol == "onewrite" else protocol
    uvicorn.run(app, host="127.0.0.1", port=port, http=http, log_level="warning")  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
