"""`status` shows each replica's bulk width and an inactive people-first, read from its /metrics."""

from __future__ import annotations

from hunyuan_serve.supervise.status import format_status, parse_bulk_width, parse_people_first


def test_the_bulk_width_gauge_is_read_and_absent_is_unknown() -> None:
    text = "# HELP hunyuan_bulk_width x\nhunyuan_bulk_width 46.0\nhunyuan_bulk_width_other 3\n"
    assert parse_bulk_width(text) == 46
    assert parse_bulk_width("hunyuan_requests_in_flight 2\n") is None


def test_the_table_has_a_bulk_width_column() -> None:
    row = {"name": "replica-0", "pool": "default", "device": "cpu:0", "port": 9100, "pid": 10}
    table = format_status({"replicas": [{**row, "state": "ready", "in_flight": 3.0, "bulk_width": 46}]})
    head, line = table.splitlines()[:2]
    assert head.split()[8:10] == ["IN_FLIGHT", "BULK_WIDTH"] and line.split()[8:10] == ["3.0", "46"]


def test_a_replica_whose_scheduler_never_acknowledged_says_people_first_inactive() -> None:
    assert parse_people_first("hunyuan_people_first_inactive 1.0\n") == "inactive"
    assert parse_people_first("hunyuan_people_first_inactive 0.0\n") == "active"
    assert parse_people_first("hunyuan_bulk_width 4\n") is None
    row = {"name": "replica-0", "pool": "default", "device": "cpu:0", "port": 9100, "pid": 10}
    table = format_status({"replicas": [{**row, "state": "ready", "people_first": "inactive"}]})
    assert table.splitlines()[1].endswith("people-first inactive")
    fine = format_status({"replicas": [{**row, "state": "ready", "people_first": "active"}]})
    assert "people-first" not in fine
