"""Faults for the fault runs: a seeded schedule and the code that injects each kind.

Theory of operation. ``plan_faults`` draws, from ``random.Random(seed)``, when
each fault happens (seconds after the first Job is created) and how long a
killed service stays down. The schedule is printed before the run starts;
the same seed and arguments give the same schedule. ``Injector`` executes
one fault at a time, in order, each no earlier than its planned time (a
fault that takes long, a Kafka restart, delays the next, never overlaps it):

- ``kill:<service>``: ``kill -9`` of the service's process, then, after the
  planned delay, ``kuota-services``' ``up`` restarts it (and waits until it
  says it is live). ``after_burst`` kills fire 50-400 ms after a burst of
  Job creations, while the pipeline is inside a Kafka transaction. Two kills
  wait for a moment of preemption instead (``trigger``): preemption as soon as
  a head starts waiting for a plan (``waiting``: mid-plan), admission as soon
  as a plan with victims is on the journal (``plan``: between the plan and
  its decision). The run's observer sets the events they wait for.
- ``kafka``: ``scripts/stack down kafka`` + ``up kafka`` on the run's stack.
- ``apiserver``: SIGTERM (SIGKILL 3 s later) of kube-apiserver only (etcd keeps its data), then
  ``scripts/stack up kube`` starts it again; watches resume from a position
  the new apiserver may not know (410 Gone, relist).
- ``redis``: Redis is stopped, its data directory deleted, and started empty:
  the snapshots are gone, so the next start of admission or preemption folds
  the whole journal; the schedule kills admission a few seconds later.
- ``partition``: the actuator's only way to the apiserver is ``Proxy``, a TCP
  relay in this process; for 30 s it relays nothing (connections stay open,
  new ones are accepted and held: a black hole, not a refusal).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SERVICES = ("ingest", "admission", "preemption", "actuator")
PARTITION_SECONDS = 30.0
TRIGGERS = {
    "waiting": "as soon as a head waits for a preemption plan (mid-plan)",
    "plan": "as soon as a plan with victims is journaled (before its decision)",
}
# (service killed, trigger): one of each in every schedule
TRIGGERED_KILLS = (("preemption", "waiting"), ("admission", "plan"))


@dataclass(frozen=True)
class Fault:
    at: float  # seconds after the first Job is created (not before)
    kind: str  # kill:<service> | kafka | apiserver | redis | partition
    down_for: float = 0.0  # killed service: delay before the restart
    after_burst: bool = False  # kill: right after the next burst of creations
    trigger: str = ""  # kill: right after a moment of preemption (TRIGGERS)

    def describe(self) -> str:
        extra = ""
        if self.kind.startswith("kill:"):
            extra = f" restart after {self.down_for:.1f}s"
            if self.after_burst:
                extra += ", right after a burst (mid-transaction)"
            if self.trigger:
                extra += f", {TRIGGERS[self.trigger]}"
        elif self.kind == "partition":
            extra = f" for {PARTITION_SECONDS:.0f}s"
        return f"t+{self.at:6.1f}s {self.kind}{extra}"


def plan_faults(
    rng: random.Random, window: float, kills: int, kinds: tuple[str, ...]
) -> list[Fault]:
    """``kills`` kill -9 of each service, the two kills at moments of preemption
    (``TRIGGERED_KILLS``) and one of each infrastructure fault in ``kinds``."""
    lo, hi = 0.08 * window, 0.85 * window
    faults: list[Fault] = []
    for service in SERVICES:
        for n in range(kills):
            faults.append(
                Fault(
                    at=round(rng.uniform(lo, hi), 1),
                    kind=f"kill:{service}",
                    down_for=round(rng.uniform(0.5, 4.0), 1),
                    after_burst=n == 0 or rng.random() < 0.3,
                )
            )
    for service, trigger in TRIGGERED_KILLS:  # in the busy first half
        faults.append(
            Fault(
                at=round(rng.uniform(lo, max(lo, 0.5 * window)), 1),
                kind=f"kill:{service}",
                down_for=round(rng.uniform(0.5, 3.0), 1),
                trigger=trigger,
            )
        )
    for kind in kinds:
        at = round(rng.uniform(lo, hi), 1)
        faults.append(Fault(at=at, kind=kind))
        if kind == "redis":  # a service must rebuild without its snapshot
            faults.append(
                Fault(
                    at=round(at + rng.uniform(2.0, 6.0), 1),
                    kind="kill:admission",
                    down_for=round(rng.uniform(0.5, 2.0), 1),
                )
            )
    faults.sort(key=lambda f: (f.at, f.kind))
    return faults


# ====================================================================== the proxy


class Proxy:
    """A TCP relay to ``target`` that can black-hole everything for a while."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self._open = asyncio.Event()
        self._open.set()
        self._server: asyncio.base_events.Server | None = None
        self._conns: set[asyncio.Task[None]] = set()
        self.relayed = 0

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for t in list(self._conns):
            t.cancel()
        await asyncio.gather(*self._conns, return_exceptions=True)

    async def blackhole(self, seconds: float) -> None:
        self._open.clear()
        try:
            await asyncio.sleep(seconds)
        finally:
            self._open.set()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._conns.add(task)
        try:
            await self._open.wait()  # held, not refused, while black-holed
            up_r, up_w = await asyncio.open_connection(*self.target)
            try:
                await asyncio.gather(self._pump(reader, up_w), self._pump(up_r, writer))
            finally:
                up_w.close()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            self._conns.discard(task)

    async def _pump(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        try:
            while True:
                data = await r.read(65536)
                if not data:
                    break
                await self._open.wait()  # bytes in flight wait out the black hole
                w.write(data)
                await w.drain()
                self.relayed += len(data)
        finally:
            with contextlib.suppress(OSError, RuntimeError):
                if w.can_write_eof():
                    w.write_eof()


def proxied_kubeconfig(kubeconfig: Path, port: int, out: Path) -> Path:
    """A copy of ``kubeconfig`` whose server is the proxy (same CA, same token)."""
    import yaml

    doc = yaml.safe_load(kubeconfig.read_text())
    for cluster in doc.get("clusters") or []:
        cluster["cluster"]["server"] = f"https://127.0.0.1:{port}"
    out.write_text(yaml.safe_dump(doc))
    return out


# ====================================================================== the injector


@dataclass
class Injected:
    fault: Fault
    started: float  # seconds after the first creation
    took: float
    detail: str


class Injector:
    """Executes a fault schedule against one stack and one pipeline."""

    def __init__(
        self,
        *,
        launcher: Any,
        pipeline: Any,
        stack_env: Mapping[str, str],
        stack_dir: Path,
        repo: Path,
        proxy: Proxy,
        say: Callable[[str], None],
    ) -> None:
        self.launcher = launcher
        self.pipeline = pipeline
        self.env = dict(stack_env)
        self.stack_dir = stack_dir
        self.repo = repo
        self.proxy = proxy
        self.say = say
        self.done: list[Injected] = []
        self.burst = asyncio.Event()  # set by the workload after each burst
        # set by the observer at moments of preemption (TRIGGERS)
        self.moments = {name: asyncio.Event() for name in TRIGGERS}
        self.bursts_over = False  # set by the workload after its last burst
        self.t0 = 0.0
        self.lock = asyncio.Lock()  # one start/stop of services at a time
        self.injecting = asyncio.Lock()  # one fault at a time, triggered kills included
        self.crashes: list[str] = []  # services that exited without being killed

    async def supervise(self) -> None:
        """Restart a service that exited by itself (what Kubernetes would do)."""
        while True:
            await asyncio.sleep(1.0)
            async with self.lock:
                running = self.launcher.pids(self.pipeline)
                gone = [s for s in SERVICES if s not in running]
                if not gone:
                    continue
                for s in gone:
                    self.crashes.append(s)
                    self.say(
                        f"kuota-{s} exited by itself; restarting it (log: "
                        f"{self.pipeline.log_file(s)})"
                    )
                try:
                    await asyncio.to_thread(
                        self.launcher.up, self.pipeline, quiet=True, timeout=180
                    )
                except Exception as err:  # e.g. Kafka still down: try again
                    self.say(f"restart failed ({err}); trying again")

    async def run(self, faults: list[Fault], t0: float) -> None:
        """The schedule in order; the kills that wait for a moment of preemption
        run beside it (each from its planned time), so a slow fault before them
        does not push them past the moments the run has. Still one fault is
        injected at a time (``injecting``): a killed service's restart needs the
        apiserver and Kafka up."""
        self.t0 = t0
        beside = [asyncio.create_task(self._one(f)) for f in faults if f.trigger]
        try:
            for fault in faults:
                if not fault.trigger:
                    await self._one(fault)
        finally:
            await asyncio.gather(*beside)

    async def _one(self, fault: Fault) -> None:
        t0 = self.t0
        delay = t0 + fault.at - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        if fault.after_burst and not self.bursts_over:
            self.burst.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.burst.wait(), 30)
            await asyncio.sleep(random.Random(fault.at).uniform(0.05, 0.4))
        seen = ""
        if fault.trigger:
            moment = self.moments[fault.trigger]
            moment.clear()
            try:
                await asyncio.wait_for(moment.wait(), 60)
                seen = f" ({fault.trigger} seen)"
            except TimeoutError:
                seen = f" (no {fault.trigger} moment within 60 s)"
        async with self.injecting:  # one fault at a time: a restart needs the apiserver
            started = time.monotonic()
            detail = await self._inject(fault) + seen
            took = time.monotonic() - started
        self.done.append(Injected(fault, started - t0, took, detail))
        self.say(f"fault t+{started - t0:6.1f}s {fault.kind}: {detail} ({took:.1f}s)")

    async def _inject(self, fault: Fault) -> str:
        if fault.kind.startswith("kill:"):
            return await self._kill(fault.kind.split(":", 1)[1], fault.down_for)
        if fault.kind == "kafka":
            await self._stack("down", "kafka")
            await self._stack("up", "kafka")
            return "broker restarted"
        if fault.kind == "apiserver":
            pid = int((self.stack_dir / "run" / "kube-apiserver.pid").read_text())
            os.kill(pid, signal.SIGTERM)
            # its graceful shutdown drains watches for up to a minute: 3 s, then SIGKILL
            deadline = time.monotonic() + 3
            while await asyncio.to_thread(_alive, pid):
                if time.monotonic() > deadline:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                await asyncio.sleep(0.1)
            await self._stack("up", "kube")
            return f"kube-apiserver (pid {pid}) restarted, etcd kept"
        if fault.kind == "redis":
            await self._stack("down", "redis")
            data = self.stack_dir / "redis" / "appendonlydir"
            shutil.rmtree(data, ignore_errors=True)
            await self._stack("up", "redis")
            return "redis restarted with its data deleted (no snapshots)"
        if fault.kind == "partition":
            await self.proxy.blackhole(PARTITION_SECONDS)
            return f"actuator cut off from the apiserver for {PARTITION_SECONDS:.0f}s"
        raise ValueError(f"unknown fault {fault.kind}")

    async def _kill(self, service: str, down_for: float) -> str:
        async with self.lock:
            pid = self.launcher.pids(self.pipeline).get(service)
            if pid is None:
                return f"kuota-{service} was not running"
            os.kill(pid, signal.SIGKILL)
            while await asyncio.to_thread(_alive, pid):
                await asyncio.sleep(0.05)
            await asyncio.sleep(down_for)
            await asyncio.to_thread(self.launcher.up, self.pipeline, quiet=True, timeout=180)
            new = self.launcher.pids(self.pipeline).get(service)
        return f"kill -9 kuota-{service} (pid {pid}); restarted as pid {new}"

    async def _stack(self, *args: str) -> None:
        proc = await asyncio.create_subprocess_exec(
            str(self.repo / "scripts" / "stack"),
            *args,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"scripts/stack {' '.join(args)}: {err.decode()[-500:]}")


def _alive(pid: int) -> bool:
    with contextlib.suppress(ChildProcessError):
        waited, _ = os.waitpid(pid, os.WNOHANG)
        if waited == pid:
            return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
