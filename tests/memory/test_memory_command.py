"""`hunyuan-serve memory import|export|list|delete`, run as a reader runs it, on a run dir's store."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from lxml import etree

from hunyuan_serve.memory.tmx import read_tmx
from tests.memory.test_tmx import WEBLATE
from tests.support.stacks import cli

DTD = Path(__file__).with_name("tmx14.dtd")


def _memory(run_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = cli("memory", *args, "--run-dir", str(run_dir))
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


def test_import_list_export_and_delete_the_shared_memory(tmp_path: Path) -> None:
    run_dir, tmx = tmp_path / "run", tmp_path / "weblate.tmx"
    tmx.write_text(WEBLATE, encoding="utf-8")
    done = _memory(run_dir, "import", str(tmx))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("imported 2 units from weblate.tmx as ")
    listed = json.loads(_memory(run_dir, "list", "--json").stdout)["imports"]
    assert [(each["file"], each["units"], each["tool"]) for each in listed] == [
        ("weblate.tmx", 2, "Translate Toolkit")
    ]
    assert "(hunyuan-serve memory import)" in listed[0]["by"]
    out = tmp_path / "out.tmx"
    assert _memory(run_dir, "export", str(out)).returncode == 0
    assert etree.DTD(str(DTD)).validate(etree.parse(str(out)))
    assert [u.target for u in read_tmx(out.read_bytes()).units] == ["总批次数", "迭代步数"]
    # A key's memory is another one.
    assert json.loads(_memory(run_dir, "list", "--json", "--key", "sk-a").stdout)["imports"] == []
    assert _memory(run_dir, "delete", listed[0]["id"]).stdout.strip() == "deleted 2 units"
    assert _memory(run_dir, "delete", "--all").returncode == 1  # nothing left to delete


def test_a_malformed_file_is_refused_naming_its_line(tmp_path: Path) -> None:
    tmx = tmp_path / "bad.tmx"
    tmx.write_text(WEBLATE.replace("</seg>", "", 1), encoding="utf-8")
    done = _memory(tmp_path / "run", "import", str(tmx))
    assert done.returncode == 1 and "TMX line 7" in done.stderr, done.stderr
    assert _memory(tmp_path / "run", "list").stdout.strip() == "the memory is empty"
