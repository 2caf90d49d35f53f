"""GNU msgfmt --check on a catalog's text, where msgfmt is installed: its first fatal error, with its line."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

from hunyuan_serve.localization.formats.base import FormatError

_LOCATED = re.compile(r"^<stdin>:(\d+)(?::\d+)?: (.*)$")
_PREFIX = "msgfmt: <stdin>: "


def msgfmt_check(text: str) -> None:
    """Raise a FormatError naming msgfmt's first fatal error in text; nothing when it passes or there
    is no msgfmt (deploy/install.sh installs gettext; the PO grammar is checked here all the same)."""
    program = shutil.which("msgfmt")
    if program is None:
        return
    done = subprocess.run(
        [program, "--check", "-o", os.devnull, "-"],
        input=text.encode("utf-8"),
        capture_output=True,
        check=False,
        env={**os.environ, "LC_ALL": "C"},  # its messages in English, as they are parsed here
    )
    if done.returncode != 0:
        raise _first_error(done.stderr.decode("utf-8", "replace"))


def _first_error(stderr: str) -> FormatError:
    """msgfmt's first located error that is not a warning; else what it says of the file as a whole (a
    missing header is fatal under --check but printed as a warning)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for line in lines:
        found = _LOCATED.match(line)
        if found and not found.group(2).startswith("warning:"):
            return FormatError(f"{found.group(2)} (msgfmt --check)", int(found.group(1)))
    general = [line.removeprefix(_PREFIX) for line in lines if not _LOCATED.match(line)]
    return FormatError("; ".join(general) + " (msgfmt --check)")
