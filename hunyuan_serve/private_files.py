"""Secret files (API keys, the peer secret, TLS keys) must not be readable by other users."""

from __future__ import annotations

import os
import stat
from pathlib import Path

# Group or other may neither read nor write a secret: anyone on the host could copy it, or swap it.
_OPEN_BITS = stat.S_IRWXG | stat.S_IRWXO


def exposed_problem(path: str | Path, what: str) -> str | None:
    """Why the secret file at path is unsafe to start with (readable or writable by others), with the
    fix; None when only its owner can read it, or when it does not exist (its reader says so).

    A file another user owns is left alone: that is a secret mounted for this process (a container's
    or a Kubernetes Secret volume, root's, 0644 by default), which `chmod 600` would lock this user
    out of; who may read it there is the mount's to say."""
    try:
        found = Path(path).stat()
    except OSError:
        return None
    mode = stat.S_IMODE(found.st_mode)
    if mode & _OPEN_BITS == 0 or found.st_uid != os.getuid():
        return None
    return f"{what} {path} has mode {mode:04o}: others may read it; run: chmod 600 {path}"
