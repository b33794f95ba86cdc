"""``kuota events tail``: follow the decision topic live.

Theory of operation: a ``read_committed`` consumer that joins no group (a
tail never moves anybody's offsets) is assigned every partition of
``<prefix>decisions`` and starts at the end (or at the beginning with
``--from-beginning``). Each decision that passes the filters is printed as one
rich line for people or, with ``--json``, as its JSON (the public contract,
``docs/schemas/decision.v1.json``), one per line and flushed at once, for
scripts. ``--workload`` matches the decision's workload and the preemptor of a
preemption; ``--cluster-queue`` the decision's ClusterQueue. ``--max`` and
``--timeout`` bound the run (tests, scripts); without them it runs until
Ctrl-C. A record that is not a decision is reported on stderr and skipped.
"""

from __future__ import annotations

import asyncio
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from kuota.cli._common import check_workload, kafka_settings, run_async, stdout_console

if TYPE_CHECKING:
    from kuota.bus.settings import KafkaSettings
    from kuota.events.schema import Decision

events_app = typer.Typer(help="The decision stream.", no_args_is_help=True)


def matches(d: Decision, *, workload: str | None, cluster_queue: str | None) -> bool:
    if workload is not None and d.workload != workload and d.preemptor != workload:
        return False
    return cluster_queue is None or d.cluster_queue == cluster_queue


@events_app.command("tail")
def tail(
    from_beginning: Annotated[
        bool, typer.Option("--from-beginning", help="Start at the first decision, not the end.")
    ] = False,
    workload: Annotated[
        str | None,
        typer.Option(
            "--workload",
            help="Only this workload: namespace/name (a Job) or namespace/<kind>/name.",
        ),
    ] = None,
    cluster_queue: Annotated[
        str | None, typer.Option("--cluster-queue", help="Only this ClusterQueue.")
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Decision JSON, one per line.")] = False,
    max_count: Annotated[
        int | None, typer.Option("--max", min=1, help="Stop after this many decisions.")
    ] = None,
    timeout: Annotated[
        float | None, typer.Option("--timeout", min=0.0, help="Stop after this many seconds.")
    ] = None,
) -> None:
    """Follow the decisions live (read_committed)."""
    if workload is not None:
        workload = check_workload(workload)
    settings = kafka_settings()
    run_async(
        lambda: _tail(
            settings,
            from_beginning=from_beginning,
            workload=workload,
            cluster_queue=cluster_queue,
            json_out=json_out,
            max_count=max_count,
            timeout=timeout,
        )
    )


async def _tail(
    settings: KafkaSettings,
    *,
    from_beginning: bool,
    workload: str | None,
    cluster_queue: str | None,
    json_out: bool,
    max_count: int | None,
    timeout: float | None,
) -> int:
    from aiokafka import TopicPartition
    from pydantic import ValidationError

    from kuota.audit.kafka import consumer, partitions
    from kuota.audit.render import decision_text
    from kuota.bus.topics import Topics
    from kuota.events.schema import parse_decision

    topic = Topics.from_settings(settings).decisions
    tps = [TopicPartition(topic, p) for p in await partitions(settings, topic)]
    reader = consumer(settings)
    await reader.start()
    out = stdout_console()
    shown = 0
    try:
        reader.assign(tps)
        if from_beginning:
            await reader.seek_to_beginning(*tps)
        else:
            await reader.seek_to_end(*tps)
        start = ", ".join([f"[{tp.partition}]@{await reader.position(tp)}" for tp in tps])
        sys.stderr.write(f"kuota: following {topic} from {start}\n")
        sys.stderr.flush()
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while deadline is None or loop.time() < deadline:
            left_ms = 500 if deadline is None else int((deadline - loop.time()) * 1000)
            wait_ms = max(1, min(500, left_ms))
            fetched = await reader.getmany(timeout_ms=wait_ms)
            for tp in sorted(fetched):
                for record in fetched[tp]:
                    try:
                        d = parse_decision(record.value or b"")
                    except ValidationError:
                        sys.stderr.write(
                            f"kuota: {tp.topic}[{tp.partition}]@{record.offset} is not a "
                            "decision; skipped\n"
                        )
                        continue
                    if not matches(d, workload=workload, cluster_queue=cluster_queue):
                        continue
                    if json_out:
                        # The record as it is on the topic: the public contract, byte for byte.
                        sys.stdout.write((record.value or b"").decode() + "\n")
                        sys.stdout.flush()
                    else:
                        out.print(decision_text(d), soft_wrap=True)
                    shown += 1
                    if max_count is not None and shown >= max_count:
                        return shown
    finally:
        await reader.stop()
    return shown
