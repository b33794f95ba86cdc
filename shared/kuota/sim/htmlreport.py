"""The simulation report: an offline HTML page with plots, a CSV of every series, a JSON summary.

Theory of operation: :func:`write_report` takes the :class:`~kuota.sim.series.Series`
of a run and writes into a directory:

``report.html``    the page; every plot is a PNG embedded as base64, no
                   script, no stylesheet or font from anywhere: it opens offline
``usage.png``      usage over time per (ClusterQueue, flavor, resource), the
                   nominal quota dashed
``queue.png``      queue length (pending workloads) over time per ClusterQueue
``waits.png``      the distribution of wait times per priority class (an ECDF)
``preemptions.png``  preemptions over time (cumulative) per ClusterQueue
``series.csv``     every plotted series as ``series,key,t_s,value`` change points
``workloads.csv``  one row per workload: its queue, class, times, wait
``summary.json``   the figures (``kuota.sim.series.summary``)

Plots are drawn with matplotlib's Agg backend (no display) on figures built
with the object API (no global pyplot state), so a report can be written from
any thread and two runs give the same files. The PNGs are small (96 dpi, about
900x400 px) so that docs can commit them.
"""

from __future__ import annotations

import base64
import csv
import html
import io
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from kuota.sim.series import Points, Series, summary, waits

#: The files one report writes, in the order the page shows the plots.
PLOTS = ("usage", "queue", "waits", "preemptions")
FILES = ("report.html", *(f"{p}.png" for p in PLOTS), "series.csv", "workloads.csv", "summary.json")
_DPI = 96
_SIZE = (9.5, 4.0)
#: matplotlib's PNG writer stamps its version; fixed metadata keeps files identical.
_PNG_METADATA = {"Software": None}


def _hours(t: float) -> float:
    return t / 3600


def _step_xy(points: Points, end: float) -> tuple[list[float], list[float]]:
    xs = [_hours(t) for t, _ in points] + [_hours(end)]
    ys = [v for _, v in points]
    ys.append(ys[-1] if ys else 0.0)
    return xs, ys


def _figure(title: str, *, ylabel: str, xlabel: str = "simulated time (h)") -> tuple[Figure, Axes]:
    figure = Figure(figsize=_SIZE, dpi=_DPI)
    axes = figure.add_subplot()
    axes.set_title(title, fontsize=11)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.grid(True, alpha=0.3)
    return figure, axes


def _png(figure: Figure) -> bytes:
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata=_PNG_METADATA)
    return buffer.getvalue()


def _unit(resource: str, values: Sequence[float]) -> tuple[float, str]:
    """Bytes-like resources in GiB, others as they are."""
    if "memory" in resource and values and max(values) >= 1024**3:
        return 1024**3, "GiB"
    return 1.0, ""


def plot_usage(series: Series) -> bytes:
    figure, axes = _figure("Usage against nominal quota", ylabel="usage")
    end = series.end
    for index, key in enumerate(sorted(series.usage)):
        points = series.usage[key]
        quota = series.quota.get(key, [])
        scale, unit = _unit(key[2], [v for _, v in points] + [v for _, v in quota])
        color = f"C{index % 10}"
        label = f"{key[0]} {key[1]}/{key[2]}" + (f" ({unit})" if unit else "")
        xs, ys = _step_xy(points, end)
        axes.step(xs, [y / scale for y in ys], where="post", color=color, label=label)
        if quota:
            qx, qy = _step_xy(quota, end)
            axes.step(
                qx,
                [y / scale for y in qy],
                where="post",
                color=color,
                linestyle="--",
                label=f"{label} nominal quota",
            )
    _legend(axes)
    return _png(figure)


def plot_queue(series: Series) -> bytes:
    figure, axes = _figure("Queue length (pending workloads)", ylabel="pending workloads")
    for index, cluster_queue in enumerate(sorted(series.queue_length)):
        xs, ys = _step_xy(series.queue_length[cluster_queue], series.end)
        axes.step(xs, ys, where="post", color=f"C{index % 10}", label=cluster_queue)
    _legend(axes)
    return _png(figure)


def plot_waits(series: Series) -> bytes:
    figure, axes = _figure(
        "Wait before admission, per priority class (share of workloads waiting at most x)",
        ylabel="share of workloads",
        xlabel="wait (s, log scale; 0 s drawn at 1 s)",
    )
    by_class: dict[str, list[float]] = {}
    records = [series.workloads[key] for key in sorted(series.workloads)]
    for record, wait in zip(records, waits(series), strict=True):
        by_class.setdefault(record.priority_class, []).append(wait)
    for index, (name, values) in enumerate(sorted(by_class.items())):
        ordered = sorted(values)
        finite = [v for v in ordered if math.isfinite(v)]
        xs = [max(1.0, v) for v in finite]
        ys = [(i + 1) / len(ordered) for i in range(len(finite))]
        never = len(ordered) - len(finite)
        label = f"{name} ({len(ordered)} workloads" + (
            f", {never} never admitted)" if never else ")"
        )
        if xs:
            axes.step(xs, ys, where="post", color=f"C{index % 10}", label=label)
        else:
            axes.plot([], [], color=f"C{index % 10}", label=label)
    axes.set_xscale("log")
    axes.set_ylim(0, 1.02)
    _legend(axes)
    return _png(figure)


def plot_preemptions(series: Series) -> bytes:
    figure, axes = _figure("Preemptions over time (cumulative)", ylabel="preemptions")
    for index, cluster_queue in enumerate(sorted(series.preemptions)):
        instants = sorted(series.preemptions[cluster_queue])
        xs = [0.0] + [_hours(t) for t in instants] + [_hours(series.end)]
        ys = [0.0] + [float(i + 1) for i in range(len(instants))] + [float(len(instants))]
        axes.step(xs, ys, where="post", color=f"C{index % 10}", label=cluster_queue)
    if not series.preemptions:
        axes.text(0.5, 0.5, "no preemptions", ha="center", va="center", transform=axes.transAxes)
    _legend(axes)
    return _png(figure)


def _legend(axes: Axes) -> None:
    handles, _ = axes.get_legend_handles_labels()
    if handles:
        axes.legend(fontsize=8, loc="best")


def series_rows(series: Series) -> list[tuple[str, str, float, float]]:
    """Every series as (series, key, t_s, value) change points, in a fixed order."""
    rows: list[tuple[str, str, float, float]] = []
    for key in sorted(series.usage):
        rows += [("usage", "/".join(key), t, v) for t, v in series.usage[key]]
    for key in sorted(series.quota):
        rows += [("nominalQuota", "/".join(key), t, v) for t, v in series.quota[key]]
    for cluster_queue in sorted(series.queue_length):
        rows += [
            ("queueLength", cluster_queue, t, v) for t, v in series.queue_length[cluster_queue]
        ]
    for cluster_queue in sorted(series.preemptions):
        instants = sorted(series.preemptions[cluster_queue])
        rows += [("preemptions", cluster_queue, t, float(i + 1)) for i, t in enumerate(instants)]
    return rows


def _csv(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue()


def _number(value: float | None) -> str:
    if value is None:
        return ""
    if math.isinf(value):
        return "inf"
    return str(int(value)) if value == int(value) else f"{value:.6g}"


def write_report(
    directory: Path,
    series: Series,
    *,
    title: str = "kuota simulate report",
    context: Mapping[str, object] | None = None,
) -> list[Path]:
    """Write the report's files (module docstring) into ``directory`` (created
    if missing); the paths written, in :data:`FILES` order. ``context``: extra
    figures put at the top of the summary (the scenario, the plan's size...)."""
    directory.mkdir(parents=True, exist_ok=True)
    figures = {**(dict(context) if context else {}), **summary(series)}
    images = {
        "usage": plot_usage(series),
        "queue": plot_queue(series),
        "waits": plot_waits(series),
        "preemptions": plot_preemptions(series),
    }
    records = [series.workloads[key] for key in sorted(series.workloads)]
    workload_rows = [
        (
            r.key,
            r.cluster_queue,
            r.priority_class,
            _number(r.submitted),
            _number(r.first_admitted),
            _number(r.finished),
            _number(w),
            r.admissions,
            r.preemptions,
        )
        for r, w in zip(records, waits(series), strict=True)
    ]
    texts = {
        "series.csv": _csv(
            ("series", "key", "t_s", "value"),
            [(s, k, _number(t), _number(v)) for s, k, t, v in series_rows(series)],
        ),
        "workloads.csv": _csv(
            (
                "workload",
                "clusterQueue",
                "priorityClass",
                "submitted_s",
                "firstAdmitted_s",
                "finished_s",
                "wait_s",
                "admissions",
                "preemptions",
            ),
            workload_rows,
        ),
        "summary.json": json.dumps(figures, indent=2, sort_keys=False) + "\n",
        "report.html": _html(title, figures, images),
    }
    written: list[Path] = []
    for name in FILES:
        path = directory / name
        if name.endswith(".png"):
            path.write_bytes(images[name.removesuffix(".png")])
        else:
            path.write_text(texts[name], encoding="utf-8")
        written.append(path)
    return written


_CAPTIONS = {
    "usage": "Usage over time per ClusterQueue and flavor, against its nominal quota (dashed).",
    "queue": "Queue length: workloads pending (submitted or requeued, not admitted) "
    "per ClusterQueue.",
    "waits": "Distribution of wait times per priority class: the share of workloads that waited at "
    "most x before admission (all pending periods of a workload added up).",
    "preemptions": "Preemptions over time, cumulative, per ClusterQueue.",
}


def _html(title: str, figures: Mapping[str, object], images: Mapping[str, bytes]) -> str:
    escaped = html.escape(title)
    rows = "".join(
        f"<tr><th>{html.escape(str(k))}</th><td><code>{html.escape(json.dumps(v))}</code></td></tr>"
        for k, v in figures.items()
        if not isinstance(v, dict | list)
    )
    waits_by = figures.get("waitSecondsByPriorityClass", {})
    wait_rows = ""
    if isinstance(waits_by, dict):
        for name, data in [("all", figures.get("waitSeconds")), *waits_by.items()]:
            if isinstance(data, dict):
                cells = "".join(
                    f"<td>{html.escape(json.dumps(data.get(k)))}</td>"
                    for k in ("workloads", "neverAdmitted", "p50", "p90", "p95", "p99", "max")
                )
                wait_rows += f"<tr><th>{html.escape(str(name))}</th>{cells}</tr>"
    sections = "".join(
        f'<figure><img alt="{p}" src="data:image/png;base64,'
        f'{base64.b64encode(images[p]).decode("ascii")}"><figcaption>{html.escape(_CAPTIONS[p])}'
        f"</figcaption></figure>"
        for p in PLOTS
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escaped}</title><style>"
        "body{font-family:sans-serif;max-width:960px;margin:1em auto;padding:0 1em}"
        "table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #ccc;"
        "padding:2px 8px;text-align:left}img{max-width:100%}figure{margin:1.5em 0}"
        "</style></head><body>"
        f"<h1>{escaped}</h1><table>{rows}</table>"
        "<h2>Wait before admission (seconds)</h2><table><tr><th>priority class</th>"
        "<th>workloads</th><th>never admitted</th><th>p50</th><th>p90</th><th>p95</th>"
        f"<th>p99</th><th>max</th></tr>{wait_rows}</table>"
        f"<h2>Plots</h2>{sections}"
        "<p>The figures are in summary.json, every series in series.csv, every workload in "
        "workloads.csv.</p></body></html>\n"
    )


__all__ = ["FILES", "PLOTS", "series_rows", "write_report"]
