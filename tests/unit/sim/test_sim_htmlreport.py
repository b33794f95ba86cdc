"""``kuota.sim.htmlreport``: the files of a report, offline, and what they say."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

from kuota.core.fold.fold import Fold
from kuota.sim.engine import Simulator
from kuota.sim.htmlreport import FILES, write_report
from kuota.sim.scenario import load_scenario
from kuota.sim.series import Recorder, Series, integral, summary

SCENARIOS = Path(__file__).resolve().parents[3] / "examples" / "scenarios"


def series_of(name: str) -> Series:
    recorder = Recorder()
    manifests = load_scenario((SCENARIOS / name).read_text())
    for step in Simulator(manifests, fold=Fold()).steps(max_steps=100_000):
        recorder.observe(step.event, step.decisions)
    return recorder.series


def test_report_files_offline_html_and_figures(tmp_path: Path) -> None:
    series = series_of("priority-preemption.yaml")
    written = write_report(tmp_path, series, title="t <1>")
    assert [p.name for p in written] == list(FILES)
    page = (tmp_path / "report.html").read_text()
    assert "t &lt;1&gt;" in page
    images = re.findall(r'<img alt="(\w+)" src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert [name for name, _ in images] == ["usage", "queue", "waits", "preemptions"]
    # nothing is loaded from anywhere: no URL in any src, href or url()
    assert not re.search(r"(src|href)=\"(?!data:)|url\(|https?://", page)
    for name in ("usage", "queue", "waits", "preemptions"):
        png = (tmp_path / f"{name}.png").read_bytes()
        assert png.startswith(b"\x89PNG") and len(png) < 200_000
    figures = json.loads((tmp_path / "summary.json").read_text())
    assert figures == json.loads(json.dumps(summary(series)))
    assert figures["preemptions"] == {"research-cq": 2}
    assert figures["waitSecondsByPriorityClass"]["low"]["max"] == 360


def test_series_csv_holds_every_series_and_gives_the_same_integral(tmp_path: Path) -> None:
    series = series_of("mig-memory-quota.yaml")
    write_report(tmp_path, series)
    rows = list(csv.DictReader(io.StringIO((tmp_path / "series.csv").read_text())))
    assert {row["series"] for row in rows} == {"usage", "nominalQuota", "queueLength"}
    key = "gpu-shared/h100/gpu-memory"
    points = [
        (float(r["t_s"]), float(r["value"]))
        for r in rows
        if r["series"] == "usage" and r["key"] == key
    ]
    assert integral(points, end=series.end) == 117_000 * 1024**3  # GiB-seconds, by hand
    workloads = list(csv.DictReader(io.StringIO((tmp_path / "workloads.csv").read_text())))
    assert len(workloads) == 9
    assert {w["workload"]: w["wait_s"] for w in workloads}["training/train-2"] == "270"


def test_same_run_same_files(tmp_path: Path) -> None:
    write_report(tmp_path / "a", series_of("cohort-reclaim.yaml"))
    write_report(tmp_path / "b", series_of("cohort-reclaim.yaml"))
    for name in FILES:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
