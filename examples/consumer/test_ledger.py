"""The ledger's fold, without Kafka: ``.venv/bin/pytest examples/consumer``.

(The exactly-once-across-a-restart test on a real broker is
``tests/integration/test_audit_consumer.py``.)
"""

import sqlite3

from ledger import SCHEMA, apply


def decision(id_: str, type_: str, workload: str, at: float, **extra: object) -> dict:
    return {"id": id_, "type": type_, "workload": workload, "at": at, **extra}


def ledger(db: sqlite3.Connection) -> dict[str, float]:
    return dict(db.execute("SELECT team, gpu_hours FROM ledger ORDER BY team"))


def test_gpu_hours_per_team_and_redeliveries_count_once() -> None:
    db = sqlite3.connect(":memory:")
    db.executescript(SCHEMA)
    two = {"gpu-a": {"nvidia.com/gpu": "2", "cpu": "4"}}
    half = {"mig": {"nvidia.com/gpu": "500m"}}
    stream = [
        decision("a1", "Admitted", "team-a/train", 0.0, usage=two),
        decision("b1", "Admitted", "team-b/tune", 0.0, usage=half),
        decision("x1", "Inadmissible", "team-b/big", 10.0, reason="InsufficientQuota"),
        decision("a2", "Finished", "team-a/train", 3600.0),
        decision("b2", "Preempted", "team-b/tune", 7200.0, preemptor="team-a/urgent"),
    ]
    assert [apply(db, d) for d in stream] == [True] * 5
    assert [apply(db, d) for d in stream[:3]] == [False] * 3, "a redelivered batch is a no-op"
    assert ledger(db) == {"team-a": 2.0, "team-b": 1.0}
    assert db.execute("SELECT count(*) FROM admissions").fetchone() == (2,)
    assert db.execute("SELECT count(*) FROM running").fetchone() == (0,)
