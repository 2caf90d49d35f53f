"""The soak run's pure parts: p95 per minute from k6 samples, the report's table, and the plot."""

from __future__ import annotations

import gzip
from pathlib import Path

from bench.k6run import K6Result
from bench.soak import Sample, SoakLog, p95_per_minute, plot_soak, soak_report, window_table


def _result(tmp_path: Path, rows: list[tuple[float, float, int]]) -> K6Result:
    samples = tmp_path / "soak.samples.csv.gz"
    with gzip.open(samples, "wt", encoding="utf-8") as out:
        out.write("metric_name,timestamp,metric_value,status\n")
        for t, value, status in rows:
            out.write(f"http_req_duration,{int(t * 1000)},{value},{status}\n")
    return K6Result("soak", tmp_path / "none.json", samples, 0, 1.0)


def test_p95_per_minute_counts_only_the_200s_and_each_minutes_failures(tmp_path: Path) -> None:
    rows = [(60.0 + i * 0.5, float(i), 200) for i in range(100)] + [(61.0, 99999.0, 502)]
    rows += [(125.0, 7.0, 200)]
    per_minute = p95_per_minute(_result(tmp_path, rows))
    assert per_minute == [(60.0, 95.0, 1), (120.0, 7.0, 0)]


def test_report_and_plot(tmp_path: Path) -> None:
    nginx = [Sample(0.0, "nginx", 10.0, 20), Sample(600.0, "nginx", 11.0, 21)]
    log = SoakLog([*nginx, Sample(0.0, "replica-0", 900.0, 80)], [(300.0, "replica-0")])
    result = _result(tmp_path, [(10.0, 5.0, 200)])
    text = "\n".join(soak_report(log, result, 60, 4))
    assert "| nginx | 10 | 11 | 20 | 21 |" in text and "(1 kills)" in text
    plot_soak(log, result, tmp_path / "soak.png")
    assert (tmp_path / "soak.png").stat().st_size > 1000


def test_window_table_gives_each_window_its_own_p95_failures_and_largest_memory(tmp_path: Path) -> None:
    samples = [
        Sample(0.0, "nginx", 10.0, 20),
        Sample(300.0, "nginx", 12.0, 22),
        Sample(700.0, "nginx", 11.0, 21),
    ]
    rows = [(1.0 + i, float(i), 200) for i in range(20)] + [(650.0, 40.0, 200), (660.0, 1.0, 502)]
    table = window_table(SoakLog(samples, []), _result(tmp_path, rows), window_s=600.0)
    assert table[2] == "| minutes | requests | failed | p95 ms | nginx MB / files |"
    assert table[4] == "| 0-10 | 20 | 0 | 19 | 12 / 22 |"
    assert table[5] == "| 10-20 | 2 | 1 | 40 | 11 / 21 |"
