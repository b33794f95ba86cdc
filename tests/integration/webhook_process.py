"""kuota-webhook as a process for the integration tests, and its registration.

``WebhookProcess`` starts ``.venv/bin/kuota-webhook`` with an environment of
its own (``webhook_environment``: free ports, the test's certificates, no
Kafka and no Redis at all) and waits for its ``ready`` line (its view is
complete); ``registered`` applies ``scripts/webhook-register`` for it, narrowed
to a test's label, and deletes it at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
WEBHOOK = REPO / ".venv" / "bin" / "kuota-webhook"
REGISTER = REPO / "scripts" / "webhook-register"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def webhook_environment(kubeconfig: str, certs: dict[str, str], **extra: str) -> dict[str, str]:
    """kuota-webhook's environment: free ports, the certificate; no ``KUOTA_*`` of
    the caller's and no Kafka or Redis address; ``extra`` on top."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUOTA_")}
    env.update(
        KUBECONFIG=kubeconfig,
        KUOTA_METRICS_PORT=str(free_port()),
        KUOTA_METRICS_HOST="127.0.0.1",
        KUOTA_WEBHOOK_PORT=str(free_port()),
        KUOTA_WEBHOOK_HOST="127.0.0.1",
        KUOTA_WEBHOOK_CERT_FILE=certs["KUOTA_WEBHOOK_CERT_FILE"],
        KUOTA_WEBHOOK_KEY_FILE=certs["KUOTA_WEBHOOK_KEY_FILE"],
        KUOTA_LOG_LEVEL="INFO",
    )
    env.update(extra)
    return env


class WebhookProcess:
    """One kuota-webhook subprocess with its log file."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.env = env
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.env['KUOTA_WEBHOOK_PORT']}/mutate-batch-v1-job"

    async def start(self) -> WebhookProcess:
        assert WEBHOOK.exists(), f"{WEBHOOK} missing: run .venv/bin/pip install -e '.[dev]'"
        offset = self.log.stat().st_size if self.log.exists() else 0
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [str(WEBHOOK)], env=self.env, stdout=out, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + 30
        while True:
            text = self.log.read_bytes()[offset:].decode(errors="replace")
            if " ready in " in text:
                return self
            if self.proc.poll() is not None:
                pytest.fail(f"kuota-webhook exited with {self.proc.returncode}:\n{text}")
            assert time.monotonic() < deadline, f"kuota-webhook not ready within 30s:\n{text}"
            await asyncio.sleep(0.05)

    def stop(self) -> int:
        """SIGTERM, then SIGKILL after 15s; returns the exit code."""
        proc, self.proc = self.proc, None
        if proc is None:
            return 0
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                return proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
                return -9
        return proc.returncode

    def metrics(self) -> dict[str, float]:
        url = f"http://127.0.0.1:{self.env['KUOTA_METRICS_PORT']}/metrics"
        with urllib.request.urlopen(url, timeout=5) as resp:
            text = resp.read().decode()
        out: dict[str, float] = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                out[name] = float(value)
        return out

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


@contextlib.contextmanager
def registered(name: str, url: str, ca: str, label: str, *extra: str) -> Iterator[None]:
    """``scripts/webhook-register`` for Jobs labelled ``label`` (K=V), removed at the end."""
    argv = [str(REGISTER), "--name", name, "--url", url, "--ca", ca, "--match-label", label]
    subprocess.run([*argv, *extra], check=True, capture_output=True, env={**os.environ})
    try:
        yield
    finally:
        subprocess.run([str(REGISTER), "--delete", "--name", name], check=True, capture_output=True)
