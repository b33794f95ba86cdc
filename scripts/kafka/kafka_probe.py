#!/usr/bin/env python3
"""Readiness probe for the local-stack Kafka broker (stdlib only).

Sends a Kafka ApiVersions v0 request to HOST:PORT and exits 0 if the broker
answers with error_code 0. A KRaft broker enables its client listener only
after it has caught up with the metadata log and been unfenced, so an answer
on the PLAINTEXT listener means "ready for clients".

    kafka_probe.py 127.0.0.1:19092          # exit status only
    kafka_probe.py -v 127.0.0.1:19092       # also print "api_key min max" lines
"""

from __future__ import annotations

import socket
import struct
import sys

API_VERSIONS = 18


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        buf += chunk
    return bytes(buf)


def api_versions(host: str, port: int, timeout: float = 3.0) -> dict[int, tuple[int, int]]:
    """Return {api_key: (min_version, max_version)} as advertised by the broker."""
    client_id = b"kuota-stack-probe"
    correlation_id = 7
    # request header v1: api_key, api_version, correlation_id, client_id (int16-length string)
    body = struct.pack(">hhih", API_VERSIONS, 0, correlation_id, len(client_id)) + client_id
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(struct.pack(">i", len(body)) + body)
        (size,) = struct.unpack(">i", _recv_exact(sock, 4))
        payload = _recv_exact(sock, size)
    corr, error_code, count = struct.unpack_from(">ihi", payload, 0)
    if corr != correlation_id:
        raise ValueError(f"correlation id mismatch: {corr}")
    if error_code != 0:
        raise ValueError(f"ApiVersions error_code {error_code}")
    out: dict[int, tuple[int, int]] = {}
    off = 10
    for _ in range(count):
        key, lo, hi = struct.unpack_from(">hhh", payload, off)
        off += 6
        out[key] = (lo, hi)
    return out


def main(argv: list[str]) -> int:
    verbose = "-v" in argv
    args = [a for a in argv if a != "-v"]
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    host, _, port = args[0].rpartition(":")
    try:
        versions = api_versions(host or "127.0.0.1", int(port))
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
