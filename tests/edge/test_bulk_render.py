"""The edge's bulk cap per pool: sized once from max_conns and interactive_reserve, rendered."""

from __future__ import annotations

from pathlib import Path

import pytest

from hunyuan_serve.config import build_config
from hunyuan_serve.edge.render import render_nginx
from hunyuan_serve.edge.routing import routing_from_states
from hunyuan_serve.replica.admission import priority
from hunyuan_serve.run.health import State


def _render(tmp_path: Path, overrides: dict[str, object], states: list[State]) -> str:
    cfg = build_config({}, {"engine.device": "cuda", **overrides})
    routing = routing_from_states([(f"127.0.0.1:{8101 + i}", s) for i, s in enumerate(states)])
    return render_nginx(cfg, routing, prefix=tmp_path, web_root=tmp_path / "web", worker_user=None)


def _caps(text: str) -> set[str]:
    return {line.strip() for line in text.splitlines() if line.strip().startswith("limit_conn ")}


READY2 = [State.READY, State.READY, State.EVICTED]


@pytest.mark.parametrize(
    ("overrides", "states", "cap"),
    [
        ({"nginx.max_conns": 10}, READY2, 15),  # 2 ready x 10, a quarter kept: 20 - 5
        ({"nginx.max_conns": 10, "replica.interactive_reserve": 0.5}, READY2, 10),
        ({"nginx.max_conns": 10, "replica.interactive_reserve": 0.0}, READY2, 20),
        ({"nginx.max_conns": 3, "replica.interactive_reserve": 0.9}, [State.READY], 1),  # never 0
        ({"nginx.max_conns": 8}, [State.STARTING], 6),  # none ready: one replica's worth (all 502 anyway)
        ({"replica.max_queued": 0}, READY2, 384),  # no queue: a GPU replica's max_num_seqs, 256
        ({}, READY2, 3456),  # by default max_in_flight 256 + max_queued 2048
    ],
)
def test_the_bulk_cap_is_the_ready_replicas_places_less_the_reserve(
    tmp_path: Path, overrides: dict[str, object], states: list[State], cap: int
) -> None:
    text = _render(tmp_path, overrides, states)
    assert _caps(text) == {f"limit_conn hs_replicas_bulk {cap};"}
    assert "limit_conn_zone $hs_bulk zone=hs_replicas_bulk:1m;" in text
    assert "error_page 503 = @overloaded;" in text and "return 503 $hs_error_overloaded;" in text


def test_the_edge_and_the_replica_share_one_formula() -> None:
    cfg = build_config({}, {"replica.interactive_reserve": 0.3})
    assert cfg.replica.bulk_slots(10) == 7
    # The replica refuses the 8th bulk request of 10 slots, as the edge would cap a pool of 10 at 7.
    counts = {"a": 7}
    refused = priority.admits(
        "bulk", "a", in_flight=7, bulk_in_flight=counts, weights={}, max_in_flight=10,
        reserve=0.3, key_share_min=1,
    )  # fmt: skip
    assert refused is not None and "bulk" in refused


@pytest.mark.parametrize("overrides", [{"nginx.bulk_cap": False}, {"nginx.max_conns": 0}])
def test_no_cap_renders_nothing_of_it(tmp_path: Path, overrides: dict[str, object]) -> None:
    text = _render(tmp_path, overrides, READY2)
    assert "limit_conn" not in text and "overloaded" not in text and "X-Priority" not in text


@pytest.mark.parametrize(
    ("overrides", "states", "line"),
    [
        ({}, READY2, "hs_replicas 384;"),  # 2 ready x max_num_seqs 256, a quarter kept
        ({"engine.device": "cpu"}, READY2, "hs_replicas 192;"),  # on CPU at most cpu_max_conns (128) each
        ({"engine.max_num_seqs": 10, "replica.interactive_reserve": 0.5}, READY2, "hs_replicas 10;"),
        ({"nginx.bulk_cap": False}, [State.READY], "hs_replicas 192;"),  # said with or without the cap
        ({}, [State.STARTING, State.EVICTED], None),  # none ready: no header at all
    ],
)
def test_the_bulk_texts_header_is_the_ready_engines_bulk_share(
    tmp_path: Path, overrides: dict[str, object], states: list[State], line: str | None
) -> None:
    text = _render(tmp_path, overrides, states)
    said = [row.strip() for row in text.splitlines() if row.strip().startswith("hs_replicas ")]
    assert said == ([line] if line else [])
    assert ("add_header X-Hunyuan-Bulk-Texts $hs_bulk_texts always;" in text) == (line is not None)
