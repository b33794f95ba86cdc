"""Fixtures the integration tests share."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio
from kubernetes_asyncio import client, config


@pytest_asyncio.fixture
async def admin(kubeconfig: str) -> AsyncIterator[client.ApiClient]:
    """An apiserver client as the stack's admin (kuota-admin)."""
    a = await config.new_client_from_config(config_file=kubeconfig)
    try:
        yield a
    finally:
        await a.close()
