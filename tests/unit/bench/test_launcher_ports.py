"""``scripts/kuota-services``' ``free_ports``: a named pipeline's ports are all
distinct (a CI run once gave the ingest and the actuator the same metrics port,
chosen one at a time, and the actuator failed to start), and free."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import socket
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[3]


def _launcher() -> ModuleType:
    path = REPO / "scripts" / "kuota-services"
    loader = importlib.machinery.SourceFileLoader("kuota_services_ports", str(path))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[loader.name] = module  # dataclasses look their module up
    loader.exec_module(module)
    return module


def test_every_port_of_a_pipeline_is_distinct_and_free() -> None:
    launcher = _launcher()
    for _ in range(200):
        metrics, webhook = launcher.free_ports()
        assert list(metrics) == list(launcher.SERVICES)
        chosen = [*metrics.values(), webhook]
        assert len(set(chosen)) == len(chosen), chosen
    for port in chosen:  # free once chosen: each can be bound
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))
