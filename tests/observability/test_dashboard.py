"""The shipped Grafana dashboard has a panel for the bulk width, the bulk queued and the answer checks."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "hunyuan-serve.json"


def _panels(panels: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every panel, those inside a row included."""
    return [p for panel in panels for p in (panel, *_panels(panel.get("panels", [])))]


def panels_querying(dashboard: dict[str, Any], metric: str) -> list[str]:
    """The titles of the panels with a query that reads `metric` itself (not a longer name it begins)."""
    used = re.compile(rf"\b{re.escape(metric)}(?![\w:])")
    return [
        panel.get("title", "")
        for panel in _panels(dashboard.get("panels", []))
        if any(used.search(target.get("expr", "")) for target in panel.get("targets", []))
    ]


@pytest.mark.parametrize(
    "metric",
    [
        "hunyuan_bulk_width",  # the width a replica lets bulk run in its engine now
        "hunyuan_bulk_queued",  # the bulk waiting in the replica for a place
        "hunyuan_qa_flags_total",  # answers the answer checks flagged
    ],
)
def test_the_dashboard_has_a_panel_for(metric: str) -> None:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    titles = panels_querying(dashboard, metric)
    assert titles and all(titles), f"no titled panel of {DASHBOARD.name} queries {metric}: {titles}"


def test_a_panel_is_found_only_for_the_metric_itself() -> None:
    # The check above can fail: a query of a longer name, or none, is no panel for the metric.
    dashboard = {
        "panels": [
            {
                "title": "Row",
                "panels": [{"title": "Width", "targets": [{"expr": "max(hunyuan_bulk_width)"}]}],
            },
            {"title": "Other", "targets": [{"expr": 'hunyuan_bulk_width_max{job="x"}'}]},
        ]
    }
    assert panels_querying(dashboard, "hunyuan_bulk_width") == ["Width"]
    assert panels_querying(dashboard, "hunyuan_bulk_queued") == []
