"""``kuota dashboard``'s refusals: one line and exit 2, before anything is bound."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from kuota.cli import app


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUOTA_REDIS_URL", "redis://127.0.0.1:1")
    monkeypatch.setenv("KUOTA_KAFKA_BOOTSTRAP", "127.0.0.1:1")
    monkeypatch.delenv("KUOTA_DASHBOARD_TOKEN", raising=False)


def _run(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(app, ["dashboard", *args])
    return r.exit_code, r.stderr


def test_without_redis_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUOTA_REDIS_URL")
    code, err = _run()
    assert code == 2 and "KUOTA_REDIS_URL is not set" in err


def test_a_public_bind_needs_a_token_tls_or_insecure() -> None:
    code, err = _run("--host", "0.0.0.0")
    assert code == 2
    assert err == (
        "kuota: error: --host 0.0.0.0: a bind beyond loopback needs --token-file "
        "(and --tls-cert) or --insecure behind an auth proxy\n"
    )


def test_tls_needs_both_files(tmp_path: Path) -> None:
    code, err = _run("--tls-cert", str(tmp_path / "c.pem"))
    assert code == 2 and "--tls-cert and --tls-key go together" in err


def test_an_unreadable_certificate(tmp_path: Path) -> None:
    (tmp_path / "c.pem").write_text("not a certificate")
    code, err = _run("--tls-cert", str(tmp_path / "c.pem"), "--tls-key", str(tmp_path / "c.pem"))
    assert code == 2 and err.startswith("kuota: error: --tls-cert/--tls-key: ")


def test_an_empty_token_file(tmp_path: Path) -> None:
    (tmp_path / "t").write_text("\n")
    code, err = _run("--token-file", str(tmp_path / "t"))
    assert code == 2 and "the first line is empty" in err


def test_a_bad_preemption_mode() -> None:
    code, err = _run("--preemption", "sometimes")
    assert code == 2 and "--preemption" in err
