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


def test_a_workload_of_another_kind_is_charged_to_its_namespace() -> None:
    # Keys of kinds other than a Job are "namespace/<kind>/name"; the decision also
    # names the kind (docs/design/workload-identity.md). A Job of the same name is
    # another workload.
    db = sqlite3.connect(":memory:")
    db.executescript(SCHEMA)
    four = {"h100": {"nvidia.com/gpu": "4"}}
    one = {"h100": {"nvidia.com/gpu": "1"}}
    ddp = {"kind": "PyTorchJob", "api_version": "kubeflow.org/v1"}
    stream = [
        decision("p1", "Admitted", "team-c/pytorchjob/ddp", 0.0, usage=four, **ddp),
        decision("j1", "Admitted", "team-c/ddp", 0.0, usage=one, kind="Job"),
        decision("p2", "Finished", "team-c/pytorchjob/ddp", 1800.0, **ddp),
        decision("j2", "Finished", "team-c/ddp", 3600.0, kind="Job"),
    ]
    assert [apply(db, d) for d in stream] == [True] * 4
    assert ledger(db) == {"team-c": 3.0}  # 4 GPUs x 0.5 h + 1 GPU x 1 h
    assert db.execute("SELECT count(*) FROM running").fetchone() == (0,)
