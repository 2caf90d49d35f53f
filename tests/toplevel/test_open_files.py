"""The open-files soft limit: raised to the hard one by every `hunyuan-serve` command, and inherited."""

from __future__ import annotations

import subprocess
import sys

# A command run from a shell whose soft limit is low, as a login shell's 1,024 is; then what the
# process and a child it starts (as up starts Nginx and the replicas) have.
PROBE = """
import contextlib, io, resource, subprocess
from hunyuan_serve.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    assert main(["prompt", "--family", "hunyuan-mt", "--from", "en", "--to", "zh", "Hello"]) == 0
child = subprocess.run(["sh", "-c", "ulimit -Sn"], capture_output=True, text=True).stdout.strip()
print(resource.getrlimit(resource.RLIMIT_NOFILE)[0], child)
"""


def _shell(script: str) -> str:
    return subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True).stdout.strip()


def test_a_command_raises_a_low_soft_limit_to_the_hard_one_for_its_children() -> None:
    hard = _shell("ulimit -Hn")
    low = "256" if hard == "unlimited" or int(hard) > 256 else hard
    out = subprocess.run(
        ["sh", "-c", f'ulimit -Sn {low} && exec "$0" -c "$1"', sys.executable, PROBE],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.split()
    # An unlimited hard limit is left alone (the soft one stays); otherwise both reach the hard one.
    expected = low if hard == "unlimited" else hard
    assert out == [expected, expected], (hard, out)
