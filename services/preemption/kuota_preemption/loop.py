"""The preemption service's loop: replay the journal silently, then plan live.

On start the service fences its predecessor (``init_transactions``), reads
the group's committed offset and silently folds the journal from offset 0 up
to it (no snapshot: the search state is the fold, rebuilt by replay), then
joins the group. After each live batch the folder asks the core for plans
(``kuota_preemption.planning``), produced in the transaction that commits the
batch's offsets.
"""

from __future__ import annotations

import asyncio
import logging
import time

from kuota.bus.topics import ensure_topics
from kuota.service import JournalProcessor, committed_offset
from kuota_preemption.metrics import PreemptionMetrics
from kuota_preemption.planning import PlanningFolder
from kuota_preemption.settings import Config

log = logging.getLogger("kuota.preemption")

PARTITION = 0


class Service:
    def __init__(self, cfg: Config, metrics: PreemptionMetrics) -> None:
        self.cfg = cfg
        self.metrics = metrics
        self.live = False  # the runner's start-up retry and two-stage stop read it

    async def run(self, stop: asyncio.Event) -> None:
        cfg, metrics = self.cfg, self.metrics
        log.info(
            "starting: journal %sjournal, group %s, metrics on :%d",
            cfg.kafka.topic_prefix,
            cfg.group_id,
            cfg.metrics_port,
        )
        topics = await ensure_topics(cfg.kafka)
        folder = PlanningFolder(topics=topics, observer=metrics, consumer=cfg.group_id)
        proc = JournalProcessor(
            cfg,
            journal=topics.journal,
            handle=folder.handle,
            max_batch=cfg.max_batch,
            partition=PARTITION,
        )
        try:
            t0 = time.monotonic()
            committed = await committed_offset(
                proc, journal=topics.journal, name="kuota-preemption", partition=PARTITION
            )
            end = committed or 0
            replayed = await proc.replay(partition=PARTITION, start=0, end=end, apply=folder.replay)
            folder.next_offset = max(folder.next_offset, end)
            metrics.recovery_seconds.set(time.monotonic() - t0)
            metrics.journal.replayed.set(replayed)
            log.info(
                "recovered: replayed %d events in %.2f s; live from offset %d",
                replayed,
                time.monotonic() - t0,
                end,
            )
            self.live = True
            if stop.is_set():
                return
            await proc.start_consumer()
            while not stop.is_set():
                if await proc.run_once():
                    metrics.journal.advanced(folder.next_offset, await proc.lag(PARTITION))
        finally:
            await proc.consumer.stop()  # also when never started: releases its client
            await proc.producer.stop()
