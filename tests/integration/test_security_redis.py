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
  refused.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis.asyncio as aioredis
from redis.exceptions import AuthenticationError, NoPermissionError
from redis.exceptions import ConnectionError as RedisConnectionError

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
