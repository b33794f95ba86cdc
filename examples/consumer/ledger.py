"""A per-team GPU-hours ledger kept from kuota's decision topic.

An external subscriber: it reads ``<prefix>decisions`` with its own consumer
group and ``isolation.level=read_committed`` (admission writes decisions in
Kafka transactions), folds each batch into SQLite in ONE SQLite transaction,
and only then commits its Kafka offsets. A crash between the two re-delivers
the batch; the ``seen`` table (decision ids are deterministic) makes that a
no-op, so every admission is counted exactly once.

Team = the workload's namespace. GPU-hours = GPUs charged by ``Admitted``
(``usage``, any flavor) x event time until ``Finished``/``Preempted``/
``Evicted``/``Deactivated``. Environment: KUOTA_KAFKA_BOOTSTRAP (required),
KUOTA_TOPIC_PREFIX (``kuota.``), LEDGER_DB (``ledger.sqlite``), LEDGER_GROUP
(``gpu-ledger``), LEDGER_RESOURCE (``nvidia.com/gpu``), LEDGER_BATCH (500).
Kafka security as for kuota itself (docs/security.md): KUOTA_KAFKA_SECURITY,
KUOTA_KAFKA_SASL_MECHANISM / _USERNAME / _PASSWORD, KUOTA_KAFKA_CA_FILE,
KUOTA_KAFKA_CERT_FILE / _KEY_FILE.
"""

import asyncio
import json
import os
import signal
import sqlite3
import ssl
import sys

from aiokafka import AIOKafkaConsumer

SCHEMA = """
CREATE TABLE IF NOT EXISTS seen (id TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS admissions
    (id TEXT PRIMARY KEY, team TEXT, workload TEXT, at REAL, gpus REAL);
CREATE TABLE IF NOT EXISTS running (workload TEXT PRIMARY KEY, since REAL, gpus REAL);
CREATE TABLE IF NOT EXISTS ledger (team TEXT PRIMARY KEY, gpu_hours REAL NOT NULL);
"""
ENDS = ("Finished", "Preempted", "Evicted", "Deactivated")


def gpus(decision: dict, resource: str) -> float:
    """The GPUs an admission charges, over its flavors (quantities like "2" or "500m")."""
    qty = [
        q for res in (decision.get("usage") or {}).values() for r, q in res.items() if r == resource
    ]
    return sum(float(q[:-1]) / 1000 if q.endswith("m") else float(q) for q in qty)


def decode(value: bytes | None, where: str) -> dict | None:
    """A decision record as a dict, or None (with a warning) when it is not one."""
    try:
        d = json.loads(value or b"")
    except (ValueError, UnicodeDecodeError) as e:
        print(f"ledger: skipped {where}: not JSON ({e})", file=sys.stderr)
        return None
    if not isinstance(d, dict) or not isinstance(d.get("id"), str) or "type" not in d:
        print(f"ledger: skipped {where}: not a decision (no id/type)", file=sys.stderr)
        return None
    counted = d["type"] == "Admitted" or d["type"] in ENDS
    if counted and not isinstance(d.get("at"), (int, float)):
        print(f"ledger: skipped {where}: {d['type']} without a numeric 'at'", file=sys.stderr)
        return None
    return d


def apply(db: sqlite3.Connection, d: dict, resource: str = "nvidia.com/gpu") -> bool:
    """Fold one decision into the ledger; False if it was seen before (a redelivery)."""
    if db.execute("INSERT OR IGNORE INTO seen VALUES (?)", (d["id"],)).rowcount == 0:
        return False
    workload = d.get("workload") or ""
    team = workload.split("/")[0]
    if d["type"] == "Admitted":
        g = gpus(d, resource)
        row = (d["id"], team, workload, d["at"], g)
        db.execute("INSERT INTO admissions VALUES (?,?,?,?,?)", row)
        db.execute("INSERT OR REPLACE INTO running VALUES (?,?,?)", (workload, d["at"], g))
    elif d["type"] in ENDS:
        row = db.execute("SELECT since, gpus FROM running WHERE workload = ?", (workload,))
        row = row.fetchone()
        if row is not None:
            db.execute("DELETE FROM running WHERE workload = ?", (workload,))
            db.execute(
                "INSERT INTO ledger VALUES (?, ?) ON CONFLICT(team) "
                "DO UPDATE SET gpu_hours = gpu_hours + excluded.gpu_hours",
                (team, row[1] * (d["at"] - row[0]) / 3600),
            )
    return True


def kafka_security(env: dict[str, str]) -> dict[str, object]:
    """aiokafka's security arguments from the variables kuota reads."""
    protocol = env.get("KUOTA_KAFKA_SECURITY", "PLAINTEXT").upper()
    kw: dict[str, object] = {"security_protocol": protocol}
    if protocol in ("SSL", "SASL_SSL"):
        ctx = ssl.create_default_context(cafile=env.get("KUOTA_KAFKA_CA_FILE") or None)
        if env.get("KUOTA_KAFKA_CERT_FILE"):
            ctx.load_cert_chain(env["KUOTA_KAFKA_CERT_FILE"], env.get("KUOTA_KAFKA_KEY_FILE"))
        kw["ssl_context"] = ctx
    if protocol.startswith("SASL_"):
        kw["sasl_mechanism"] = env.get("KUOTA_KAFKA_SASL_MECHANISM") or "SCRAM-SHA-512"
        kw["sasl_plain_username"] = env.get("KUOTA_KAFKA_SASL_USERNAME")
        kw["sasl_plain_password"] = env.get("KUOTA_KAFKA_SASL_PASSWORD")
    return kw


async def main() -> None:
    env = os.environ
    resource = env.get("LEDGER_RESOURCE", "nvidia.com/gpu")
    max_records = int(env.get("LEDGER_BATCH", "500"))
    db = sqlite3.connect(env.get("LEDGER_DB", "ledger.sqlite"))
    db.executescript(SCHEMA)
    consumer = AIOKafkaConsumer(
        env.get("KUOTA_TOPIC_PREFIX", "kuota.") + "decisions",
        bootstrap_servers=env["KUOTA_KAFKA_BOOTSTRAP"],
        group_id=env.get("LEDGER_GROUP", "gpu-ledger"),
        isolation_level="read_committed",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        **kafka_security(dict(env)),  # type: ignore[arg-type]
    )
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    await consumer.start()
    try:
        while not stop.is_set():
            batch = await consumer.getmany(timeout_ms=500, max_records=max_records)
            records = [r for tp in sorted(batch) for r in batch[tp]]
            if not records:
                continue
            with db:  # one SQLite transaction per batch, committed before the offsets
                decoded = [decode(r.value, f"{r.topic}[{r.partition}]@{r.offset}") for r in records]
                new = sum(apply(db, d, resource) for d in decoded if d is not None)
            await consumer.commit()
            again = len(records) - new
            print(
                f"ledger: {len(records)} decisions, {new} new, {again} redelivered", file=sys.stderr
            )
    finally:
        await consumer.stop()
        db.close()


if __name__ == "__main__":
    asyncio.run(main())
