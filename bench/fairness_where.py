"""Where the person's time goes: their latencies split by the replicas' own access-log lines."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.percentiles import nearest_rank

# A sent string: the client's latency (ms) and the request id the replica answered with.
Trace = tuple[float, str]


@dataclass(frozen=True)
class Split:
    """The medians of one phase's strings, each part apart (so they need not add up to the client's).

    outside: the client's latency less the replica's (the client, Nginx, the loopback wire, uvicorn);
    replica: from the replica's admission to its answer (its access log's latency_ms);
    around: the replica's time less the engine call's (auth, the prompt, the answer checks, JSON);
    engine: the engine call, from submission to the last token (its engine_ms);
    queued: the part of it spent in vLLM's scheduler queue (its queue_ms).
    """

    joined: int  # the strings found in the replicas' logs
    client: float
    outside: float
    replica: float
    around: float
    engine: float
    queued: float


def access_lines(logs: Path) -> dict[str, Mapping[str, Any]]:
    """Every replica access-log line under `logs` (replica-*.log), by request id."""
    found: dict[str, Mapping[str, Any]] = {}
    for path in sorted(logs.glob("replica-*.log")):
        for line in path.read_text(errors="replace").splitlines():
            if not line.startswith("{") or '"request_id"' not in line:
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(entry, dict) and "latency_ms" in entry:
                found[str(entry["request_id"])] = entry
    return found


def split(traces: Sequence[Trace], access: Mapping[str, Mapping[str, Any]]) -> Split:
    """The medians of the strings of `traces` that the replicas logged (0 each where none was)."""
    rows = [(ms, access[rid]) for ms, rid in traces if rid in access]

    def p50(values: list[float]) -> float:
        return round(nearest_rank(values, 0.5), 1)

    return Split(
        len(rows),
        p50([ms for ms, _ in rows]),
        p50([ms - float(e["latency_ms"]) for ms, e in rows]),
        p50([float(e["latency_ms"]) for _, e in rows]),
        p50([float(e["latency_ms"]) - float(e.get("engine_ms", 0.0)) for _, e in rows]),
        p50([float(e.get("engine_ms", 0.0)) for _, e in rows]),
        p50([float(e.get("queue_ms", 0.0)) for _, e in rows]),
    )


def where_lines(splits: Mapping[str, Split]) -> list[str]:
    """The report's table of where the person's time goes, idle against beside the job."""
    if not splits:
        return []
    lines = [
        "Where the person's time goes (medians of each part, ms; from the replicas' access-log lines):",
        "",
        "| phase | strings | client | outside the replica | in the replica | around the engine "
        "| engine call | in vLLM's queue |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for phase, s in splits.items():
        lines.append(
            f"| {phase} | {s.joined} | {s.client:.1f} | {s.outside:.1f} | {s.replica:.1f} | {s.around:.1f} "
            f"| {s.engine:.1f} | {s.queued:.1f} |"
        )
    return [*lines, ""]
