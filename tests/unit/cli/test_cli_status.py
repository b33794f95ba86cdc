"""``kuota status`` without its read model: one line and exit 2, never a traceback."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from kuota.cli import app


@pytest.mark.parametrize("args", [["status"], ["status", "--json"]])
def test_without_redis_url_exits_2_with_a_hint(
    args: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUOTA_REDIS_URL", raising=False)
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 2
    assert r.stdout == ""
    assert r.stderr == (
        "kuota: error: KUOTA_REDIS_URL is not set (for the local stack: `scripts/stack up` "
        "then `. .stack/stack.env`)\n"
    )
