#!/usr/bin/env python3
"""Create or update a SCRAM-SHA-512 user on the local-stack broker (stdlib only).

Sends one AlterUserScramCredentials v0 request (KIP-554) over the PLAINTEXT
listener, so it works on a broker whose KRaft log was formatted before the
stack had SASL users (``kafka-storage format --add-scram`` only works at the
first format). Idempotent: an upsert replaces the user's salt and password.
``delete`` removes a user's credential (tests clean up the users they made).

    kafka_scram.py 127.0.0.1:19092 USER PASSWORD_FILE
"""

from __future__ import annotations

import hashlib
import os
import socket
import struct
import sys

ALTER_USER_SCRAM_CREDENTIALS = 51
SCRAM_SHA_512 = 2
ITERATIONS = 8192


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _read_uvarint(buf: bytes, off: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        b = buf[off]
        off += 1
        n |= (b & 0x7F) << shift
        if not b & 0x80:
            return n, off
        shift += 7


def _compact(data: bytes) -> bytes:
    return _uvarint(len(data) + 1) + data


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        buf += chunk
    return bytes(buf)


def upsert(host: str, port: int, user: str, password: str, timeout: float = 15.0) -> None:
    """Raise RuntimeError with the broker's message if it refuses."""
    salt = os.urandom(32)
    salted = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, ITERATIONS)
    upsertion = _compact(user.encode()) + struct.pack(">bi", SCRAM_SHA_512, ITERATIONS)
    upsertion += _compact(salt) + _compact(salted) + _uvarint(0)
    _alter(host, port, deletions=[], upsertions=[upsertion], timeout=timeout)


def delete(host: str, port: int, user: str, timeout: float = 15.0) -> None:
    """Remove the user's SCRAM-SHA-512 credential (tests clean up their users)."""
    deletion = _compact(user.encode()) + struct.pack(">b", SCRAM_SHA_512) + _uvarint(0)
    _alter(host, port, deletions=[deletion], upsertions=[], timeout=timeout)


def _alter(
    host: str, port: int, *, deletions: list[bytes], upsertions: list[bytes], timeout: float
) -> None:
    client_id = b"kuota-stack-scram"
    corr = 11
    # request header v2: api_key, api_version, correlation_id, client_id, tagged fields
    header = struct.pack(">hhih", ALTER_USER_SCRAM_CREDENTIALS, 0, corr, len(client_id))
    header += client_id + _uvarint(0)
    body = _uvarint(len(deletions) + 1) + b"".join(deletions)
    body += _uvarint(len(upsertions) + 1) + b"".join(upsertions)
    body += _uvarint(0)
    request = header + body
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(struct.pack(">i", len(request)) + request)
        (size,) = struct.unpack(">i", _recv_exact(sock, 4))
        payload = _recv_exact(sock, size)
    (got,) = struct.unpack_from(">i", payload, 0)
    if got != corr:
        raise RuntimeError(f"correlation id mismatch: {got}")
    _, off = _read_uvarint(payload, 4)  # response header tagged fields
    off += 4  # throttle_time_ms
    count, off = _read_uvarint(payload, off)
    for _ in range(count - 1):
        n, off = _read_uvarint(payload, off)
        name = payload[off : off + n - 1].decode()
        off += n - 1
        (error,) = struct.unpack_from(">h", payload, off)
        off += 2
        n, off = _read_uvarint(payload, off)
        message = payload[off : off + n - 1].decode() if n else ""
        off += max(n - 1, 0)
        _, off = _read_uvarint(payload, off)  # tagged fields
        if error != 0:
            raise RuntimeError(f"user {name}: error {error}: {message}")


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    host, _, port = argv[0].rpartition(":")
    with open(argv[2]) as f:
        password = f.read().strip()
    try:
        upsert(host or "127.0.0.1", int(port), argv[1], password)
    except (OSError, RuntimeError, struct.error, IndexError) as e:
        print(f"kafka_scram: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
