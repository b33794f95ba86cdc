"""The serving certificate's reload (``kuota_webhook.tls``), over real TLS on
127.0.0.1: certificates from ``scripts/webhook-certs`` (a CA, then a second
serving pair from the same CA), a server on the live context, a client that
trusts only the CA. After the files change, a new handshake gets the new
certificate and an open connection keeps going; a pair that does not match
is refused and the one loaded keeps serving."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from kuota_webhook import metrics
from kuota_webhook.tls import ServingCertificate

REPO = Path(__file__).resolve().parents[3]


def certs(folder: Path, ca_from: Path | None = None) -> Path:
    folder.mkdir(parents=True)
    if ca_from is not None:  # the same CA: webhook-certs keeps it, makes a new serving pair
        for name in ("ca.crt", "ca.key"):
            shutil.copy(ca_from / name, folder / name)
    subprocess.run(
        [str(REPO / "scripts/webhook-certs"), str(folder)], check=True, capture_output=True
    )
    return folder


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.readline():
        writer.write(data)
        await writer.drain()
    writer.close()


@pytest_asyncio.fixture
async def pairs(tmp_path: Path) -> AsyncIterator[tuple[Path, Path, Path]]:
    a = certs(tmp_path / "a")
    b = certs(tmp_path / "b", ca_from=a)
    live = tmp_path / "live"
    live.mkdir()
    for name in ("tls.crt", "tls.key"):
        shutil.copy(a / name, live / name)
    yield a, b, live


async def _connect(port: int, ca: Path) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    client = ssl.create_default_context(cafile=str(ca))
    return await asyncio.open_connection("127.0.0.1", port, ssl=client)


def _peer(writer: asyncio.StreamWriter) -> bytes:
    obj = writer.get_extra_info("ssl_object")
    der: bytes = obj.getpeercert(binary_form=True)
    return der


def _der(path: Path) -> bytes:
    return ssl.PEM_cert_to_DER_cert(path.read_text())


async def test_a_changed_pair_is_served_to_new_handshakes(
    pairs: tuple[Path, Path, Path],
) -> None:
    a, b, live = pairs
    cert = ServingCertificate(str(live / "tls.crt"), str(live / "tls.key"))
    server = await asyncio.start_server(_echo, "127.0.0.1", 0, ssl=cert.context)
    port = server.sockets[0].getsockname()[1]
    try:
        r1, w1 = await _connect(port, a / "ca.crt")
        assert _peer(w1) == _der(a / "tls.crt")
        assert not cert.reload_if_changed(), "nothing changed"

        loaded = metrics.RELOADS.labels("loaded")._value.get()
        for name in ("tls.crt", "tls.key"):  # a Secret volume's update: new files
            shutil.copy(b / name, live / f".{name}.new")
            (live / f".{name}.new").replace(live / name)
        assert cert.reload_if_changed()
        assert cert.loaded == 2
        assert metrics.RELOADS.labels("loaded")._value.get() == loaded + 1

        r2, w2 = await _connect(port, a / "ca.crt")  # the same CA trusts both
        assert _peer(w2) == _der(b / "tls.crt") != _der(a / "tls.crt")
        for r, w in ((r1, w1), (r2, w2)):  # the old connection goes on with its own
            w.write(b"ping\n")
            await w.drain()
            assert await r.readline() == b"ping\n"
            w.close()
    finally:
        server.close()
        await server.wait_closed()


async def test_a_pair_that_does_not_match_is_refused_and_the_old_one_serves(
    pairs: tuple[Path, Path, Path],
) -> None:
    a, b, live = pairs
    cert = ServingCertificate(str(live / "tls.crt"), str(live / "tls.key"))
    server = await asyncio.start_server(_echo, "127.0.0.1", 0, ssl=cert.context)
    port = server.sockets[0].getsockname()[1]
    try:
        failed = metrics.RELOADS.labels("failed")._value.get()
        shutil.copy(b / "tls.crt", live / "tls.crt")  # half a rotation: B's cert, A's key
        assert not cert.reload_if_changed()
        assert metrics.RELOADS.labels("failed")._value.get() == failed + 1
        assert not cert.reload_if_changed(), "the same bad pair is not tried again"
        _, w = await _connect(port, a / "ca.crt")
        assert _peer(w) == _der(a / "tls.crt"), "the pair loaded before keeps serving"
        w.close()
        shutil.copy(b / "tls.key", live / "tls.key")  # the rotation completes
        assert cert.reload_if_changed()
        _, w = await _connect(port, a / "ca.crt")
        assert _peer(w) == _der(b / "tls.crt")
        w.close()
    finally:
        server.close()
        await server.wait_closed()


def test_an_unusable_pair_at_start_is_an_error(pairs: tuple[Path, Path, Path]) -> None:
    a, b, _ = pairs
    with pytest.raises(ssl.SSLError):
        ServingCertificate(str(b / "tls.crt"), str(a / "tls.key"))
    with pytest.raises(OSError):
        ServingCertificate(str(a / "missing.crt"), str(a / "tls.key"))
