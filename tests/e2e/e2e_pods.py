"""Helpers of the e2e tests with gated Pods (#18: pod groups, LeaderWorkerSet pods):
a Pod's gates, a group's Pods, waiting for them to run, and a user's patch that
the webhook must refuse."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from e2e_pipeline import Run
from kubernetes_asyncio import client

GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"


def gates(pod: client.V1Pod) -> list[str]:
    return [g.name for g in pod.spec.scheduling_gates or []]


async def group_pods(run: Run, ns: str, group: str) -> list[client.V1Pod]:
    listed = await client.CoreV1Api(run.api).list_namespaced_pod(
        ns, label_selector=f"{GROUP_LABEL}={group}"
    )
    return sorted(listed.items, key=lambda p: p.metadata.name)


async def all_running(run: Run, ns: str, group: str, count: int) -> list[client.V1Pod]:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        got = await group_pods(run, ns, group)
        if len(got) == count and all(p.status.phase == "Running" for p in got):
            return got
        await asyncio.sleep(0.3)
    got = await group_pods(run, ns, group)
    pytest.fail(f"{ns}/{group}: want {count} Pods Running, have {[p.status.phase for p in got]}")


async def user_patch(run: Run, ns: str, name: str, patch: dict[str, Any]) -> str:
    """A user (impersonated: the test's own user is kuota's, trusted) patches the Pod;
    kubectl's stderr (it must fail)."""
    proc = await asyncio.create_subprocess_exec(
        run.env["KUOTA_KUBECTL"],
        f"--kubeconfig={run.env['KUBECONFIG']}",
        "--as=tenant",
        "--as-group=system:masters",
        "patch",
        "pod",
        name,
        "-n",
        ns,
        "--type=merge",
        "-p",
        json.dumps(patch),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await proc.communicate()
    assert proc.returncode != 0, "the webhook refuses it"
    return err.decode()
