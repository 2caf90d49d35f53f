"""The like-for-like rows' pure parts: pinning, round order, shares, strings, ratios, report lines,
the hand-written nginx.conf (checked by the real `nginx -t`); no engine, no timed assertion."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from bench import likeforlike as lfl
from bench import names
from bench.likeforlike import Comparison, Pin, Round
from bench.run import parse_args
from bench.session import LIKEFORLIKE_ONLY, Plan, lfl_only, only
from bench.targets import Hardware
from hunyuan_serve.localization.formats import Options, parse

CPU, GPU2 = Hardware(), Hardware(("2", "5"))


def test_a_cpu_pin_is_taskset_and_the_openmp_binding_a_gpu_pin_the_visible_device() -> None:
    pin = Pin(cores=(0, 1, 3))
    assert pin.env() == {"VLLM_CPU_OMP_THREADS_BIND": "0-1,3"}
    assert pin.argv(["python", "x"]) == ["taskset", "--cpu-list", "0-1,3", "python", "x"]
    assert pin.label == "core 0-1,3"
    gpu = Pin(gpu="5")
    assert gpu.env() == {"CUDA_VISIBLE_DEVICES": "5"}
    assert (gpu.argv(["python"]), gpu.label) == (["python"], "GPU 5")
    assert (Pin().env(), Pin().argv(["a"]), Pin().label) == ({}, ["a"], "unpinned")


@pytest.mark.parametrize(
    ("hw", "count", "cores", "pins"),
    [
        (CPU, 2, [0, 1], [Pin(cores=(0,)), Pin(cores=(1,))]),
        (CPU, 2, [0, 1, 2, 3], [Pin(cores=(0, 1)), Pin(cores=(2, 3))]),  # as `up` splits them
        (CPU, 1, [1, 0], [Pin(cores=(0, 1))]),
        (GPU2, 2, [0, 1], [Pin(gpu="2"), Pin(gpu="5")]),
        (GPU2, 1, [0, 1], [Pin(gpu="2")]),
    ],
)
def test_the_engines_are_pinned_as_up_pins_its_replicas(
    hw: Hardware, count: int, cores: list[int], pins: list[Pin]
) -> None:
    assert lfl.engine_pins(hw, count, cores) == pins


def test_more_engines_than_gpus_is_refused() -> None:
    with pytest.raises(ValueError, match="3 engines need 3 GPUs"):
        lfl.engine_pins(GPU2, 3, [0])


def test_one_server_takes_the_first_core_and_the_client_the_rest() -> None:
    assert lfl.single_layout(CPU, [1, 0]) == (Pin(cores=(0,)), (1,))
    assert lfl.single_layout(CPU, [0, 1, 2]) == (Pin(cores=(0,)), (1, 2))
    assert lfl.single_layout(GPU2, [0]) == (Pin(gpu="2"), ())
    with pytest.raises(ValueError, match="second core"):
        lfl.single_layout(CPU, [0])


def test_rounds_alternate_between_the_two_setups() -> None:
    assert lfl.alternating(3, "stack", "vllm") == [
        (0, "stack"),
        (0, "vllm"),
        (1, "stack"),
        (1, "vllm"),
        (2, "stack"),
        (2, "vllm"),
    ]
    assert lfl.alternating(0, "a", "b") == []


def test_the_prompts_are_split_in_contiguous_shares_differing_by_one_at_most() -> None:
    assert lfl.split([1, 2, 3, 4, 5], 2) == [[1, 2, 3], [4, 5]]
    assert lfl.split([1, 2], 3) == [[1], [2], []]
    parts = lfl.split(list(range(2000)), 2)
    assert [len(p) for p in parts] == [1000, 1000] and parts[0] + parts[1] == list(range(2000))


def test_plain_strings_are_the_distinct_ones_translate_sends_unchanged() -> None:
    """Repeats, blanks around, symbols and placeholders alone are left out (the client would not send
    them as they are, or at all); a placeholder inside a sentence goes as it is."""
    texts = ["Open file", "Open file", " padded ", "×", "", "{{n}}", "{{count}} files", "Save", "Load"]
    assert lfl.plain_strings(texts, 3) == ["Open file", "{{count}} files", "Save"]
    assert lfl.plain_strings(texts, 10) == ["Open file", "{{count}} files", "Save", "Load"]


def test_the_i18next_file_gives_translate_exactly_the_strings_in_order() -> None:
    strings = [f"String number {i}" for i in range(12)] + ["Open file_one"]
    doc = parse(lfl.i18next_document(strings), "json", Options(target="zh", source="en"))
    assert list(doc.segments) == strings
    assert sorted(json.loads(lfl.i18next_document(strings))) == [f"s{i:02d}" for i in range(13)]


def _row() -> Comparison:
    c = Comparison(names.SINGLE, "One vs one", "stack", "vllm", "req/s", pins=["stack: core 0"], target=1.0)
    c.rounds = [
        Round(0, "stack", 100, 2.0, 1600.0, 3000.0),  # 50/s
        Round(0, "vllm", 100, 1.0, 1600.0, 3000.0),  # 100/s
        Round(1, "stack", 100, 1.0, 1600.0),  # 100/s
        Round(1, "vllm", 100, 1.0, 1600.0),  # 100/s
        Round(2, "stack", 120, 1.0, 1920.0),  # 120/s
        Round(2, "vllm", 100, 1.0, 1600.0),  # 100/s
        Round(3, "stack", 100, 1.0, 1600.0),  # no baseline round 3: not a ratio
    ]
    return c


def test_the_ratio_is_the_median_of_the_rounds_both_setups_completed() -> None:
    c = _row()
    assert c.ratios() == [0.5, 1.0, 1.2]
    assert c.median_ratio() == 1.0
    assert Comparison("x", "x", "a", "b", "req/s").median_ratio() == 0.0
    assert Round(0, "a", 10, 0.0, 0.0).rate == 0.0 and lfl.ratio(3.0, 0.0) == 0.0


def test_a_round_says_its_tokens_per_string() -> None:
    r = Round(0, "stack", 100, 2.0, 1600.0, 3150.0)
    assert (r.rate, r.tokens_each, r.prompt_each) == (50.0, 16.0, 31.5)
    assert Round(0, "stack", 0, 1.0, 0.0).tokens_each == 0.0


def test_the_headline_and_section_give_every_round_and_the_median() -> None:
    c = _row()
    line = lfl.headline(c)
    assert line.startswith("- One vs one: **1.00x** req/s (median of 3 round(s): 0.50x, 1.00x, 1.20x;")
    assert "target >= 1x" in line
    section = lfl.section(c)
    assert section[0] == "### One vs one"
    rows = [s for s in section if s.startswith("| ") and not s.startswith("| round")]
    assert len(rows) == 7
    assert rows[0] == "| 1 | stack | 100 | 2.00 | 50.0 | 16.0 | 30.0 | 0 | 0.0 |  |"
    assert "Ratio stack / vllm per round: 0.50x, 1.00x, 1.20x; median **1.00x**." in section
    assert "- Placed: stack: core 0" in section
    assert lfl.headline(Comparison("x", "Empty", "a", "b", "req/s")) == "- Empty: no complete round."
    assert lfl.report([], ["context"]) == []
    assert lfl.report([c], ["context"])[:3] == [
        "## Like for like: the stack against bare vLLM on the same cores",
        "",
        "context",
    ]


@pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx not installed")
def test_the_hand_written_nginx_conf_is_valid_and_balances_least_conn(tmp_path: Path) -> None:
    text = lfl.assembled_nginx_conf(str(tmp_path), 18080, [18001, 18002])
    assert "least_conn;" in text and "server 127.0.0.1:18001;" in text and "server 127.0.0.1:18002;" in text
    assert "max_conns" not in text and "proxy_next_upstream" not in text  # nothing of the stack's own
    for sub in ("logs", "temp"):
        (tmp_path / sub).mkdir()
    conf = tmp_path / "nginx.conf"
    conf.write_text(text, encoding="utf-8")
    cmd = ["nginx", "-t", "-q", "-p", str(tmp_path), "-c", str(conf), "-e", str(tmp_path / "logs" / "e.log")]
    checked = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
    assert checked.returncode == 0, checked.stderr


def test_only_a_like_for_like_row_runs_that_row_alone() -> None:
    for value, rows in LIKEFORLIKE_ONLY.items():
        plan = only(Plan(), value)
        assert plan.likeforlike == rows and lfl_only(plan)
        assert (plan.baselines, plan.hosts, plan.one_replica) == ((), False, False)
    assert set(LIKEFORLIKE_ONLY[names.LIKEFORLIKE]) == set(lfl.ROWS)
    assert not lfl_only(only(Plan(), names.OVERLOAD)) and only(Plan(), names.OVERLOAD).likeforlike == ()
    assert not lfl_only(Plan())


def test_quick_runs_no_row_unless_asked_and_then_a_smaller_one() -> None:
    full, quick = Plan(), Plan.quick()
    assert full.likeforlike == lfl.ROWS and quick.likeforlike == ()
    assert only(quick, names.JOB).likeforlike == (names.JOB,)
    assert quick.lfl_strings < full.lfl_strings and quick.lfl_rounds < full.lfl_rounds
    assert full.lfl_requests * full.lfl_rounds < 5500  # every round new strings: the cache never answers


def test_the_command_line_takes_the_rows_strings_and_rounds() -> None:
    args = parse_args(["--only", "job", "--strings", "500", "--rounds", "2"])
    assert (args.only, args.strings, args.rounds) == ("job", 500, 2)
    assert parse_args(["--only", "likeforlike"]).strings is None
    with pytest.raises(SystemExit):
        parse_args(["--only", "nothing"])


def test_the_reports_carry_the_rows_first_in_the_headline_and_the_command_to_rerun(tmp_path: Path) -> None:
    from bench.session import Bench
    from bench.write_report import write_likeforlike_report, write_report
    from hunyuan_serve.families import HUNYUAN_SAMPLING

    b = Bench(
        only(Plan(), names.SINGLE), tmp_path, tmp_path / "m", tmp_path / "i.json", "k6", HUNYUAN_SAMPLING
    )
    b.alike = [_row()]
    path = write_likeforlike_report(b, tmp_path / "out", CPU, quick=False, argv=["--only", "single"])
    text = path.read_text()
    assert path.name == "report-likeforlike-single.md"
    assert "flock /tmp/hs-heavy.lock python -m bench.run --only single" in text
    assert "- One vs one: **1.00x** req/s" in text and "### One vs one" in text
    full = write_report(b, tmp_path / "full", {}, quick=False, hardware=CPU).read_text()
    headline = full.split("## Headline", 1)[1].split("##", 1)[0].strip().splitlines()
    assert headline[0].startswith("- One vs one: **1.00x**")
    assert "## Like for like: the stack against bare vLLM on the same cores" in full


def test_on_gpus_the_rows_are_skipped_and_the_report_says_why(tmp_path: Path) -> None:
    from bench.likeforlike_run import run_rows
    from bench.likeforlike_sides import GPU_SKIPPED
    from bench.session import Bench
    from hunyuan_serve.families import HUNYUAN_SAMPLING

    b = Bench(Plan(), tmp_path, tmp_path / "m", tmp_path / "i.json", "k6", HUNYUAN_SAMPLING)
    assert run_rows(b, GPU2, lfl.ROWS, 1.0) == []
    assert b.notes == [GPU_SKIPPED]


def test_pausing_stops_a_whole_process_tree_and_resumes_it() -> None:
    """SIGSTOP reaches the children too (a stack's replicas and engine cores), SIGCONT all of them."""
    import psutil

    from bench.likeforlike_sides import paused

    parent = subprocess.Popen(["bash", "-c", "sleep 60 & wait"], start_new_session=True)
    root = psutil.Process(parent.pid)
    tree = [root]
    try:
        for _ in range(100):  # until bash has started its child
            if root.children():
                break
            psutil.wait_procs([], timeout=0.05)
        tree = [root, *root.children(recursive=True)]
        assert len(tree) == 2
        with paused([parent.pid]):
            assert {proc.status() for proc in tree} == {psutil.STATUS_STOPPED}
        assert psutil.STATUS_STOPPED not in {proc.status() for proc in tree}
    finally:
        for proc in tree:  # by id, the ones this test started
            proc.kill()
        parent.wait()


def test_the_job_row_names_what_the_client_refused() -> None:
    from bench.likeforlike_job import _problems

    failures = [{"problem": "control characters U+0012"}, {"problem": "control characters U+0010 U+0011"}]
    failures.append({"problem": "missing '{x}'"})
    assert _problems({"failures": failures}) == "2 control characters, 1 missing '{x}'"
    assert _problems({}) == "none failed"
