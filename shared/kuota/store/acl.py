"""The Redis ACL users of kuota: one per service and one for the CLI (#23 item 10).

Theory of operation: one table of who may touch which key with which command.
Each service logs in as ``kuota-<role>`` (``deploy/components/redis-users``)
and may reach only its own keys: ingest its seen hash,
admission its snapshots, the actuator the ClusterQueue status hash; the CLI
reads (``%R~``) the status hash and the snapshots, the dashboard
(``kuota dashboard``) the status hash only. ``rules`` gives the
``ACL SETUSER`` arguments for a topic prefix (the default ``kuota.`` gives
docs/security.md's lines); tests/integration/test_security_redis.py creates
exactly these users on the local Redis and shows each can do its job and is
refused every other key and command. Every user may also ``PING`` and
``SELECT`` (a URL naming a database). ``python -m kuota.store.acl --secret``
prints the command that makes the Secret kuota-redis-users (random passwords
and the dev Redis's ACL file).
"""

from __future__ import annotations

import os
import secrets
import shlex
import sys

ROLES = ("ingest", "admission", "actuator", "cli", "dashboard")
COMMON = ("resetkeys", "resetchannels", "-@all", "+ping", "+select")
SEEN_HASH = "kuota:ingest:seen"


def instance(topic_prefix: str) -> str:
    """``kuota.`` -> ``kuota``, as kuota.service names groups and keys."""
    return topic_prefix.rstrip(".").replace(".", "-") or "kuota"


def seen_hash(topic_prefix: str) -> str:
    """Ingest's seen hash for the default KUOTA_INGEST_SEEN_KEY."""
    journal = f"{topic_prefix}journal"
    return SEEN_HASH if journal == "kuota.journal" else f"{SEEN_HASH}:{journal}"


def keys(role: str, topic_prefix: str = "kuota.") -> tuple[str, ...]:
    """The key patterns of ``role`` (``%R~``: read only)."""
    inst = instance(topic_prefix)
    snapshots = f"kuota:snapshot:{inst}-admission-*"
    status = f"{inst}:status:clusterqueues"
    table = {
        "ingest": (f"~{seen_hash(topic_prefix)}",),
        "admission": (f"~{snapshots}",),
        "actuator": (f"~{status}",),
        "cli": (f"%R~{status}", f"%R~{snapshots}"),
        "dashboard": (f"%R~{status}",),
    }
    return table[role]


def commands(role: str) -> tuple[str, ...]:
    """The commands ``role`` sends, beyond PING and SELECT."""
    table = {
        "ingest": ("+hset", "+hgetall", "+hdel"),
        "admission": ("+hset", "+hgetall", "+del"),
        "actuator": ("+hset", "+hdel"),
        "cli": ("+hgetall",),
        "dashboard": ("+hgetall",),
    }
    return table[role]


def rules(role: str, topic_prefix: str = "kuota.") -> list[str]:
    """The ``ACL SETUSER kuota-<role> on >PASSWORD ...`` rules of ``role``."""
    if role not in ROLES:
        raise ValueError(f"no Redis ACL role {role!r} (one of {', '.join(ROLES)})")
    return [*COMMON, *keys(role, topic_prefix), *commands(role)]


def setuser_line(role: str, topic_prefix: str = "kuota.") -> str:
    """The ``ACL SETUSER`` command for ``role``, with a password placeholder."""
    return f"ACL SETUSER kuota-{role} on >PASSWORD {' '.join(rules(role, topic_prefix))}"


SERVICES = ("ingest", "admission", "actuator", "dashboard")  # the roles with a Deployment


def aclfile(passwords: dict[str, str], topic_prefix: str = "kuota.") -> str:
    """A Redis ACL file (``--aclfile``) with the services' users and the
    default user off (the dev Redis, deploy/kafka/dev/redis.yaml)."""
    lines = ["user default off resetkeys -@all"]
    for role in SERVICES:
        line = " ".join(rules(role, topic_prefix))
        lines.append(f"user kuota-{role} on >{passwords[role]} {line}")
    return "\n".join(lines) + "\n"


def secret_command(topic_prefix: str = "kuota.", namespace: str = "kuota-system") -> str:
    """The ``kubectl create secret`` of kuota-redis-users, random passwords."""
    passwords = {role: secrets.token_hex(24) for role in SERVICES}
    parts = [f"kubectl -n {namespace} create secret generic kuota-redis-users"]
    parts += [f"--from-literal={role}-password={passwords[role]}" for role in SERVICES]
    parts.append(f"--from-literal=users.acl={shlex.quote(aclfile(passwords, topic_prefix))}")
    return " \\\n    ".join(parts)


def main(argv: list[str]) -> int:
    """``python -m kuota.store.acl``: the ACL SETUSER lines for KUOTA_TOPIC_PREFIX;
    ``--secret``: the command that makes kuota-redis-users."""
    prefix = os.environ.get("KUOTA_TOPIC_PREFIX", "kuota.")
    if argv == ["--secret"]:
        print(secret_command(prefix))
        return 0
    if argv:
        print("usage: python -m kuota.store.acl [--secret]", file=sys.stderr)
        return 2
    for role in ROLES:
        print(setuser_line(role, prefix))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
