#!/usr/bin/env python3
"""Benchmark the offline audit (``make bench-replay``): replay a journal file.

1. **Generate** (in a child process, not timed as replay): a journal of
   ``--events`` records (1,000,000 by default) as ``kuota journal export``
   writes it, and its decision file. The journal is what ingest would write
   for a GPU cluster over event time, one Tick per second:

   - setup: two ResourceFlavors, ``--queues`` ClusterQueues (16 GPUs each) in
     two cohorts, a namespace + LocalQueue per ClusterQueue;
   - Jobs arriving about every ``--job-every`` seconds (seeded), 1-8 GPUs,
     running ~10 minutes; the generator folds as it writes (that is how the
     decision file is recorded), and, as a cluster would, follows each
     admission with the Job's ``PodsReady``, a status-only Job update (a no-op
     for the fold), its ``WorkloadFinished`` and, a minute later, the Job's
     deletion (TTL after finished);
   - ClusterQueue re-lists (unchanged objects, no-ops) every 10 minutes.

   So each Job is 5 journal events and the rest are Ticks (~80% with the
   defaults; ``--job-every`` moves the mix, and the mix moves the rate).
2. **Replay** (timed, in this process): exactly what ``kuota audit replay
   --file`` runs — ``kuota.audit.files.read_journal`` / ``read_decisions``
   into ``kuota.audit.replay.run`` with a fresh ``Fold`` in the admission
   service's mode (``preemption="plans"``, the replay's default) — and check it is
   identical. Progress goes to stderr. The LAST stdout line is::

       events_per_s=<N> peak_rss_mb=<N>

   ``peak_rss_mb`` is this process's peak RSS (the replay; generation ran in a
   child). ``--events 100000`` for a quick run; ``--keep DIR`` keeps the files.
"""

from __future__ import annotations

import argparse
import heapq
import multiprocessing
import os
import random
import resource
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kuota.audit.files import (
    DECISIONS_KIND,
    JOURNAL_KIND,
    ExportHeader,
    decisions_path,
    header_line,
    read_decisions,
    read_journal,
)
from kuota.audit.replay import Auditor, run
from kuota.core.fold.fold import Fold
from kuota.events.schema import (
    JournalEvent,
    ObjectDeleted,
    ObjectUpserted,
    PodsReady,
    Tick,
    WorkloadFinished,
)

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z
GPU = "nvidia.com/gpu"
KUEUE = "kueue.x-k8s.io/v1beta2"


def _meta(name: str, namespace: str | None = None, rv: int = 1) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "resourceVersion": str(rv)}
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


def setup_objects(queues: int) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": _meta(f), "spec": {}}
        for f in ("h100", "a100")
    ]
    for q in range(queues):
        objs.append(
            {
                "apiVersion": KUEUE,
                "kind": "ClusterQueue",
                "metadata": _meta(f"cq-{q}"),
                "spec": {
                    "cohortName": f"pool-{q % 2}",
                    "namespaceSelector": {},
                    "resourceGroups": [
                        {
                            "coveredResources": [GPU, "cpu"],
                            "flavors": [
                                {
                                    "name": f,
                                    "resources": [
                                        {"name": GPU, "nominalQuota": 8},
                                        {"name": "cpu", "nominalQuota": 64},
                                    ],
                                }
                                for f in ("h100", "a100")
                            ],
                        }
                    ],
                },
            }
        )
        objs.append({"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(f"team-{q}")})
        objs.append(
            {
                "apiVersion": KUEUE,
                "kind": "LocalQueue",
                "metadata": _meta("lq", f"team-{q}"),
                "spec": {"clusterQueue": f"cq-{q}"},
            }
        )
    return objs


def job(ns: str, name: str, gpus: int, at: float, rv: int, active: bool) -> dict[str, Any]:
    stamp = datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    obj: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": f"uid-{name}",
            "resourceVersion": str(rv),
            "creationTimestamp": stamp,
            "labels": {"kueue.x-k8s.io/queue-name": "lq"},
        },
        "spec": {
            "suspend": not active,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "train",
                            "image": "registry.example/train:1",
                            "resources": {"requests": {GPU: str(gpus), "cpu": "4"}},
                        }
                    ],
                }
            },
        },
    }
    return obj


class Generator:
    """Writes the journal and, folding as it goes, the recorded decisions."""

    def __init__(self, path: Path, *, events: int, queues: int, job_every: float) -> None:
        self.path = path
        self.target = events
        self.queues = queues
        self.job_every = job_every
        self.rng = random.Random(7)
        self.fold = Fold(preemption="plans")  # as admission folds (and the replay, by default)
        self.offset = 0
        self.written = 0
        self.decisions = 0
        self.types: Counter[str] = Counter()
        self.decision_types: Counter[str] = Counter()
        self.later: list[tuple[float, int, str, str, str]] = []  # (at, seq, kind, ns, name)
        self.seq = 0
        self.jobs: dict[str, tuple[int, float, float]] = {}  # ns/name -> (gpus, run s, created)

    def _write(self, event: JournalEvent) -> None:
        self.jf.write(
            b'{"offset":%d,"event":%s}\n' % (self.offset, event.model_dump_json().encode())
        )
        self.types[event.type] += 1
        self.written += 1
        for d in self.fold.apply(event, offset=self.offset):
            self.df.write(
                b'{"offset":%d,"partition":0,"decision":%s}\n'
                % (self.decisions, d.model_dump_json().encode())
            )
            self.decisions += 1
            self.decision_types[d.type] += 1
            if d.type == "Admitted" and d.workload is not None:
                self._after_admission(d.workload, d.at)
        self.offset += 1 if self.offset % 50 else 2  # transaction markers take offsets

    def _later(self, at: float, kind: str, key: str) -> None:
        ns, name = key.split("/")
        self.seq += 1
        heapq.heappush(self.later, (at, self.seq, kind, ns, name))

    def _after_admission(self, key: str, at: float) -> None:
        _, run_s, _ = self.jobs[key]
        self._later(at + 2, "ready", key)
        self._later(at + 3, "status", key)
        self._later(at + 3 + run_s, "finished", key)
        self._later(at + 63 + run_s, "deleted", key)

    def generate(self) -> None:
        dpath = decisions_path(self.path)
        with self.path.open("wb") as self.jf, dpath.open("wb") as self.df:
            self.jf.write(header_line(ExportHeader(JOURNAL_KIND, "bench.journal", 0, 0, None, "")))
            self.df.write(header_line(ExportHeader(DECISIONS_KIND, "bench.decisions")))
            t = T0
            for i, obj in enumerate(setup_objects(self.queues)):
                self._write(ObjectUpserted(id=f"setup-{i}", at=t, object=obj))
            n = 0
            report = 100_000
            next_job = t + self.rng.expovariate(1 / self.job_every)
            while self.written < self.target:
                t += 1.0
                while self.later and self.later[0][0] <= t and self.written < self.target:
                    at, _, kind, ns, name = heapq.heappop(self.later)
                    self._lifecycle(kind, ns, name, at)
                while next_job <= t and self.written < self.target:
                    n += 1
                    q = self.rng.randrange(self.queues)
                    ns, name = f"team-{q}", f"job-{n}"
                    gpus = self.rng.randint(1, 8)
                    run_s = self.rng.expovariate(1 / 600)
                    self.jobs[f"{ns}/{name}"] = (gpus, run_s, next_job)
                    obj = job(ns, name, gpus, next_job, 1, False)
                    self._write(ObjectUpserted(id=f"Job/{ns}/{name}@1", at=t, object=obj))
                    next_job += self.rng.expovariate(1 / self.job_every)
                if int(t) % 600 == 0:  # a re-list: unchanged ClusterQueues
                    for i, obj in enumerate(setup_objects(self.queues)):
                        if obj["kind"] == "ClusterQueue" and self.written < self.target:
                            self._write(ObjectUpserted(id=f"relist-{t}-{i}", at=t, object=obj))
                if self.written < self.target:
                    self._write(Tick(id=f"tick@{t}", at=t))
                if self.written >= report:
                    sys.stderr.write(f"  generated {self.written} events\n")
                    report += 100_000
        self.end = self.offset

    def _lifecycle(self, kind: str, ns: str, name: str, at: float) -> None:
        key = f"{ns}/{name}"
        if kind == "ready":
            self._write(
                PodsReady(id=f"podsready/{key}/uid-{name}/True@3", at=at, namespace=ns, name=name)
            )
        elif kind == "status":
            gpus, _, created = self.jobs[key]
            obj = job(ns, name, gpus, created, 4, True)
            obj["status"] = {"active": 1, "ready": 1}
            self._write(ObjectUpserted(id=f"Job/{key}@4", at=at, object=obj))
        elif kind == "finished":
            self._write(
                WorkloadFinished(id=f"finished/{key}/uid-{name}", at=at, namespace=ns, name=name)
            )
        elif kind == "deleted":
            self.jobs.pop(key, None)
            self._write(
                ObjectDeleted(id=f"Job/{key}@9/deleted", at=at, kind="Job", name=name, namespace=ns)
            )


def _generate(path: str, events: int, queues: int, job_every: float, out: Any) -> None:
    g = Generator(Path(path), events=events, queues=queues, job_every=job_every)
    t0 = time.perf_counter()
    g.generate()
    out.send((time.perf_counter() - t0, dict(g.types), dict(g.decision_types), g.decisions))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--queues", type=int, default=8)
    parser.add_argument("--job-every", type=float, default=25.0, help="mean seconds between Jobs")
    parser.add_argument("--keep", type=Path, default=None, help="write the files here, keep them")
    args = parser.parse_args(argv)

    tmp = None
    if args.keep is None:
        tmp = tempfile.TemporaryDirectory(prefix="kuota-bench-replay-")
        where = Path(tmp.name)
    else:
        where = args.keep
        where.mkdir(parents=True, exist_ok=True)
    path = where / "journal.jsonl"
    try:
        sys.stderr.write(f"generating {args.events} events into {path} ...\n")
        recv, send = multiprocessing.Pipe(duplex=False)
        child = multiprocessing.get_context("fork").Process(
            target=_generate, args=(str(path), args.events, args.queues, args.job_every, send)
        )
        child.start()
        gen_s, types, dtypes, n_decisions = recv.recv()
        child.join()
        size = path.stat().st_size + decisions_path(path).stat().st_size
        sys.stderr.write(
            f"generated in {gen_s:.1f} s ({size / 1e6:.0f} MB): events {types}; "
            f"decisions {n_decisions} {dtypes}\n"
        )

        sys.stderr.write("replaying (kuota audit replay --file) ...\n")
        auditor = Auditor()
        t0 = time.perf_counter()
        c0 = time.process_time()

        def progress(n: int, offset: int) -> None:
            if n % 100_000 == 0:
                rate = n / (time.perf_counter() - t0)
                sys.stderr.write(f"  replayed {n} events ({rate:,.0f}/s)\n")

        result = run(
            auditor, read_journal(path), read_decisions(decisions_path(path)), progress=progress
        )
        elapsed = time.perf_counter() - t0
        cpu = time.process_time() - c0
    finally:
        if tmp is not None:
            tmp.cleanup()
    if not result.identical:
        sys.stderr.write(f"NOT IDENTICAL: {result.divergence}\n")
        return 1
    rate = result.events / elapsed
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"replayed {result.events} events, {result.matched} decisions matched, identical, "
        f"in {elapsed:.1f} s wall, {cpu:.1f} s CPU ({result.events / cpu:.0f} events per CPU-s; "
        f"load average {load} on {os.cpu_count()} CPUs)"
    )
    print(f"events_per_s={rate:.0f} peak_rss_mb={peak_mb:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
