"""kuota.status.render: one table for `kuota status` and `kuota simulate`, one line
for `kuota explain` (docs/design/quota-rows.md)."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from kuota.audit.render import status_tables
from kuota.audit.status import QueueStatus
from kuota.core.quota.rows import ClusterQueueSummary, QuotaRow
from kuota.sim.report import summary_table
from kuota.status.render import quota_line, quota_table

GPU = "nvidia.com/gpu"
ROWS = (
    QuotaRow("cq", "h100", GPU, 8000, 4000, None, 12000),
    QuotaRow("cq", "h100", "cpu", 16000, None, None, 2000),
)


def lines(renderable: Any) -> list[list[str]]:
    console = Console(record=True, width=200)
    console.print(renderable)
    return [line.split() for line in console.export_text().splitlines() if line.strip()]


def test_status_and_simulate_show_a_row_the_same_way() -> None:
    fold = ClusterQueueSummary("cq", "pool", ROWS, pending=1, admitted=3)
    status = QueueStatus("cq", "pool", 3, 1, (), ROWS, updated_at=None)
    sim = lines(summary_table([fold], peaks={("cq", "h100", GPU): 12000}))
    kuota_status = lines(status_tables([status]))
    first = ["cq", "pool", "h100/nvidia.com/gpu", "12", "8", "(+4)", "4"]
    assert sim[3] == [*first, "12", "3", "1"], "then the peak"
    assert kuota_status[3] == [*first, "3", "1"]
    assert sim[4] == ["h100/cpu", "2", "16", "0", "0"]
    assert kuota_status[4] == ["h100/cpu", "2", "16", "0"]
    assert sim[1] == [
        *("ClusterQueue", "Cohort", "Flavor/Resource", "Usage", "Nominal", "Borrowed"),
        *("Peak", "Admitted", "Pending"),
    ]


def test_what_only_status_knows() -> None:
    unknown = QuotaRow("cq", "h100", GPU, None, usage=1000)
    status = QueueStatus("cq", None, 1, 2, (("inadmissible", 2),), (unknown,), None)
    broken = QueueStatus("zz", None, 0, 0, (), (), None, problem="not JSON")
    rows = lines(quota_table([status, broken]))
    assert rows[3] == [
        "cq",
        "-",
        "h100/nvidia.com/gpu",
        "1",
        "?",
        "0",
        "1",
        "2",
        "(inadmissible",
        "2)",
    ]
    assert rows[4][:3] == ["zz", "-", "unreadable:"]


def test_a_queue_without_rows() -> None:
    empty = ClusterQueueSummary("cq", None, (), pending=0, admitted=0)
    assert lines(quota_table([empty]))[3] == ["cq", "-", "-", "-", "-", "-", "0", "0"]


def test_the_explain_line() -> None:
    fold = ClusterQueueSummary("cq", "pool", ROWS, pending=1, admitted=3)
    assert quota_line(fold) == (
        "cq (cohort pool): h100/nvidia.com/gpu 12/8 (borrowing 4) [limit +4], h100/cpu 2/16"
        " · admitted 3 · pending 1"
    )
    assert quota_line(ClusterQueueSummary("e", None, (), 0, 0)) == (
        "e: no quota · admitted 0 · pending 0"
    )
