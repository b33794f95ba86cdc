"""kuota.service: the settings helpers, the runner's exit codes, the two-stage
stop (real signals to this process), the start-up retry and the metrics server.

The services are stand-ins: ``Fake`` does what a test tells it (fail a number
of times, go live, ignore the stop) and records what the runner did to it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from aiokafka.errors import KafkaConnectionError, SaslAuthenticationFailed
from prometheus_client import CollectorRegistry, Counter

import kuota.service as svc
from kuota.bus.settings import KafkaSettings, SettingsError
from kuota.service import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_SETTINGS,
    EXIT_UNAVAILABLE,
    Fatal,
    Runner,
    Unavailable,
)

LOG = logging.getLogger("kuota.test-service")


@dataclass(frozen=True)
class Settings:
    metrics_port: int = 0
    metrics_host: str = "127.0.0.1"
    log_level: str = "INFO"


class Fake:
    """One attempt: fails with ``fail`` if given, else goes live and waits for
    the stop (or ignores it with ``stubborn``)."""

    def __init__(
        self,
        *,
        fail: BaseException | None = None,
        live_first: bool = True,
        stubborn: bool = False,
        on_live: Callable[[], None] | None = None,
    ) -> None:
        self.fail, self.live_first, self.stubborn, self.on_live = (
            fail,
            live_first,
            stubborn,
            on_live,
        )
        self.live = False
        self.cancelled = False
        self.returned = False

    async def run(self, stop: asyncio.Event) -> None:
        try:
            if self.fail is not None and not self.live_first:
                raise self.fail
            self.live = True
            if self.fail is not None:
                raise self.fail
            if self.on_live is not None:
                asyncio.get_running_loop().call_soon(self.on_live)
            if self.stubborn:
                await asyncio.sleep(3600)
            await stop.wait()
            self.returned = True
        except asyncio.CancelledError:
            self.cancelled = True
            raise


def runner(**kw: object) -> Runner:
    return Runner("kuota-test", LOG, CollectorRegistry(), **kw)  # type: ignore[arg-type]


def sigterm() -> None:
    os.kill(os.getpid(), signal.SIGTERM)


# ---------------------------------------------------------------------- settings


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda e: svc.integer(e, "N", 1, minimum=1), "N='0' must be at least 1"),
        (lambda e: svc.integer(e, "X", 1), "X='x' is not an integer"),
        (lambda e: svc.integer(e, "B", 1, minimum=1, maximum=9), "B='10' must be between 1 and 9"),
        (lambda e: svc.number(e, "X", 1.0), "X='x' is not a number"),
        (lambda e: svc.number(e, "Z", 1.0, positive=True), "Z='0' must be positive"),
        (lambda e: svc.number(e, "INF", 1.0), "is not a finite number"),
        (lambda e: svc.port(e, "P", 1), "P='70000' is not a port"),
        (lambda e: svc.port(e, "X", 1), "X='x' is not a port"),
        (lambda e: svc.log_level(e), "KUOTA_LOG_LEVEL='CHATTY' is not a log level"),
        (lambda e: svc.required(e, "MISSING", "set it"), r"MISSING is not set \(set it\)"),
    ],
)
def test_bad_settings_name_the_variable_in_one_line(
    call: Callable[[dict[str, str]], object], message: str
) -> None:
    env = {
        "N": "0",
        "X": "x",
        "B": "10",
        "Z": "0",
        "INF": "inf",
        "P": "70000",
        "KUOTA_LOG_LEVEL": "chatty",
    }
    with pytest.raises(SettingsError, match=message) as err:
        call(env)
    assert "\n" not in str(err.value)


def test_settings_defaults_and_values() -> None:
    env = {"N": " 7 ", "F": "0.5", "KUOTA_METRICS_PORT": "0", "KUOTA_LOG_LEVEL": "debug"}
    assert svc.integer(env, "N", 1, minimum=1) == 7
    assert svc.integer({}, "N", 3, minimum=1) == 3, "unset or blank: the default"
    assert svc.number(env, "F", 2.0, minimum=0.1) == 0.5
    assert svc.metrics_port(env, 9102) == 0 and svc.metrics_port({}, 9102) == 9102
    assert svc.metrics_host({}) == "0.0.0.0"
    assert svc.log_level(env) == "DEBUG" and svc.log_level({}) == "INFO"
    assert svc.instance("kuota.") == "kuota"
    assert svc.instance("test-1a2b.") == "test-1a2b"
    assert svc.instance("a.b.") == "a-b" and svc.instance("") == "kuota"


def test_a_bad_setting_exits_2_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    def load() -> Settings:
        raise SettingsError("KUOTA_X='y' is not a number")

    with pytest.raises(SystemExit) as exited:
        runner().main(load, lambda s: Fake())
    assert exited.value.code == EXIT_SETTINGS == 2
    err = capsys.readouterr().err
    assert err == "kuota-test: KUOTA_X='y' is not a number\n"


# ---------------------------------------------------------------------- the two-stage stop


async def test_first_signal_stops_a_live_service_gracefully(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=LOG.name)
    fake = Fake(on_live=sigterm)
    code = await runner(finishing="the current batch").run(Settings(), lambda s: fake)
    assert code == EXIT_OK == 0
    assert fake.returned and not fake.cancelled, "it returned by itself"
    assert "SIGTERM received; stopping after the current batch" in caplog.text
    assert "stopped" in caplog.messages


async def test_second_signal_forces_the_stop(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOG.name)

    def twice() -> None:
        sigterm()
        asyncio.get_running_loop().call_later(0.05, sigterm)

    fake = Fake(stubborn=True, on_live=twice)
    code = await runner().run(Settings(), lambda s: fake)
    assert code == EXIT_OK
    assert fake.cancelled and not fake.returned
    assert "SIGTERM received; stopping now" in caplog.text


async def test_the_stop_deadline_forces_the_stop(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOG.name)
    fake = Fake(stubborn=True, on_live=sigterm)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    code = await runner(stop_deadline=0.2).run(Settings(), lambda s: fake)
    assert code == EXIT_OK and fake.cancelled
    assert 0.15 <= loop.time() - t0 < 5
    assert "not stopped 0 s after SIGTERM; stopping now" in caplog.text


async def test_a_signal_before_live_stops_at_once() -> None:
    class Starting(Fake):
        async def run(self, stop: asyncio.Event) -> None:
            asyncio.get_running_loop().call_soon(sigterm)
            try:
                await asyncio.sleep(3600)  # e.g. a long silent replay
            except asyncio.CancelledError:
                self.cancelled = True
                raise

    fake = Starting()
    assert await runner().run(Settings(), lambda s: fake) == EXIT_OK
    assert fake.cancelled


async def test_sigint_is_a_stop_too() -> None:
    fake = Fake(on_live=lambda: os.kill(os.getpid(), signal.SIGINT))
    assert await runner().run(Settings(), lambda s: fake) == EXIT_OK
    assert fake.returned


# ---------------------------------------------------------------------- the start-up retry


@pytest.fixture
def fast_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(svc, "BACKOFF_FIRST", 0.01)
    monkeypatch.setattr(svc, "BACKOFF_MAX", 0.02)


def test_backoff_doubles_to_its_cap() -> None:
    assert [svc.backoff(a) for a in range(1, 7)] == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0]


async def test_a_dependency_not_up_yet_is_retried_until_it_is(
    fast_backoff: None, caplog: pytest.LogCaptureFixture
) -> None:
    made: list[Fake] = []

    def make(s: Settings) -> Fake:
        errors = [Unavailable("Redis: refused"), KafkaConnectionError("no broker")]
        fail = errors[len(made)] if len(made) < 2 else None
        made.append(Fake(fail=fail, live_first=False, on_live=sigterm))
        return made[-1]

    assert await runner().run(Settings(), make) == EXIT_OK
    assert len(made) == 3, "a new service per attempt"
    assert made[-1].returned
    retries = [m for m in caplog.messages if m.startswith("start-up: ")]
    assert len(retries) == 2 and "Redis: refused" in retries[0]


async def test_the_retry_gives_up_at_its_deadline_with_exit_3(
    fast_backoff: None, caplog: pytest.LogCaptureFixture
) -> None:
    made: list[Fake] = []

    def make(s: Settings) -> Fake:
        made.append(Fake(fail=Unavailable("Kafka at k:9092: no answer"), live_first=False))
        return made[-1]

    code = await runner(startup_deadline=0.2).run(Settings(), make)
    assert code == EXIT_UNAVAILABLE == 3
    assert len(made) > 2
    assert "cannot start: Unavailable: Kafka at k:9092: no answer (gave up after" in caplog.text
    assert "Traceback" not in caplog.text


async def test_no_retry_after_live_nor_of_a_permanent_error(fast_backoff: None) -> None:
    for fake in (
        Fake(fail=KafkaConnectionError("lost the broker")),  # live first: not retried
        Fake(fail=SaslAuthenticationFailed("bad password"), live_first=False),
        Fake(fail=Fatal("the journal has 2 partitions"), live_first=False),
    ):
        made: list[Fake] = []

        def make(s: Settings, fake: Fake = fake, made: list[Fake] = made) -> Fake:
            made.append(fake)
            return fake

        assert await runner().run(Settings(), make) == EXIT_FAILURE
        assert len(made) == 1


def test_what_is_retriable() -> None:
    assert svc.retriable(Unavailable("x"))
    assert svc.retriable(KafkaConnectionError("x"))
    assert svc.retriable(ConnectionRefusedError()) and svc.retriable(TimeoutError())
    assert not svc.retriable(SaslAuthenticationFailed("x"))
    assert not svc.retriable(Fatal("x")) and not svc.retriable(ValueError("x"))


async def test_within_names_the_dependency() -> None:
    async def hang() -> None:
        await asyncio.sleep(10)

    async def fail(err: BaseException) -> None:
        raise err

    with pytest.raises(Unavailable, match="Kafka at k:1: no answer within 0s"):
        await svc.within("Kafka at k:1", hang(), 0.01)
    with pytest.raises(Unavailable, match="apiserver: ConnectionRefusedError"):
        await svc.within("apiserver", fail(ConnectionRefusedError(111, "refused")), 1)
    with pytest.raises(Unavailable, match="Redis: KeyError"):
        await svc.within("Redis", fail(KeyError("k")), 1, transient=(KeyError,))
    with pytest.raises(Fatal, match="kubeconfig: ValueError: bad"):
        await svc.within("kubeconfig", fail(ValueError("bad")), 1)


# ---------------------------------------------------------------------- errors, metrics


async def test_fatal_errors_are_one_line_and_bugs_show_their_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Oops(Exception):
        pass

    assert await runner().run(Settings(), lambda s: Fake(fail=Fatal("one line"))) == 1
    assert caplog.records[-1].getMessage() == "one line" and caplog.records[-1].exc_info is None
    assert await runner(errors=(Oops,)).run(Settings(), lambda s: Fake(fail=Oops("named"))) == 1
    assert caplog.records[-1].getMessage() == "stopping on Oops: named"
    assert await runner().run(Settings(), lambda s: Fake(fail=Oops("a bug"))) == 1
    assert caplog.records[-1].exc_info is not None, "an unexpected error: its traceback"


async def test_a_service_that_returns_unasked_is_a_failure() -> None:
    class Quits(Fake):
        async def run(self, stop: asyncio.Event) -> None:
            self.live = True

    assert await runner().run(Settings(), lambda s: Quits()) == EXIT_FAILURE


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_metrics_are_served_while_the_service_runs_and_not_after() -> None:
    registry = CollectorRegistry()
    Counter("kuota_test_things", "things", registry=registry).inc()
    port = _free_port()
    seen: list[str] = []

    def scrape() -> None:
        url = f"http://127.0.0.1:{port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as r:
            seen.append(r.read().decode())

    async def scrape_then_stop() -> None:
        await asyncio.to_thread(scrape)
        sigterm()

    fake = Fake(on_live=lambda: asyncio.ensure_future(scrape_then_stop()))
    code = await Runner("kuota-test", LOG, registry).run(
        Settings(metrics_port=port), lambda s: fake
    )
    assert code == EXIT_OK
    assert "kuota_test_things_total 1.0" in seen[0]
    with pytest.raises(ConnectionRefusedError):  # shut down with the service
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


async def test_a_metrics_port_in_use_is_one_line_and_exit_1(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        made: list[Fake] = []
        code = await runner().run(
            Settings(metrics_port=port), lambda s: made.append(Fake()) or made[-1]
        )
    assert code == EXIT_FAILURE == 1
    assert not made, "the service never started"
    assert f"cannot serve metrics on 127.0.0.1:{port}: " in caplog.text
    assert "Traceback" not in caplog.text


def test_exit_codes_are_distinct() -> None:
    assert len({EXIT_OK, EXIT_FAILURE, EXIT_SETTINGS, EXIT_UNAVAILABLE}) == 4


# ---------------------------------------------------------------------- journal folders


@dataclass(frozen=True, slots=True)
class Folder(svc.Identity):
    ROLE = "folder"

    kafka: KafkaSettings


def _kafka(prefix: str) -> KafkaSettings:
    env = {"KUOTA_KAFKA_BOOTSTRAP": "127.0.0.1:1", "KUOTA_TOPIC_PREFIX": prefix}
    return KafkaSettings.from_env(env)


def test_identity_names_the_group_and_transactional_ids_by_role_and_instance() -> None:
    cfg = Folder(_kafka("test-1a2b."))
    assert cfg.instance == "test-1a2b"
    assert cfg.group_id == "test-1a2b-folder"
    assert cfg.transactional_id(0) == "test-1a2b-folder-0"
    assert Folder(_kafka("kuota.")).transactional_id(3) == "kuota-folder-3"


async def test_journal_processor_is_a_static_member_named_by_its_transactional_id() -> None:
    cfg = Folder(_kafka("kuota."))
    proc = svc.JournalProcessor(
        cfg, journal="kuota.journal", handle=lambda _: [], max_batch=7, partition=0
    )
    try:
        assert proc._group_id == "kuota-folder"
        assert proc.consumer._group_instance_id == "kuota-folder-0"
        assert proc.producer._txn_manager.transactional_id == "kuota-folder-0"
        assert proc._input_topic == "kuota.journal" and proc._max_batch == 7
        assert await proc.lag(0) is None, "not assigned yet: no lag"
    finally:
        await proc.consumer.stop()
        await proc.producer.stop()


def test_journal_metrics_names_help_and_labels() -> None:
    r = CollectorRegistry()
    m = svc.JournalMetrics(r)
    m.advanced(42, None)
    m.advanced(43, 5)
    m.advanced(44, None)
    m.folded(ev := type("Ev", (), {"type": "Tick"})(), 0.001, live=True)  # type: ignore[arg-type]
    m.folded(ev, 0.001, live=False)  # type: ignore[arg-type]
    m.replayed.set(9)
    docs = {f.name: (f.documentation, f.type) for f in r.collect()}
    assert docs == {
        "kuota_consumer_lag": ("Journal end offset minus the next offset to fold", "gauge"),
        "kuota_journal_position": ("Journal offset of the next record to fold", "gauge"),
        "kuota_fold_latency_seconds": ("Time to fold one journal event (live)", "histogram"),
        "kuota_journal_events": ("Journal events folded live", "counter"),
        "kuota_replayed_events": ("Journal events replayed silently at start-up", "gauge"),
    }
    assert r.get_sample_value("kuota_journal_position") == 44
    assert r.get_sample_value("kuota_consumer_lag") == 5, "an unknown lag keeps the last one"
    assert r.get_sample_value("kuota_journal_events_total", {"type": "Tick"}) == 1, "live only"
    assert r.get_sample_value("kuota_fold_latency_seconds_count") == 1
    assert r.get_sample_value("kuota_fold_latency_seconds_bucket", {"le": "1e-05"}) == 0
    assert r.get_sample_value("kuota_replayed_events") == 9


class Offsets:
    def __init__(self, committed: dict[int, int | None]) -> None:
        self.committed = committed
        self.calls: list[str] = []

    async def start_producer(self) -> None:
        self.calls.append("start_producer")

    async def committed_offsets(self) -> dict[int, int | None]:
        self.calls.append("committed_offsets")
        return self.committed


async def test_committed_offset_fences_first_and_refuses_other_partitions() -> None:
    proc = Offsets({0: 17})
    assert await svc.committed_offset(proc, journal="j", name="kuota-x", partition=0) == 17
    assert proc.calls == ["start_producer", "committed_offsets"], "the fence comes first"
    fresh = Offsets({0: None})
    assert await svc.committed_offset(fresh, journal="j", name="x", partition=0) is None
    with pytest.raises(Fatal, match=r"^j has partitions \[0, 1\]; kuota-x folds exactly one"):
        await svc.committed_offset(Offsets({0: 1, 1: 2}), journal="j", name="kuota-x", partition=0)
