"""The kubernetes-asyncio client a service talks to the apiserver with.

``api_client(kubeconfig)``: from the first file of a ``KUBECONFIG``-style path
list when one is given (the local stack, a developer's shell), else from the
pod's ServiceAccount (in a cluster). The services that watch (ingest, the
webhook) share it; the actuator builds its own, with its HTTP settings.
"""

from __future__ import annotations

import os

from kubernetes_asyncio import client, config


async def api_client(kubeconfig: str | None) -> client.ApiClient:
    cfg = client.Configuration()
    if kubeconfig is not None:
        await config.load_kube_config(
            config_file=kubeconfig.split(os.pathsep)[0], client_configuration=cfg
        )
    else:
        config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
    return client.ApiClient(cfg)
