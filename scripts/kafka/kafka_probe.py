#!/usr/bin/env python3
"""Readiness probe for the local-stack Kafka broker (stdlib only).

Sends a Kafka ApiVersions v0 request to HOST:PORT and exits 0 if the broker
answers with error_code 0. A KRaft broker enables its client listener only
after it has caught up with the metadata log and been unfenced, so an answer
on the PLAINTEXT listener means "ready for clients".

With --coordinators it also asks FindCoordinator for a consumer group and for
a transactional id, and exits 0 only when both have a coordinator. A new
broker creates `__consumer_offsets` and `__transaction_state` on the first
such request and answers COORDINATOR_NOT_AVAILABLE (15) until they are led;
a service that meets that window first gets it logged at ERROR by aiokafka
(CI saw it in test_e2e_backstop). The stack is up only after this passes.

    kafka_probe.py 127.0.0.1:19092                  # exit status only
    kafka_probe.py -v 127.0.0.1:19092               # also print "api_key min max" lines
    kafka_probe.py --coordinators 127.0.0.1:19092   # group + transaction coordinators too
"""

from __future__ import annotations

import socket
import struct
import sys

API_VERSIONS = 18
FIND_COORDINATOR = 10


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        buf += chunk
    return bytes(buf)


def _request(
    host: str, port: int, api_key: int, version: int, body: bytes, timeout: float
) -> bytes:
    """One request (header v1) and its response payload, correlation id checked and cut."""
    client_id = b"kuota-stack-probe"
    correlation_id = 7
    # request header v1: api_key, api_version, correlation_id, client_id (int16-length string)
    head = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(struct.pack(">i", len(head) + len(body)) + head + body)
        (size,) = struct.unpack(">i", _recv_exact(sock, 4))
        payload = _recv_exact(sock, size)
    (corr,) = struct.unpack_from(">i", payload, 0)
    if corr != correlation_id:
        raise ValueError(f"correlation id mismatch: {corr}")
    return payload[4:]


def api_versions(host: str, port: int, timeout: float = 3.0) -> dict[int, tuple[int, int]]:
    """Return {api_key: (min_version, max_version)} as advertised by the broker."""
    payload = _request(host, port, API_VERSIONS, 0, b"", timeout)
    error_code, count = struct.unpack_from(">hi", payload, 0)
    if error_code != 0:
        raise ValueError(f"ApiVersions error_code {error_code}")
    out: dict[int, tuple[int, int]] = {}
    off = 6
    for _ in range(count):
        key, lo, hi = struct.unpack_from(">hhh", payload, off)
        off += 6
        out[key] = (lo, hi)
    return out


def coordinator_error(host: str, port: int, key_type: int, timeout: float = 3.0) -> int:
    """FindCoordinator v1 (non-flexible; v0 is gone in Kafka 4) for a probe key:
    key_type 0 is a consumer group, 1 a transactional id. Returns the error code."""
    key = b"kuota-stack-probe"
    body = struct.pack(">h", len(key)) + key + struct.pack(">b", key_type)
    payload = _request(host, port, FIND_COORDINATOR, 1, body, timeout)
    # v1 response: throttle_time_ms int32, error_code int16, ...
    _throttle, error_code = struct.unpack_from(">ih", payload, 0)
    return int(error_code)


def main(argv: list[str]) -> int:
    verbose = "-v" in argv
    coordinators = "--coordinators" in argv
    args = [a for a in argv if a not in ("-v", "--coordinators")]
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    host, _, port = args[0].rpartition(":")
    try:
        versions = api_versions(host or "127.0.0.1", int(port))
        if coordinators:
            for key_type, what in ((0, "group"), (1, "transaction")):
                err = coordinator_error(host or "127.0.0.1", int(port), key_type)
                if err != 0:
                    raise ValueError(f"no {what} coordinator yet (error_code {err})")
    except (OSError, ValueError, struct.error) as e:
        if verbose:
            print(f"not ready: {e}", file=sys.stderr)
        return 1
    if verbose:
        for key in sorted(versions):
            lo, hi = versions[key]
            print(key, lo, hi)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
