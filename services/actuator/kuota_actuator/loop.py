"""The actuator's loop: mirrors, a read-model replay, then decisions applied in lanes.

1. Mirror the ResourceFlavors, the ClusterQueues and the queued Jobs
   (``kuota_actuator.jobcache``) and wait for the first lists of the flavors
   and the Jobs (an Admitted decision is planned against them).
2. Rebuild the ClusterQueue read model from the decisions up to the group's
   committed offsets, applying nothing (the previous incarnation did).
3. Live: consume decisions (``read_committed``) into per-workload lanes
   (``kuota_actuator.lanes``), apply each (``kuota_actuator.apply``), fold into
   the read model and commit the longest applied prefix of each partition; a
   record that is not a decision is dead-lettered before its offset commits.
   Permanent failures go to the journal as ``ActuationFailed``. After a stop, the
   Job's pods are watched until they are gone (``kuota_actuator.drains``), then
   ``WorkloadStopped`` goes to the journal; the read model's stops without a
   ``QuotaReleased`` are watched again at start-up.
4. Every ``status_interval`` seconds, write what changed of each ClusterQueue's
   status and of the Redis hash (``kuota_actuator.status``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition
from aiokafka.errors import KafkaError

from kuota import kinds
from kuota.actuation.patch import EventSpec
from kuota.bus.deadletter import dead_letter_record
from kuota.bus.offsets import group_offsets
from kuota.bus.topics import Topics, ensure_topics, shard_key
from kuota.events.decode import DecodeError, decode_decision
from kuota.events.schema import ActuationFailed, Decision, WorkloadStopped
from kuota.kube.watch import Resource
from kuota.service import Unavailable
from kuota.status.model import ClusterQueueReadModel
from kuota.store.settings import redis_client
from kuota_actuator.apply import FLAVORS_PATH, Actuator, Outcome
from kuota_actuator.drains import (
    Drains,
    PodCaches,
    Stop,
    job_settled,
    pods_settled,
    workload_settled,
)
from kuota_actuator.events import EventSink
from kuota_actuator.jobcache import JobCache
from kuota_actuator.kubeapi import Kube, Mirror, api_client
from kuota_actuator.lanes import Lanes
from kuota_actuator.metrics import ActuatorMetrics
from kuota_actuator.settings import Config
from kuota_actuator.status import CQ_PATH, StatusWriter

log = logging.getLogger("kuota.actuator")

TYPE_HEADER = "kuota-type"


def decode(record: ConsumerRecord[bytes, bytes]) -> Decision | None:
    decision = decode_reason(record)
    return decision if isinstance(decision, Decision) else None


def decode_reason(record: ConsumerRecord[bytes, bytes]) -> Decision | str:
    """The decision, or why the record is not one (kuota.events.decode)."""
    try:
        return decode_decision(record.value)
    except DecodeError as err:
        log.warning(
            "decision record at offset %d is not a Decision (%s); skipped",
            record.offset,
            err.reason,
        )
        return err.reason


class Service:
    def __init__(self, cfg: Config, metrics: ActuatorMetrics) -> None:
        self.cfg = cfg
        self.metrics = metrics
        self.model = ClusterQueueReadModel()
        self.live = False  # the runner's start-up retry and two-stage stop read it

    async def run(self, stop: asyncio.Event) -> None:
        cfg = self.cfg
        topics = await ensure_topics(cfg.kafka)
        api = await api_client(cfg.kubeconfig)
        kube = Kube(api, self.metrics.observe_request)
        flavors = Mirror(api, Resource("ResourceFlavor", FLAVORS_PATH))
        queues = Mirror(api, Resource("ClusterQueue", CQ_PATH, label_selector=cfg.cq_selector))
        jobs = JobCache(api, cfg.job_selector)
        # PyTorchJobs, RayClusters, RayJobs and JobSets, for their stops' drains only
        # (whether the operator took one in)
        wired = {
            k: JobCache(api, cfg.job_selector, kind=k)
            for k in ("PyTorchJob", "RayCluster", "RayJob", "JobSet")
        }
        # Jobs' pods, PyTorchJobs' ..., pod groups' (#18), and RayJobs' children
        pods = PodCaches(api)
        # Job writes first: Events wait while the actuator's API slots are busy.
        gate: list[Actuator] = []
        events = EventSink(
            kube,
            self.metrics,
            capacity=cfg.event_queue,
            busy=lambda: bool(gate) and gate[0].busy(),
            name_preemptor=cfg.events_name_preemptor,
            uid_of=lambda key: ((jobs.get(key) or {}).get("metadata") or {}).get("uid"),
        )
        tasks = [
            asyncio.create_task(flavors.run(), name="flavors"),
            asyncio.create_task(queues.run(), name="clusterqueues"),
            asyncio.create_task(jobs.run(), name="jobs"),
            *(asyncio.create_task(c.run(), name=f"cache {k}") for k, c in wired.items()),
            *(
                asyncio.create_task(cache.run(), name=f"pods {i}")
                for i, cache in enumerate(pods.caches)
            ),
            asyncio.create_task(pods.ray_jobs.clusters.run(), name="rayjob clusters"),
            asyncio.create_task(pods.ray_jobs.jobs.run(), name="rayjob submitters"),
            asyncio.create_task(events.run(stop), name="events"),
        ]
        redis = redis_client(cfg.redis_url)
        kw = cfg.kafka.client_kwargs()
        producer = AIOKafkaProducer(enable_idempotence=True, **kw)
        consumer = AIOKafkaConsumer(
            topics.decisions,
            group_id=cfg.group_id,
            enable_auto_commit=False,
            isolation_level="read_committed",
            auto_offset_reset="earliest",
            max_poll_records=cfg.max_batch,
            **kw,
        )
        started: list[AIOKafkaProducer | AIOKafkaConsumer] = []
        try:
            if not await self._wait(flavors.synced, stop, "the ResourceFlavor list"):
                return
            if not await self._wait(jobs.synced, stop, "the Job list"):
                return
            await producer.start()
            started.append(producer)
            replayed = await self._replay(topics, stop)
            log.info(
                "read model rebuilt from %d decisions: %d ClusterQueues",
                replayed,
                len(self.model.cluster_queues()),
            )
            await consumer.start()
            started.append(consumer)

            async def report(event: ActuationFailed | WorkloadStopped) -> None:
                await producer.send_and_wait(
                    topics.journal,
                    value=event.model_dump_json().encode(),
                    key=shard_key(event.workload),
                    headers=[(TYPE_HEADER, event.type.encode())],
                )

            def warn(stop: Stop, spec: EventSpec, waited: int) -> None:
                ns, _, name = stop.workload.partition("/")
                ref = {"apiVersion": "batch/v1", "kind": "Job", "namespace": ns, "name": name}
                other = kinds.workload_ref(stop.workload) if stop.workload.count("/") > 1 else None
                if other is not None:
                    ref = {
                        "apiVersion": other.api_version,
                        "kind": other.kind,
                        "namespace": ns,
                        "name": other.name,
                    }
                if stop.uid:
                    ref["uid"] = stop.uid
                events.emit(f"{stop.stop_id}-{waited}", (spec,), target=(ref, ns))

            def settled(stop: Stop) -> bool:
                ref = kinds.workload_ref(stop.workload) if stop.workload.count("/") > 1 else None
                if ref is None:
                    return job_settled(jobs.get(stop.workload), stop.uid)
                if ref.kind == "Pod":
                    return pods_settled(stop)  # its Pods gone: nothing makes them again
                cache = wired.get(ref.kind)
                if cache is None:
                    return True
                return workload_settled(cache.get(f"{ref.namespace}/{ref.name}"), stop.uid)

            drains = Drains(
                pods,
                report,
                warn=warn,
                warn_every=cfg.stop_timeout,
                settled=settled,
                quiet=cfg.stop_quiet,
            )
            for kept in self.model.draining():  # stops a previous incarnation watched
                drains.watch(Stop(kept.stop_id, "stop", kept.workload, kept.uid, kept.at))
            tasks.append(asyncio.create_task(drains.run(stop), name="drains"))

            def cluster_queue_of(key: str) -> str | None:
                place = self.model.workload(key)
                return place.cluster_queue if place else None

            actuator = Actuator(
                kube,
                flavors=lambda: flavors.objects,
                report=report,
                metrics=self.metrics,
                jobs=jobs,
                events=events,
                cluster_queue_of=cluster_queue_of,
                max_conflicts=cfg.max_attempts,
                wait_timeout=cfg.stop_timeout,
                slots=cfg.concurrency,
                max_backoff=cfg.max_backoff,
            )
            gate.append(actuator)
            writer = StatusWriter(
                kube, redis, self.model, queues, self.metrics, redis_key=cfg.redis_key
            )
            tasks.append(asyncio.create_task(writer.run(stop, cfg.status_interval), name="status"))
            self.live = True
            log.info("live: consuming %s as group %s", topics.decisions, cfg.group_id)
            await self._consume(
                consumer,
                actuator,
                stop,
                producer=producer,
                deadletter=topics.deadletter,
                drains=drains,
            )
        finally:
            for t in tasks:
                t.cancel()
            for t in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t
            for client in reversed(started):
                with contextlib.suppress(KafkaError, OSError):
                    await client.stop()
            await redis.aclose()
            await kube.close()
            await api.close()

    async def _wait(self, event: asyncio.Event, stop: asyncio.Event, what: str) -> bool:
        waited = 0.0
        while not event.is_set():
            if stop.is_set():
                return False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), 1.0)
            waited += 1.0
            if not event.is_set() and waited % 10 == 0:
                log.info("waiting for %s (%.0f s)", what, waited)
        return True

    async def _consume(
        self,
        consumer: AIOKafkaConsumer,
        actuator: Actuator,
        stop: asyncio.Event,
        *,
        producer: AIOKafkaProducer | None = None,
        deadletter: str | None = None,
        drains: Drains | None = None,
    ) -> None:
        """Fetch decisions into per-workload lanes; fold and commit what is done.
        A record that is not a decision is dead-lettered (``kuota.bus.deadletter``)
        before its offset can be committed: at least once."""

        async def apply(decision: Decision, offset: int) -> Outcome:
            outcome = await actuator.apply(decision, offset)
            if drains is not None:
                if decision.type == "QuotaReleased":
                    drains.released(decision.stop_id)
                else:
                    drains.add(decision)  # a stop: its Job's pods, until they are gone
            return outcome

        lanes = Lanes(apply, stop)
        try:
            while not stop.is_set():
                if lanes.error is not None:
                    raise lanes.error
                if lanes.in_flight >= self.cfg.max_in_flight:
                    lanes.progress.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(lanes.progress.wait(), 0.5)
                else:
                    fetched = await consumer.getmany(
                        timeout_ms=100 if lanes.busy else 500, max_records=self.cfg.max_batch
                    )
                    for tp in sorted(fetched):
                        for record in fetched[tp]:
                            decoded = decode_reason(record)
                            decision = decoded if isinstance(decoded, Decision) else None
                            if isinstance(decoded, str):
                                self.metrics.decisions.labels("undecodable", "skipped").inc()
                                if producer is not None and deadletter is not None:
                                    dl = dead_letter_record(
                                        deadletter, record, decoded, consumer=self.cfg.group_id
                                    )
                                    await producer.send_and_wait(
                                        dl.topic,
                                        value=dl.value,
                                        key=dl.key,
                                        headers=list(dl.headers),
                                    )
                            lanes.submit(tp, record, decision)
                    await self._lag(consumer, list(fetched))
                self.metrics.in_flight.set(lanes.in_flight)
                await self._commit(consumer, lanes)
        finally:
            await lanes.drain(timeout=10.0)
            with contextlib.suppress(KafkaError):
                await self._commit(consumer, lanes)

    async def _commit(self, consumer: AIOKafkaConsumer, lanes: Lanes) -> None:
        decisions, commit = lanes.done_prefix()
        for decision in decisions:
            self.model.apply(decision)
        if commit:
            await consumer.commit(commit)

    async def _lag(self, consumer: AIOKafkaConsumer, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            with contextlib.suppress(AssertionError, KeyError, TypeError):
                high = consumer.highwater(tp)
                position = await consumer.position(tp)
                if high is not None:
                    self.metrics.lag.labels(tp.topic, str(tp.partition)).set(
                        max(0, high - position)
                    )

    async def _replay(self, topics: Topics, stop: asyncio.Event) -> int:
        """Fold decisions ``[0, committed)`` of every partition into the read model."""
        kw = self.cfg.kafka.client_kwargs()
        committed = await group_offsets(self.cfg.kafka, topics.decisions, self.cfg.group_id)
        if not committed:  # the topic exists (ensure_topics): its metadata is late
            raise Unavailable(f"{topics.decisions} has no partitions in the metadata yet")
        ranges = {p: end for p, end in committed.items() if end}
        if not ranges:
            return 0
        reader = AIOKafkaConsumer(
            enable_auto_commit=False,
            isolation_level="read_committed",
            auto_offset_reset="earliest",
            **kw,
        )
        await reader.start()
        folded = 0
        try:
            tps = [TopicPartition(topics.decisions, p) for p in ranges]
            reader.assign(tps)
            await reader.seek_to_beginning(*tps)
            pending = set(tps)
            while pending and not stop.is_set():
                fetched = await reader.getmany(*pending, timeout_ms=500, max_records=1000)
                for tp in sorted(fetched):
                    end = ranges[tp.partition]
                    for record in fetched[tp]:
                        if record.offset >= end:
                            break
                        decision = decode(record)
                        if decision is not None:
                            self.model.apply(decision)
                            folded += 1
                for tp in list(pending):
                    if await reader.position(tp) >= ranges[tp.partition]:
                        pending.discard(tp)
        finally:
            await reader.stop()
        return folded
