"""kuota.service: the scaffolding the four services share (docs/design/service-runner.md).

A service is a settings loader and a factory of :class:`Service` objects
(``run(stop)``, ``live``). :meth:`Runner.main` loads the settings (a bad one:
one line on stderr, :data:`EXIT_SETTINGS`), sets up logging (one format), and
runs :meth:`Runner.run`: it serves ``/metrics`` (a port in use: one line,
:data:`EXIT_FAILURE`), installs the two-stage stop, and runs the service:

- Start-up retry: until the service is ``live``, a failure :func:`retriable`
  accepts (Kafka, Redis or the apiserver not up yet) starts a new service after
  a backoff, for at most ``startup_deadline`` seconds; then :data:`EXIT_UNAVAILABLE`.
- Two-stage stop: the first SIGTERM/SIGINT sets ``stop``; a live service
  finishes what it is doing and returns. A service not live yet, a second
  signal, or ``stop_deadline`` seconds after the first cancel it. Both exit
  :data:`EXIT_OK`; a :class:`Fatal` or named error: one line, :data:`EXIT_FAILURE`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, NoReturn, Protocol, TypeVar

from aiokafka import TopicPartition
from aiokafka.errors import KafkaError
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from kuota.bus.processor import Handler, TransactionalProcessor, journal_lag
from kuota.bus.settings import KafkaSettings, SettingsError

if TYPE_CHECKING:
    from kuota.events.schema import JournalEvent

#: Stopped on request (SIGTERM/SIGINT), gracefully or forced.
EXIT_OK = 0
#: A fatal error (a port in use, a dependency that failed for good, a bug).
EXIT_FAILURE = 1
#: A missing or malformed setting: nothing was started.
EXIT_SETTINGS = 2
#: A dependency still unreachable when the start-up retry gave up.
EXIT_UNAVAILABLE = 3

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
NOISY_LOGGERS = ("aiokafka", "kafka")
SIGNALS = (signal.SIGTERM, signal.SIGINT)
STARTUP_DEADLINE = 60.0  # seconds of start-up retries
STOP_DEADLINE = 15.0  # seconds from the first signal to a forced stop
BACKOFF_FIRST, BACKOFF_MAX = 0.5, 5.0
#: Seconds to fold one journal event (``kuota_fold_latency_seconds``).
FOLD_BUCKETS = (1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.05, 0.25, 1.0)

S = TypeVar("S", bound="Settings")
T = TypeVar("T")


class Fatal(Exception):
    """Stop the service with one log line (the message) and :data:`EXIT_FAILURE`."""


class Unavailable(Exception):
    """A dependency is not reachable (yet): retried during start-up."""


class Settings(Protocol):
    """What the runner reads of a service's settings."""

    @property
    def metrics_port(self) -> int: ...
    @property
    def metrics_host(self) -> str: ...
    @property
    def log_level(self) -> str: ...


class Service(Protocol):
    """One attempt at running a service."""

    @property
    def live(self) -> bool:
        """True once it serves: no start-up retry after it, and a first signal
        waits for a graceful stop (before, it cancels at once)."""
        ...

    async def run(self, stop: asyncio.Event) -> None:
        """Serve until ``stop`` is set, then return."""
        ...


# ---------------------------------------------------------------------- settings


def _raw(env: Mapping[str, str], name: str) -> str:
    return env.get(name, "").strip()


def required(env: Mapping[str, str], name: str, hint: str = "") -> str:
    value = _raw(env, name)
    if not value:
        raise SettingsError(f"{name} is not set{f' ({hint})' if hint else ''}")
    return value


def integer(
    env: Mapping[str, str],
    name: str,
    default: int,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
) -> int:
    raw = _raw(env, name) or str(default)
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r} is not an integer") from None
    if minimum is not None and maximum is not None and not minimum <= value <= maximum:
        raise SettingsError(f"{name}={raw!r} must be between {minimum} and {maximum}")
    if minimum is not None and value < minimum:
        raise SettingsError(f"{name}={raw!r} must be at least {minimum}")
    if maximum is not None and value > maximum:
        raise SettingsError(f"{name}={raw!r} must be at most {maximum}")
    return value


def number(
    env: Mapping[str, str],
    name: str,
    default: float,
    *,
    minimum: float | None = None,
    positive: bool = False,
) -> float:
    raw = _raw(env, name) or str(default)
    try:
        value = float(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r} is not a number") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise SettingsError(f"{name}={raw!r} is not a finite number")
    if positive and not value > 0:
        raise SettingsError(f"{name}={raw!r} must be positive")
    if minimum is not None and value < minimum:
        raise SettingsError(f"{name}={raw!r} must be at least {minimum}")
    return value


def port(env: Mapping[str, str], name: str, default: int) -> int:
    raw = _raw(env, name) or str(default)
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise SettingsError(f"{name}={raw!r} is not a port (0-65535)")
    return value


def metrics_port(env: Mapping[str, str], default: int) -> int:
    """``KUOTA_METRICS_PORT``: Prometheus ``/metrics`` (0: no server)."""
    return port(env, "KUOTA_METRICS_PORT", default)


def metrics_host(env: Mapping[str, str]) -> str:
    """``KUOTA_METRICS_HOST``: the metrics server's bind address (all by default)."""
    return _raw(env, "KUOTA_METRICS_HOST") or "0.0.0.0"


def config_source(env: Mapping[str, str]) -> tuple[str | None, tuple[str, str] | None]:
    """Where the Configuration is read from, as ingest and the webhook both read it:
    ``KUOTA_CONFIG_FILE`` (a file that must exist) or ``KUOTA_CONFIG_CONFIGMAP``
    (``namespace/name``), not both; (None, None) for the defaults."""
    config_file = _raw(env, "KUOTA_CONFIG_FILE") or None
    config_map_raw = _raw(env, "KUOTA_CONFIG_CONFIGMAP")
    if config_file and config_map_raw:
        raise SettingsError("set KUOTA_CONFIG_FILE or KUOTA_CONFIG_CONFIGMAP, not both")
    if config_file is not None and not os.path.isfile(config_file):
        raise SettingsError(f"KUOTA_CONFIG_FILE={config_file}: no such file")
    config_map: tuple[str, str] | None = None
    if config_map_raw:
        ns, _, name = config_map_raw.partition("/")
        if not ns or not name or "/" in name:
            raise SettingsError(f"KUOTA_CONFIG_CONFIGMAP={config_map_raw!r}: want namespace/name")
        config_map = (ns, name)
    return config_file, config_map


def log_level(env: Mapping[str, str]) -> str:
    """``KUOTA_LOG_LEVEL``: DEBUG, INFO (default), WARNING, ERROR or CRITICAL."""
    level = (_raw(env, "KUOTA_LOG_LEVEL") or "INFO").upper()
    if level not in LOG_LEVELS:
        raise SettingsError(f"KUOTA_LOG_LEVEL={level!r} is not a log level")
    return level


def instance(topic_prefix: str) -> str:
    """The deployment's name: the topic prefix without its dots (``kuota.`` ->
    ``kuota``), so consumer groups, transactional ids and keys of pipelines
    that share a Kafka never meet."""
    return topic_prefix.rstrip(".").replace(".", "-") or "kuota"


class Identity:
    """A settings mixin: the Kafka ids of the service ``ROLE`` in its deployment.

    The group is ``<instance>-<ROLE>``, the transactional id (and the static
    group member id) of a partition ``<instance>-<ROLE>-<partition>``."""

    __slots__ = ()
    ROLE: ClassVar[str]
    kafka: KafkaSettings

    @property
    def instance(self) -> str:
        return instance(self.kafka.topic_prefix)

    @property
    def group_id(self) -> str:
        return f"{self.instance}-{self.ROLE}"

    def transactional_id(self, partition: int) -> str:
        return f"{self.group_id}-{partition}"


# ---------------------------------------------------------------------- logging, metrics


def setup_logging(level: str) -> None:
    """One format for every service, on stderr; Kafka's clients at WARNING at least."""
    logging.basicConfig(level=level, format=LOG_FORMAT, stream=sys.stderr)
    quiet = max(logging.WARNING, logging.getLevelName(level))
    for noisy in NOISY_LOGGERS:
        logging.getLogger(noisy).setLevel(quiet)


def serve_metrics(registry: CollectorRegistry, port: int, host: str) -> Callable[[], None]:
    """Serve ``registry`` at ``http://host:port/metrics`` from a thread (so a
    long replay on the event loop does not starve the probes); returns the
    shutdown. Port 0: no server. A port in use is :class:`Fatal`."""
    if port == 0:
        return lambda: None
    try:
        server, thread = start_http_server(port, addr=host, registry=registry)
    except OSError as err:
        raise Fatal(f"cannot serve metrics on {host}:{port}: {err.strerror or err}") from None

    def shutdown() -> None:
        server.shutdown()
        server.server_close()
        thread.join(5)

    return shutdown


class JournalMetrics:
    """The metrics of a service that folds the journal (admission, preemption),
    registered on ``registry``: where it is, how far behind, how fast it folds."""

    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.lag = Gauge(
            "kuota_consumer_lag", "Journal end offset minus the next offset to fold", registry=r
        )
        self.position = Gauge(
            "kuota_journal_position", "Journal offset of the next record to fold", registry=r
        )
        self.fold_latency = Histogram(
            "kuota_fold_latency_seconds",
            "Time to fold one journal event (live)",
            buckets=FOLD_BUCKETS,
            registry=r,
        )
        self.events = Counter(
            "kuota_journal_events", "Journal events folded live", ["type"], registry=r
        )
        self.replayed = Gauge(
            "kuota_replayed_events", "Journal events replayed silently at start-up", registry=r
        )

    def folded(self, event: JournalEvent, seconds: float, *, live: bool) -> None:
        """One event folded (counted only live: a replay re-folds committed ones)."""
        if live:
            self.fold_latency.observe(seconds)
            self.events.labels(event.type).inc()

    def advanced(self, next_offset: int, lag: int | None) -> None:
        """After a live batch: the next offset to fold and the lag (None: not known yet)."""
        self.position.set(next_offset)
        if lag is not None:
            self.lag.set(lag)


# ---------------------------------------------------------------------- the journal


class JournalProcessor(TransactionalProcessor):
    """The journal's one partition, consumed by the group of ``ids`` (a static
    member named by its transactional id) and processed in transactions."""

    def __init__(
        self, ids: Identity, *, journal: str, handle: Handler, max_batch: int, partition: int
    ) -> None:
        member = ids.transactional_id(partition)
        super().__init__(
            ids.kafka,
            group_id=ids.group_id,
            transactional_id=member,
            input_topic=journal,
            group_instance_id=member,
            handle=handle,
            max_batch=max_batch,
        )

    async def lag(self, partition: int) -> int | None:
        """Journal records not consumed yet, as of the last fetch (the lag metric):
        the end offset minus the consumer's position, which steps over
        transaction markers (the offset after the last record folded does not:
        a trailing commit marker would count as one record forever)."""
        return await journal_lag(self.consumer, TopicPartition(self._input_topic, partition))


class _Fencing(Protocol):
    async def start_producer(self) -> None: ...
    async def committed_offsets(self) -> dict[int, int | None]: ...


async def committed_offset(
    proc: _Fencing, *, journal: str, name: str, partition: int
) -> int | None:
    """Start the transactional producer, which fences a predecessor (so the
    group's committed offset is final), and return that offset of the journal's
    one ``partition``; a journal of other partitions is :class:`Fatal`."""
    await proc.start_producer()
    committed = await proc.committed_offsets()
    if set(committed) != {partition}:
        raise Fatal(
            f"{journal} has partitions {sorted(committed)}; "
            f"{name} folds exactly one partition today"
        )
    return committed[partition]


# ---------------------------------------------------------------------- start-up


def retriable(err: BaseException) -> bool:
    """A dependency that is not up yet: :class:`Unavailable`, a retriable Kafka
    error (a fresh broker without a group coordinator yet), a refused or
    timed-out connection. Authentication errors and the like are not."""
    if isinstance(err, Unavailable):
        return True
    if isinstance(err, KafkaError):
        return bool(getattr(err, "retriable", False))
    return isinstance(err, ConnectionError | TimeoutError)


def backoff(attempt: int) -> float:
    """Seconds before start-up attempt ``attempt + 1``: 0.5, 1, 2, 4, 5, 5, ..."""
    return float(min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** (attempt - 1)))


def describe(err: BaseException) -> str:
    text, name = str(err), type(err).__name__
    return text if text.startswith(name) else f"{name}: {text}" if text else name


async def within(
    what: str,
    aw: Awaitable[T],
    timeout: float,
    *,
    transient: tuple[type[BaseException], ...] = (),
) -> T:
    """``aw``, or :class:`Unavailable` (retried) if it does not answer in time,
    fails the :func:`retriable` way, with an ``OSError`` (a refused connection)
    or with one of ``transient``; any other failure is :class:`Fatal`."""
    try:
        return await asyncio.wait_for(aw, timeout)
    except TimeoutError:
        raise Unavailable(f"{what}: no answer within {timeout:.0f}s") from None
    except (Fatal, Unavailable):
        raise
    except Exception as err:
        unavailable = retriable(err) or isinstance(err, (OSError, *transient))
        raise (Unavailable if unavailable else Fatal)(f"{what}: {describe(err)}") from None


# ---------------------------------------------------------------------- the runner


class _TwoStageStop:
    """The signal handler: a graceful stop first, a forced one after."""

    def __init__(
        self,
        runner: Runner,
        stop: asyncio.Event,
        task: asyncio.Task[int],
        live: Callable[[], bool],
    ) -> None:
        self.runner, self.stop, self.task, self.live = runner, stop, task, live
        self.forced = False
        self._timer: asyncio.TimerHandle | None = None

    def __call__(self, signame: str) -> None:
        again = self.stop.is_set()
        self.stop.set()
        if again or not self.live():
            self.force(f"{signame} received; stopping now")
            return
        deadline = self.runner.stop_deadline
        self.runner.log.info(
            "%s received; stopping after %s (at most %.0f s)",
            signame,
            self.runner.finishing,
            deadline,
        )
        self._timer = asyncio.get_running_loop().call_later(
            deadline, self.force, f"not stopped {deadline:.0f} s after {signame}; stopping now"
        )

    def force(self, why: str) -> None:
        if self.forced or self.task.done():
            return
        self.forced = True
        self.runner.log.info("%s", why)
        self.task.cancel()

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


@dataclass(frozen=True, slots=True)
class Runner:
    """How one service starts, stops and fails (see the module docstring)."""

    name: str  # the command, e.g. "kuota-admission": prefixes a settings error
    log: logging.Logger
    registry: CollectorRegistry
    finishing: str = "what it is doing"  # "stopping after <finishing>"
    errors: tuple[type[BaseException], ...] = ()  # also one log line, no traceback
    startup_deadline: float = STARTUP_DEADLINE
    stop_deadline: float = STOP_DEADLINE

    def main(self, load: Callable[[], S], make: Callable[[S], Service]) -> NoReturn:
        """The console script: settings, logging, then :meth:`run`; exits."""
        try:
            settings = load()
        except SettingsError as err:
            print(f"{self.name}: {err}", file=sys.stderr)
            sys.exit(EXIT_SETTINGS)
        setup_logging(settings.log_level)
        sys.exit(asyncio.run(self.run(settings, make)))

    async def run(self, settings: S, make: Callable[[S], Service]) -> int:
        """Metrics, signals, the start-up retry and the service; the exit code."""
        log = self.log
        try:
            shutdown = serve_metrics(self.registry, settings.metrics_port, settings.metrics_host)
        except Fatal as err:
            log.error("%s", err)
            return EXIT_FAILURE
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        stop = asyncio.Event()
        current: list[Service] = []
        stopper = _TwoStageStop(self, stop, task, lambda: bool(current) and current[-1].live)
        for sig in SIGNALS:
            loop.add_signal_handler(sig, stopper, sig.name)
        code = EXIT_FAILURE
        try:
            await self._attempts(settings, make, stop, current)
            if not stop.is_set():
                raise Fatal("stopped by itself, without a stop request")
            code = EXIT_OK
        except asyncio.CancelledError:
            if not stop.is_set():
                raise
            task.uncancel()
            code = EXIT_OK
        except Unavailable as err:
            log.error("cannot start: %s", err)
            code = EXIT_UNAVAILABLE
        except Fatal as err:
            log.error("%s", err)
        except (KafkaError, OSError, *self.errors) as err:
            log.error("stopping on %s", describe(err))
        except Exception:
            log.exception("stopping on an unexpected error")
        finally:
            for sig in SIGNALS:
                loop.remove_signal_handler(sig)
            stopper.close()
            shutdown()
        if code == EXIT_OK:
            log.info("stopped")
        return code

    async def _attempts(
        self,
        settings: S,
        make: Callable[[S], Service],
        stop: asyncio.Event,
        current: list[Service],
    ) -> None:
        t0 = time.monotonic()
        for attempt in range(1, sys.maxsize):
            service = make(settings)
            current.append(service)
            try:
                await service.run(stop)
                return
            except Exception as err:
                if service.live or stop.is_set() or not retriable(err):
                    raise
                delay = backoff(attempt)
                waited = time.monotonic() - t0
                if waited + delay > self.startup_deadline:
                    raise Unavailable(f"{describe(err)} (gave up after {waited:.0f} s)") from err
                self.log.warning(
                    "start-up: %s; retrying in %.1f s (attempt %d)", describe(err), delay, attempt
                )
                await asyncio.sleep(delay)
            finally:
                current.remove(service)


__all__ = [
    "EXIT_FAILURE",
    "EXIT_OK",
    "EXIT_SETTINGS",
    "EXIT_UNAVAILABLE",
    "FOLD_BUCKETS",
    "Fatal",
    "Identity",
    "JournalMetrics",
    "JournalProcessor",
    "Runner",
    "Service",
    "Settings",
    "SettingsError",
    "Unavailable",
    "backoff",
    "committed_offset",
    "instance",
    "integer",
    "log_level",
    "metrics_host",
    "metrics_port",
    "number",
    "port",
    "required",
    "retriable",
    "serve_metrics",
    "setup_logging",
    "within",
]
