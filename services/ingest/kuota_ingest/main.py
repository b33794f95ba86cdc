"""kuota-ingest: Kubernetes watches and a clock -> the journal.

Wiring only (docs/design/ingest.md): the settings (``kuota_ingest.settings``,
and a ``KUOTA_CONFIG_FILE`` that must parse) and the pipeline
(``kuota_ingest.pipeline``: the journal topics, Redis memory of what was
journaled, one list+watch per kind, the single journal writer)
run under ``kuota.service.Runner``, which owns the metrics server, logging,
the start-up retry, the two-stage stop (the first signal drains the journal
writer) and the exit codes. The translation of objects into events is
``kuota.kube.translate``. The mutating webhook is a process of its own
(``kuota_webhook``).
"""

from __future__ import annotations

import time

from prometheus_client import REGISTRY

from kuota.bus.settings import SettingsError
from kuota.service import Runner
from kuota_ingest.pipeline import Service, log
from kuota_ingest.settings import IngestSettings
from kuota_ingest.sources import file_config_error

SERVICE = "kuota-ingest"


def load_settings() -> IngestSettings:
    settings = IngestSettings.from_env()
    if settings.config_file is not None:
        problem = file_config_error(settings.config_file)
        if problem is not None:
            raise SettingsError(f"KUOTA_CONFIG_FILE={settings.config_file}: {problem}")
    return settings


def main() -> None:
    started = time.monotonic()

    def make(settings: IngestSettings) -> Service:
        return Service(settings, started=started)

    Runner(SERVICE, log, REGISTRY, finishing="the journal writer drains").main(load_settings, make)


if __name__ == "__main__":
    main()
