"""Redis with an ACL user, on the local stack.

``scripts/stack up`` creates an ACL user for kuota (scripts/stack.d/redis.sh;
name and password in stack.env as ``KUOTA_REDIS_STACK_USERNAME`` /
``KUOTA_REDIS_STACK_PASSWORD``) with exactly the rules docs/security.md gives:
keys ``kuota:*``, commands PING, SELECT, HSET, HGETALL, HDEL, DEL. The default
user stays open for the other tests.

- the snapshot store works as that user, configured as a user would
  (``KUOTA_REDIS_USERNAME`` / ``KUOTA_REDIS_PASSWORD`` through
  ``RedisSettings``), and so do credentials in the URL;
- the user can touch nothing else: other keys, other commands;
- a wrong password is refused at once with Redis's reason;
- the same over the stack's TLS port (``KUOTA_REDIS_TLS_URL``, the stack's CA),
  with and without a client certificate; an untrusted server certificate is
  refused;
- one user per service (#23 item 10), made from ``kuota.store.acl`` under
  names of the test's own: each does its job with kuota's own code (ingest's
  signed seen hash, admission's snapshots, the actuator's status hash, the
  CLI reading both), and is refused the others' keys, another instance's and
  the commands it does not send; docs/security.md gives exactly those rules.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis.asyncio as aioredis
from redis.exceptions import AuthenticationError, NoPermissionError
from redis.exceptions import ConnectionError as RedisConnectionError

from kuota.store import acl
from kuota.store.settings import RedisSettings, redis_client
from kuota.store.snapshots import Snapshot, SnapshotStore

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def acl_env(redis_url: str) -> dict[str, str]:
    user = os.environ.get("KUOTA_REDIS_STACK_USERNAME", "").strip()
    password = os.environ.get("KUOTA_REDIS_STACK_PASSWORD", "").strip()
    if not user or not password:
        pytest.fail(
            "KUOTA_REDIS_STACK_USERNAME / KUOTA_REDIS_STACK_PASSWORD are not in the stack's "
            "env file: run `scripts/stack up` (it adds the ACL user to a running Redis)",
            pytrace=False,
        )
    return {
        "KUOTA_REDIS_URL": redis_url,
        "KUOTA_REDIS_USERNAME": user,
        "KUOTA_REDIS_PASSWORD": password,
    }


@pytest.fixture
async def acl_client(acl_env: dict[str, str]) -> AsyncIterator[aioredis.Redis]:
    client = RedisSettings.from_env(acl_env).client()
    try:
        yield client
    finally:
        await client.aclose()


async def test_snapshot_store_as_the_acl_user(
    acl_client: aioredis.Redis, acl_env: dict[str, str], redis_url: str
) -> None:
    with pytest.raises(NoPermissionError):  # it is the ACL user, not the default one
        await acl_client.execute_command("ACL", "WHOAMI")
    name = f"test-sec-{uuid.uuid4().hex[:10]}"
    store = SnapshotStore(acl_client, name=name, key=b"k", build="b1")
    state = {"queues": ["cq-a", "cq-b"], "usage": {"cq-a": 3}}
    assert await store.save(Snapshot(offset=42, state=state)) > 0
    loaded, reason = await store.load()
    assert reason == "ok" and loaded == Snapshot(offset=42, state=state)
    # what the ACL user wrote is where the services and the default user look
    plain = aioredis.from_url(redis_url)
    try:
        assert await plain.hget(f"kuota:snapshot:{name}", "offset") == b"42"
        await store.delete()
        assert not await plain.exists(f"kuota:snapshot:{name}")
    finally:
        await plain.aclose()


async def test_the_acl_user_can_do_nothing_else(acl_client: aioredis.Redis) -> None:
    with pytest.raises(NoPermissionError, match="keys"):
        await acl_client.hset("other:key", "a", "1")
    with pytest.raises(NoPermissionError, match="keys"):
        await acl_client.hgetall("other:key")
    for command in (
        ("FLUSHALL",),
        ("CONFIG", "GET", "maxmemory"),
        ("KEYS", "*"),
        ("GET", "kuota:x"),
    ):
        with pytest.raises(NoPermissionError):
            await acl_client.execute_command(*command)
    # and what kuota does send is allowed: the ingest's seen hash, the status hash
    key = f"kuota:test-sec:{uuid.uuid4().hex[:8]}"
    async with acl_client.pipeline(transaction=False) as pipe:
        pipe.hset(key, mapping={"a": "1", "b": "2"})
        pipe.hdel(key, "a")
        await pipe.execute()
    assert await acl_client.hgetall(key) == {b"b": b"2"}
    assert await acl_client.delete(key) == 1
    assert await acl_client.ping()


async def test_credentials_in_the_url_work_too(acl_env: dict[str, str]) -> None:
    u = urlsplit(acl_env["KUOTA_REDIS_URL"])
    netloc = f"{acl_env['KUOTA_REDIS_USERNAME']}:{acl_env['KUOTA_REDIS_PASSWORD']}@{u.netloc}"
    client = redis_client(urlunsplit(u._replace(netloc=netloc)), env={})
    try:
        assert await client.hgetall("kuota:test-sec:none") == {}
        with pytest.raises(NoPermissionError):  # the ACL user's rules apply
            await client.hgetall("other:key")
    finally:
        await client.aclose()


async def test_a_wrong_password_is_refused_with_the_reason(acl_env: dict[str, str]) -> None:
    settings = RedisSettings.from_env(dict(acl_env, KUOTA_REDIS_PASSWORD="not-the-password"))
    client = settings.client(socket_timeout=5)
    t0 = time.monotonic()
    try:
        with pytest.raises(AuthenticationError, match="invalid username-password pair"):
            await client.ping()
    finally:
        await client.aclose()
    assert time.monotonic() - t0 < 5
    assert "not-the-password" not in settings.address  # messages carry no secret
    assert acl_env["KUOTA_REDIS_USERNAME"] in settings.address


async def test_the_stack_user_has_the_rules_the_docs_give(
    acl_env: dict[str, str], redis_url: str
) -> None:
    """docs/security.md's ACL SETUSER line is what the stack's Redis enforces."""
    docs = (Path(__file__).resolve().parents[2] / "docs" / "security.md").read_text()
    (line,) = [x for x in docs.splitlines() if x.startswith("ACL SETUSER kuota on >PASSWORD ")]
    rules = line.split(">PASSWORD ", 1)[1].split()
    want_commands = {r for r in rules if r[0] in "+-"}
    want_keys = {r for r in rules if r.startswith("~")}
    plain = aioredis.from_url(redis_url, decode_responses=True)
    try:  # the raw reply: field, value, field, value, ...
        raw = await plain.execute_command("ACL", "GETUSER", acl_env["KUOTA_REDIS_USERNAME"])
    finally:
        await plain.aclose()
    got = dict(zip(raw[::2], raw[1::2], strict=True))
    assert set(got["commands"].split()) == want_commands, (got["commands"], want_commands)
    assert set(got["keys"].split()) == want_keys
    assert "on" in got["flags"]


# --------------------------------------------------------------------------- TLS


@pytest.fixture(scope="module")
def tls_env(acl_env: dict[str, str]) -> dict[str, str]:
    """The stack's Redis TLS port (scripts/stack.d/redis.sh), as the ACL user."""
    url = os.environ.get("KUOTA_REDIS_TLS_URL", "").strip()
    ca = os.environ.get("KUOTA_REDIS_STACK_CA_FILE", "").strip()
    u = urlsplit(url)
    try:
        socket.create_connection((u.hostname or "", u.port or 0), timeout=3).close()
    except (OSError, ValueError) as err:
        pytest.fail(
            f"no Redis TLS port at KUOTA_REDIS_TLS_URL={url!r} ({err}): run `scripts/stack up` "
            "(it opens the TLS port on a running Redis too)",
            pytrace=False,
        )
    return acl_env | {"KUOTA_REDIS_URL": url, "KUOTA_REDIS_CA_FILE": ca}


@pytest.mark.parametrize("client_cert", [False, True])
async def test_snapshot_store_over_tls(tls_env: dict[str, str], client_cert: bool) -> None:
    env = dict(tls_env)
    if client_cert:  # mutual TLS: the server verifies a certificate when one is given
        env["KUOTA_REDIS_CERT_FILE"] = os.environ["KUOTA_REDIS_STACK_CLIENT_CERT_FILE"]
        env["KUOTA_REDIS_KEY_FILE"] = os.environ["KUOTA_REDIS_STACK_CLIENT_KEY_FILE"]
    settings = RedisSettings.from_env(env)
    assert settings.tls and settings.address.startswith("Redis at rediss://")
    client = settings.client()
    name = f"test-sec-tls-{uuid.uuid4().hex[:10]}"
    try:
        assert client.connection_pool.connection_class.__name__ == "SSLConnection"
        store = SnapshotStore(client, name=name, key=b"k")
        await store.save(Snapshot(offset=7, state={"tls": True}))
        assert await store.load() == (Snapshot(offset=7, state={"tls": True}), "ok")
        await store.delete()
    finally:
        await client.aclose()


async def test_tls_by_flag_with_a_redis_url(tls_env: dict[str, str]) -> None:
    url = tls_env["KUOTA_REDIS_URL"].replace("rediss://", "redis://", 1)
    client = RedisSettings.from_env(
        tls_env | {"KUOTA_REDIS_URL": url, "KUOTA_REDIS_TLS": "1"}
    ).client()
    try:
        assert await client.ping()
    finally:
        await client.aclose()


async def test_an_untrusted_redis_certificate_is_refused(tls_env: dict[str, str]) -> None:
    env = {k: v for k, v in tls_env.items() if k != "KUOTA_REDIS_CA_FILE"}  # system CAs
    client = RedisSettings.from_env(env).client(socket_timeout=5)
    try:
        with pytest.raises(RedisConnectionError, match="CERTIFICATE_VERIFY_FAILED"):
            await client.ping()
    finally:
        await client.aclose()


# --------------------------------------------------------------- one user per service (#23 item 10)


@dataclass
class ServiceUsers:
    prefix: str  # the pipeline's KUOTA_TOPIC_PREFIX
    env: dict[str, dict[str, str]]  # role -> KUOTA_REDIS_* as the service is given them

    def client(self, role: str) -> aioredis.Redis:
        return RedisSettings.from_env(self.env[role]).client()


@pytest.fixture
async def service_users(redis_url: str) -> AsyncIterator[ServiceUsers]:
    """kuota.store.acl's users for a topic prefix of this test's own, made on
    the stack's Redis under names of its own (ACL SETUSER as the default user)."""
    prefix = f"test-redis-{uuid.uuid4().hex[:8]}."
    plain = aioredis.from_url(redis_url)
    env: dict[str, dict[str, str]] = {}
    try:
        for role in acl.ROLES:
            name, password = f"{prefix.rstrip('.')}-{role}", uuid.uuid4().hex
            rules = acl.rules(role, prefix)
            assert await plain.execute_command(
                "ACL", "SETUSER", name, "reset", "on", f">{password}", *rules
            )
            env[role] = {
                "KUOTA_REDIS_URL": redis_url,
                "KUOTA_REDIS_USERNAME": name,
                "KUOTA_REDIS_PASSWORD": password,
            }
        yield ServiceUsers(prefix, env)
    finally:
        for role_env in env.values():
            await plain.execute_command("ACL", "DELUSER", role_env["KUOTA_REDIS_USERNAME"])
        inst = acl.instance(prefix)
        await plain.delete(
            acl.seen_hash(prefix),
            f"kuota:snapshot:{inst}-admission-0",
            f"{inst}:status:clusterqueues",
        )
        await plain.aclose()


def test_the_documented_acl_lines_are_the_table() -> None:
    """docs/security.md gives exactly kuota.store.acl's lines (no drift)."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "security.md").read_text()
    for role in acl.ROLES:
        assert acl.setuser_line(role) in doc, role


async def test_each_service_does_its_job_as_its_own_user(service_users: ServiceUsers) -> None:
    from kuota.kube.translate import Seen
    from kuota_ingest import seen_store

    prefix, inst = service_users.prefix, acl.instance(service_users.prefix)
    c = {role: service_users.client(role) for role in acl.ROLES}
    try:
        for client in c.values():
            assert await client.ping()
        # ingest: its seen hash, written as its journal writer does, read back at start-up
        seen = acl.seen_hash(prefix)
        job = Seen(rv="7", digest="d", uid="u", finished=False, ready=True)
        async with c["ingest"].pipeline(transaction=False) as pipe:
            pipe.hset(seen, mapping={"Job/ns/a": seen_store.dumps(seen, "Job/ns/a", job)})
            pipe.hset(seen, mapping={"Job/ns/b": seen_store.dumps(seen, "Job/ns/b", job)})
            pipe.hdel(seen, "Job/ns/b")
            await pipe.execute()
        assert await seen_store.load(c["ingest"], seen) == {"Job/ns/a": job}
        # admission: its snapshots (HSET, HGETALL, DEL)
        store = SnapshotStore(c["admission"], name=f"{inst}-admission-0", key=b"k", build="b")
        await store.save(Snapshot(offset=3, state={"fold": 1}))
        assert (await store.load())[1] == "ok"
        # the actuator: the ClusterQueue status hash (HSET, HDEL)
        status = f"{inst}:status:clusterqueues"
        await c["actuator"].hset(status, mapping={"cq-a": "{}", "cq-b": "{}"})
        await c["actuator"].hdel(status, "cq-b")
        # the CLI: kuota status reads the status hash, kuota audit replay --snapshot the snapshot
        assert await c["cli"].hgetall(status) == {b"cq-a": b"{}"}
        cli_store = SnapshotStore(c["cli"], name=f"{inst}-admission-0", key=b"k", build="b")
        snap, why = await cli_store.load()
        assert why == "ok" and snap == Snapshot(offset=3, state={"fold": 1})
        await store.delete()
    finally:
        for client in c.values():
            await client.aclose()


async def test_each_service_is_refused_the_others_keys(service_users: ServiceUsers) -> None:
    prefix, inst = service_users.prefix, acl.instance(service_users.prefix)
    keys = {
        "ingest": acl.seen_hash(prefix),
        "admission": f"kuota:snapshot:{inst}-admission-0",
        "actuator": f"{inst}:status:clusterqueues",
    }
    other_instance = {
        "ingest": "kuota:ingest:seen",  # the default instance's
        "admission": "kuota:snapshot:kuota-admission-0",
        "actuator": "kuota:status:clusterqueues",
    }
    c = {role: service_users.client(role) for role in acl.ROLES}
    allowed = []

    async def refused(what: str, command: tuple[str, ...], client: aioredis.Redis) -> None:
        try:
            await client.execute_command(*command)
        except NoPermissionError:
            return
        allowed.append(what)

    try:
        for role in ("ingest", "admission", "actuator"):
            for other, key in keys.items():
                if other != role:
                    await refused(f"{role} HSET {other}'s", ("HSET", key, "f", "v"), c[role])
                    await refused(f"{role} HGETALL {other}'s", ("HGETALL", key), c[role])
            await refused(
                f"{role} another instance's", ("HSET", other_instance[role], "f", "v"), c[role]
            )
            for command in (
                ("FLUSHALL",),
                ("KEYS", "*"),
                ("CONFIG", "GET", "*"),
                ("GET", keys[role]),
            ):
                await refused(f"{role} {command[0]}", command, c[role])
        # each only the commands it sends, on its own keys
        await refused("ingest DEL", ("DEL", keys["ingest"]), c["ingest"])
        await refused("admission HDEL", ("HDEL", keys["admission"], "payload"), c["admission"])
        await refused("actuator HGETALL", ("HGETALL", keys["actuator"]), c["actuator"])
        await refused("actuator DEL", ("DEL", keys["actuator"]), c["actuator"])
        # the CLI reads only
        for key in (keys["admission"], keys["actuator"]):
            await refused(f"cli HSET {key}", ("HSET", key, "f", "v"), c["cli"])
            await refused(f"cli DEL {key}", ("DEL", key), c["cli"])
        await refused("cli HGETALL the seen hash", ("HGETALL", keys["ingest"]), c["cli"])
        assert allowed == [], allowed
    finally:
        for client in c.values():
            await client.aclose()


async def test_the_dev_redis_acl_file_makes_the_same_users(tmp_path: Path) -> None:
    """The dev Redis (deploy/kafka/dev/redis.yaml) loads ``aclfile``'s users:
    a redis-server of this test's own with that file, its default user off."""
    import shutil
    import subprocess

    passwords = {role: uuid.uuid4().hex for role in acl.SERVICES}
    (tmp_path / "users.acl").write_text(acl.aclfile(passwords))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [shutil.which("redis-server") or "redis-server", "--port", str(port), "--bind",
         "127.0.0.1", "--save", "", "--appendonly", "no", "--aclfile",
         str(tmp_path / "users.acl")],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"redis://127.0.0.1:{port}/0"
    try:
        anonymous = aioredis.from_url(url)
        deadline = time.monotonic() + 10
        while True:
            try:
                await anonymous.ping()
                raise AssertionError("the default user answers")
            except AuthenticationError:
                break  # the default user is off
            except RedisConnectionError:
                assert time.monotonic() < deadline, "redis-server did not start"
                time.sleep(0.1)
        await anonymous.aclose()
        for role in acl.SERVICES:
            env = {"KUOTA_REDIS_USERNAME": f"kuota-{role}", "KUOTA_REDIS_PASSWORD": passwords[role]}
            client = redis_client(url, env=env)
            try:
                assert await client.ping()
                own = {k.split("~", 1)[1].replace("*", "0") for k in acl.keys(role)}
                for other in acl.SERVICES:
                    pattern = acl.keys(other)[0]
                    key = pattern.split("~", 1)[1].replace("*", "0")
                    if other == role and pattern.startswith("%R~"):  # the dashboard reads
                        assert await client.hgetall(key) is not None
                        with pytest.raises(NoPermissionError):
                            await client.hset(key, "f", "v")
                    elif other == role:
                        await client.hset(key, "f", "v")
                    elif key not in own:  # (the dashboard reads the actuator's own hash)
                        with pytest.raises(NoPermissionError):
                            await client.hset(key, "f", "v")
            finally:
                await client.aclose()
    finally:
        server.terminate()
        server.wait(10)
