"""`qa: retry` against `qa: flag` through a real stack: a retry never answers 504 where flag answers 200.

    .venv/bin/python -m bench.qa_retry --up [--pairs 50] [--request-timeout-s 4] [--out row.json]

`--up` starts one CPU replica of the tiny model behind `up`'s Nginx with EOS ignored, so every answer
runs to max_tokens and is flagged `truncated`: under `qa: retry` every text is generated twice. Each
pair sends a text with `qa: flag` and, STAGGER_S later, the same text with `qa: retry`: the retry
joins the flag request's engine call (coalesced, or reads its answer from the cache when that call
was done first), so both wait for the one first answer, and the only difference is the retry. Sent
one after the other, each its own first generation, a loaded machine made the two first answers of
a pair differ by seconds (20 to 100 ms a token at one size), and a first answer past the deadline
is a 504 under either policy: the pairs then compared the load, not the retry. max_tokens grows
pair by pair, so that the first answer takes from 15% to 60% of the request timeout: the first
retries can finish within the deadline, the last cannot and must give the first answer, flagged,
instead of a 504. The engine's speed is measured first and again from each flag answer. Each
request's log line (the replica's) says of a 504 whether an answer was in hand.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

if __package__ in (None, ""):  # `python bench/qa_retry.py` as well as `python -m bench.qa_retry`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.long_texts import own_stack
from hunyuan_serve.config import ServeConfig
from hunyuan_serve.qa.flags import HEADER

DATA = Path(__file__).resolve().parent / "data" / "sd-webui-zh_CN.json"
PAIRS = 50
REQUEST_TIMEOUT_S = 4.0
# The shortest and longest first answer, as shares of the request timeout: a retry doubles it, so the
# pairs past some 45% cannot finish theirs; the longest first answer leaves the load room to slow it.
FILLS = (0.15, 0.6)
MOST_TOKENS = 900  # the bench engine's max_model_len is 1,024: the prompt fits beside these
CALIBRATION_TOKENS = (32, 256)
RESERVE_S = ServeConfig().replica.qa_retry_reserve_s  # what a retry leaves of the deadline
CUT_SLACK_S = 0.3
# The retry is sent this long after the flag request: it arrives second, so its deadline is the later.
STAGGER_S = 0.2


def texts(count: int) -> list[str]:
    """WebUI strings of 20 to 80 characters, no two alike."""
    every = json.loads(DATA.read_text(encoding="utf-8"))
    found = sorted({" ".join(key.split()) for key in every if 20 <= len(key) <= 80})
    return found[:count]


def ask(http: httpx.Client, text: str, max_tokens: int, policy: str, request_id: str = "") -> dict[str, Any]:
    """One /translate of text under policy: its status, seconds, answer and QA header."""
    body = {
        "text": text,
        "source_lang": "en",
        "target_lang": "zh",
        "max_tokens": max_tokens,
        "temperature": 0,
        "qa": policy,
    }
    started = time.monotonic()
    headers = {"X-Request-ID": request_id} if request_id else {}
    response = http.post("/translate", json=body, headers=headers)
    seen: dict[str, Any] = {"status": response.status_code, "s": round(time.monotonic() - started, 2)}
    if request_id:
        seen["request_id"] = request_id
    if response.status_code == 200:
        seen |= {"result": response.json()["result"], "qa": response.headers.get(HEADER, "")}
    return seen


def seconds_per_token(http: httpx.Client) -> float:
    """The engine's seconds per output token: two answers' times apart over their lengths apart."""
    short, long = CALIBRATION_TOKENS
    took = [ask(http, f"Calibration text {n}.", n, "flag")["s"] for n in (short, long)]
    return max(1e-4, (took[1] - took[0]) / (long - short))


def shares(pairs: int) -> list[float]:
    """Each pair's first answer as a share of the timeout, FILLS[0] to FILLS[1]."""
    low, high = FILLS
    return [low + (high - low) * i / max(1, pairs - 1) for i in range(pairs)]


def tokens_for(share: float, timeout_s: float, per_token: float) -> int:
    return max(1, min(MOST_TOKENS, round(share * timeout_s / per_token)))


def plan(pairs: int, timeout_s: float, per_token: float) -> list[int]:
    """max_tokens of each pair at one engine speed: its answer at its share of the timeout."""
    return [tokens_for(share, timeout_s, per_token) for share in shares(pairs)]


def measured(per_token: float, flag: dict[str, Any], max_tokens: int) -> float:
    """The engine's seconds per token, moved half way to what a flag answer just took (its prefill and
    HTTP counted in: an estimate on the slow side, which keeps the plan inside the deadline)."""
    if flag["status"] != 200:
        return per_token * 1.5  # past the deadline: slower than thought, by how much unknown
    return (per_token + flag["s"] / max_tokens) / 2


def paired(http: httpx.Client, text: str, max_tokens: int, request_id: str) -> tuple[dict[str, Any], ...]:
    """The text under flag and, STAGGER_S later, under retry, at once: one first answer for both."""
    with ThreadPoolExecutor(2) as pool:
        flag = pool.submit(ask, http, text, max_tokens, "flag", f"{request_id}-flag")
        time.sleep(STAGGER_S)  # the flag request's engine call under way: the retry joins it
        retry = pool.submit(ask, http, text, max_tokens, "retry", f"{request_id}-retry")
        return flag.result(), retry.result()


def run(url: str, pairs: int, timeout_s: float) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    with httpx.Client(base_url=url, timeout=timeout_s + 30, trust_env=False) as http:
        per_token = first = seconds_per_token(http)
        for n, (text, share) in enumerate(zip(texts(pairs), shares(pairs), strict=False)):
            max_tokens = tokens_for(share, timeout_s, per_token)
            flag, retry = paired(http, text, max_tokens, f"qa-retry-{n}")
            rows.append({"max_tokens": max_tokens, "planned_s": round(max_tokens * per_token, 2),
                         "flag": flag, "retry": retry})  # fmt: skip
            print(f"[qa-retry] {max_tokens:4d} tokens: flag {flag['status']} {flag['s']} s, "
                  f"retry {retry['status']} {retry['s']} s", flush=True)  # fmt: skip
            per_token = measured(per_token, flag, max_tokens)
    return {
        "request_timeout_s": timeout_s,
        "seconds_per_token": round(first, 5),
        "seconds_per_token_last": round(per_token, 5),
        "longest_answer_planned_s": max((row["planned_s"] for row in rows), default=0),
        "pairs": rows,
    }


def logged(row: dict[str, Any], logs: Path) -> None:
    """Each request's replica log line beside it: of a 504, whether an answer was in hand; of a
    retry, the retries the deadline cut (qa_retry_unfinished)."""
    lines: dict[str, dict[str, Any]] = {}
    for path in sorted(logs.glob("*.log")):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith('{"request_id": "qa-retry-'):
                each = json.loads(line)
                lines[each["request_id"]] = each
    keep = ("error", "answer_in_hand", "qa_retry_running", "qa_retry_unfinished", "qa_retried")
    for pair in row["pairs"]:
        for policy in ("flag", "retry"):
            found = lines.get(pair[policy].get("request_id", ""), {})
            pair[policy].update({name: found[name] for name in keep if name in found})


def summary(row: dict[str, Any]) -> dict[str, Any]:
    """Statuses of each policy; the pairs where retry failed and flag did not; the retries that kept
    the first answer (a retry cut by the deadline, or a second answer no better)."""
    pairs = row["pairs"]
    cut_at = row["request_timeout_s"] - RESERVE_S - CUT_SLACK_S
    lost = [pair["max_tokens"] for pair in pairs if pair["flag"]["status"] == 200 != pair["retry"]["status"]]
    retry_504s = [pair["retry"] for pair in pairs if pair["retry"]["status"] == 504]
    kept_first = sum(
        pair["retry"].get("result") is not None and pair["retry"]["result"] == pair["flag"].get("result")
        for pair in pairs
    )
    return {
        "flag": dict(Counter(str(pair["flag"]["status"]) for pair in pairs)),
        "retry": dict(Counter(str(pair["retry"]["status"]) for pair in pairs)),
        "retry_failed_where_flag_answered": lost,
        "retry_kept_the_first_answer": kept_first,
        # A retry cut by the deadline answers at its reserve before it: within CUT_SLACK_S of that.
        "retry_ran_into_the_deadline": sum(pair["retry"]["s"] >= cut_at for pair in pairs),
        # What the replica's log said of each retry 504: an answer in hand (the fault), or none yet (the
        # first answer itself past the deadline, as a flag answer would be), or no line found.
        "retry_504_answer_in_hand": sum(each.get("answer_in_hand") is True for each in retry_504s),
        "retry_504_no_answer_yet": sum(each.get("answer_in_hand") is False for each in retry_504s),
        "retry_cut_by_the_deadline": sum(pair["retry"].get("qa_retry_unfinished", 0) for pair in pairs),
        "retry_slowest_s": max((pair["retry"]["s"] for pair in pairs), default=0),
        "flag_slowest_s": max((pair["flag"]["s"] for pair in pairs), default=0),
    }


def verdict(row: dict[str, Any]) -> list[str]:
    done = row["summary"]
    # Met only where some retries had to be cut: else the deadline was never tested.
    met = (
        not done["retry_failed_where_flag_answered"]
        and done["flag"].get("200", 0) > 0
        and done["retry_ran_into_the_deadline"] > 0
    )
    return [
        f"- qa: retry vs qa: flag, {len(row['pairs'])} texts each (request timeout "
        f"{row['request_timeout_s']} s): retry answered {done['retry']}, flag {done['flag']}; retry failed "
        f"where flag answered 200: {len(done['retry_failed_where_flag_answered'])}: "
        f"{'met' if met else 'NOT met'}",
        f"- Slowest: retry {done['retry_slowest_s']} s, flag {done['flag_slowest_s']} s (the longest answer "
        f"planned at {row['longest_answer_planned_s']} s); retries that kept the first answer (cut by the "
        f"deadline, or no better): {done['retry_kept_the_first_answer']}; retries that ran into the "
        f"deadline: {done['retry_ran_into_the_deadline']}",
        f"- The replica's log: retries the deadline cut, the first answer given: "
        f"{done.get('retry_cut_by_the_deadline', '?')}; retry 504s with an answer in hand: "
        f"{done.get('retry_504_answer_in_hand', '?')}, with none yet (the first answer itself past the "
        f"deadline): {done.get('retry_504_no_answer_yet', '?')}",
    ]


@contextlib.contextmanager
def stack(args: argparse.Namespace) -> Iterator[tuple[str, Path | None]]:
    """The service's URL, and where its replicas' logs are (None: not ours to read)."""
    if not args.up:
        yield args.url, None
        return
    flags = ("--request-timeout-s", str(args.request_timeout_s))
    work = Path(tempfile.mkdtemp())
    with own_stack(1, work, flags) as url:
        yield url, work / "stack" / "logs"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default="http://127.0.0.1:8080", help="A running service (`make up`).")
    parser.add_argument("--up", action="store_true", help="Start one tiny-model replica, EOS ignored.")
    parser.add_argument("--pairs", type=int, default=PAIRS)
    parser.add_argument(
        "--request-timeout-s", type=float, default=REQUEST_TIMEOUT_S, help="The --up stack's, or --url's own."
    )
    parser.add_argument("--out", type=Path, help="Write the row as JSON here too.")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwinds, so the --up stack is stopped
    with stack(args) as (url, logs):
        row = run(url, args.pairs, args.request_timeout_s)
        if logs is not None:
            logged(row, logs)
    row["summary"] = summary(row)
    print("\n".join(verdict(row)))
    if args.out:
        args.out.write_text(json.dumps(row, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
