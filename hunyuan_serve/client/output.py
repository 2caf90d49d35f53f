"""What `translate` writes: the output file or stdout, the progress bar, the summary, its exit codes."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from hunyuan_serve.client.files import write_atomic

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class ProgressBar:
    """tqdm on stderr (rate and ETA), only when asked for and there is something to send."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._bar: Any = None

    def start(self, total: int) -> None:
        if self.enabled and total:
            from tqdm import tqdm

            self._bar = tqdm(
                total=total, unit="text", desc="translating", file=sys.stderr, dynamic_ncols=True
            )

    def update(self, done: int, total: int) -> None:
        if self._bar is not None:
            self._bar.update(done - self._bar.n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def write_output(output: str, text: str | bytes, encoding: str = "utf-8") -> None:
    """text in its encoding (bytes, a binary format's file, as they are) to the file or stdout."""
    if output == "-":
        if isinstance(text, bytes):
            sys.stdout.flush()
            sys.stdout.buffer.write(text)
            sys.stdout.buffer.flush()
            return
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    # Bytes: line endings and the BOM as the input had them. Latin-1 is only a .properties fallback:
    # characters beyond it become \\uXXXX, Java's escape.
    data = (
        text
        if isinstance(text, bytes)
        else text.encode(encoding, "backslashreplace" if encoding == "latin-1" else "strict")
    )
    write_atomic(Path(output), data)


def print_summary(summary: Any, report: Path | None, shown: int = 20) -> None:
    for failure in summary.failures[:shown]:
        print(f"failed {failure.label}: {failure.problem}: {failure.source[:80]!r}", file=sys.stderr)
    if len(summary.failures) > shown:
        print(f"... and {len(summary.failures) - shown} more failures", file=sys.stderr)
    for flagged in summary.flagged[:shown]:
        print(f"flagged {flagged.label}: {flagged.reason()}: {flagged.source[:80]!r}", file=sys.stderr)
    if len(summary.flagged) > shown:
        print(f"... and {len(summary.flagged) - shown} more flagged (all in --report)", file=sys.stderr)
    if summary.aborted:
        print(f"stopped sending: {summary.aborted}", file=sys.stderr)
    print(summary.line(), file=sys.stderr)
    if report is not None:
        text = json.dumps(summary.as_dict(), ensure_ascii=False, indent=2) + "\n"
        write_atomic(report, text.encode("utf-8"))


def usage_error(message: str) -> int:
    print(f"hunyuan-serve translate: {message}", file=sys.stderr)
    return EXIT_USAGE
