"""Ingest's settings' defaults and startup errors (``kuota_ingest.settings``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kuota.bus.settings import SettingsError
from kuota_ingest.settings import IngestSettings

# --------------------------------------------------------------------------- settings

BASE = {
    "KUOTA_KAFKA_BOOTSTRAP": "127.0.0.1:1",
    "KUOTA_REDIS_URL": "redis://127.0.0.1:1/0",
    "KUOTA_SEEN_KEY": "test-seen-key",
}


@pytest.fixture
def kubeconfig(tmp_path: Path) -> str:
    p = tmp_path / "kubeconfig"
    p.write_text("apiVersion: v1\n")
    return str(p)


def test_settings_defaults(kubeconfig: str) -> None:
    s = IngestSettings.from_env({**BASE, "KUBECONFIG": kubeconfig})
    assert (s.metrics_port, s.tick_seconds) == (9101, 1.0)
    assert s.seen_key == "kuota:ingest:seen"
    assert not hasattr(s, "webhook_port"), "the webhook is a process of its own"
    s = IngestSettings.from_env({**BASE, "KUBECONFIG": kubeconfig, "KUOTA_TOPIC_PREFIX": "t-1."})
    assert s.seen_key == "kuota:ingest:seen:t-1.journal", "a test's memory is its own"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"KUOTA_REDIS_URL": ""}, "KUOTA_REDIS_URL is not set"),
        ({"KUBECONFIG": "/nonexistent"}, "no such file"),
        ({"KUOTA_TICK_SECONDS": "0"}, "must be positive"),
        ({"KUOTA_TICK_SECONDS": "soon"}, "not a number"),
        ({"KUOTA_METRICS_PORT": "70000"}, "not a port"),
        ({"KUOTA_CONFIG_CONFIGMAP": "just-a-name"}, "namespace/name"),
        ({"KUOTA_CONFIG_CONFIGMAP": "a/b", "KUOTA_CONFIG_FILE": "/f"}, "not both"),
        ({"KUOTA_CONFIG_FILE": "/nonexistent"}, "no such file"),
    ],
)
def test_settings_errors_are_one_clear_line(
    kubeconfig: str, env: dict[str, str], message: str
) -> None:
    with pytest.raises(SettingsError, match=message) as err:
        IngestSettings.from_env({**BASE, "KUBECONFIG": kubeconfig, **env})
    assert "\n" not in str(err.value)
