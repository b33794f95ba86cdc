"""Redis connection settings, read from the environment (ACL rules: docs/security.md).

==============================  ==============================================
``KUOTA_REDIS_URL``             ``redis://[user:password@]host:port/db``, or
                                ``rediss://...`` for TLS (required where Redis
                                is used)
``KUOTA_REDIS_USERNAME``        ACL user; overrides the URL's (keep secrets
``KUOTA_REDIS_PASSWORD``        out of the URL: these can come from a Secret)
``KUOTA_REDIS_TLS``             true: TLS even with a ``redis://`` URL
``KUOTA_REDIS_CA_FILE``         CA bundle (PEM) to verify the server; unset:
                                the system's CAs
``KUOTA_REDIS_CERT_FILE``       client certificate and key (PEM) when the
``KUOTA_REDIS_KEY_FILE``        server wants them (``tls-auth-clients``)
==============================  ==============================================
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import redis.asyncio as aioredis

from kuota.bus.settings import SettingsError, env_flag


def _file(e: Mapping[str, str], name: str) -> str | None:
    path = e.get(name, "").strip() or None
    if path is not None and not Path(path).is_file():
        raise SettingsError(f"{name}={path}: no such file")
    return path


@dataclass(frozen=True, slots=True)
class RedisSettings:
    url: str
    username: str | None = None
    password: str | None = None
    tls: bool = False
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | None = None, *, url: str | None = None
    ) -> RedisSettings:
        """The settings in ``env`` (default: the process environment); ``url``
        replaces ``KUOTA_REDIS_URL``."""
        e = os.environ if env is None else env
        raw = (url if url is not None else e.get("KUOTA_REDIS_URL", "")).strip()
        if not raw:
            raise SettingsError(
                "KUOTA_REDIS_URL is not set (for the local stack: `. .stack/stack.env`)"
            )
        scheme = urlsplit(raw).scheme
        if scheme not in ("redis", "rediss", "unix"):
            raise SettingsError(
                f"KUOTA_REDIS_URL={raw!r}: want redis://, rediss:// (TLS) or unix://"
            )
        tls = env_flag(e, "KUOTA_REDIS_TLS", False) or scheme == "rediss"
        ca_file = _file(e, "KUOTA_REDIS_CA_FILE")
        cert_file = _file(e, "KUOTA_REDIS_CERT_FILE")
        key_file = _file(e, "KUOTA_REDIS_KEY_FILE")
        if (ca_file or cert_file) and not tls:
            raise SettingsError(
                "KUOTA_REDIS_CA_FILE / KUOTA_REDIS_CERT_FILE are set but TLS is off: "
                "use a rediss:// URL or KUOTA_REDIS_TLS=true"
            )
        if key_file is not None and cert_file is None:
            raise SettingsError("KUOTA_REDIS_KEY_FILE is set without KUOTA_REDIS_CERT_FILE")
        if tls and scheme == "unix":
            raise SettingsError("KUOTA_REDIS_TLS with a unix:// URL: TLS needs a TCP address")
        return cls(
            url=raw,
            username=e.get("KUOTA_REDIS_USERNAME") or None,
            password=e.get("KUOTA_REDIS_PASSWORD") or None,
            tls=tls,
            ca_file=ca_file,
            cert_file=cert_file,
            key_file=key_file,
        )

    @property
    def address(self) -> str:
        """The URL without credentials, for messages."""
        parts = urlsplit(self.url)
        host = parts.hostname or ""
        where = f"{host}:{parts.port}" if parts.port else host or parts.path
        user = self.username or parts.username
        who = f" as {user!r}" if user else ""
        return f"Redis at {'rediss' if self.tls else parts.scheme}://{where}{who}"

    def client_kwargs(self) -> dict[str, Any]:
        kw: dict[str, Any] = {}
        if self.username is not None:
            kw["username"] = self.username
        if self.password is not None:
            kw["password"] = self.password
        if self.tls:
            kw["ssl_cert_reqs"] = "required"
            if self.ca_file:
                kw["ssl_ca_certs"] = self.ca_file
            if self.cert_file:
                kw["ssl_certfile"] = self.cert_file
                kw["ssl_keyfile"] = self.key_file or self.cert_file
        return kw

    def client(self, **kw: Any) -> aioredis.Redis:
        """An asyncio Redis client (lazy: connects on the first command)."""
        url = self.url
        if self.tls and url.startswith("redis://"):
            url = "rediss://" + url[len("redis://") :]
        client: aioredis.Redis = aioredis.Redis.from_url(url, **self.client_kwargs(), **kw)
        return client


def redis_client(url: str, env: Mapping[str, str] | None = None, **kw: Any) -> aioredis.Redis:
    """A client for ``url`` with the ACL user and TLS settings of ``env``
    (default: the process environment)."""
    return RedisSettings.from_env(env, url=url).client(**kw)
