"""Projections of the cluster objects the fold reads for placement (#17): Nodes
and ResourceClaims, and the picking helpers every projection uses.

Theory of operation: a projection keeps what the fold reads of an object and
drops the rest (heartbeats, drivers' device status), so the digest of a
projection changes only when something the fold reads changes
(:func:`kuota.kube.translate.fold_digest`). A field of the wrong shape is kept
as found, so the fold finds it and says the same as on the whole object.
Pure: no I/O.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any


def pick(value: object, keys: tuple[str, ...]) -> object:
    """``value``'s ``keys`` (deep copies) if it is a mapping; else ``value`` as it is,
    so that the fold finds the same wrong shape and says the same."""
    if not isinstance(value, Mapping):
        return copy.deepcopy(value)
    return {k: copy.deepcopy(value[k]) for k in keys if k in value}


# What the fold reads of a Node (kuota.api.nodes.read_node; #17), and so all of a
# Node that is journaled: its identity and labels, its taints and cordon, and its
# allocatable resources. Not its conditions, addresses, images, kubelet heartbeats
# or annotations: kubelet and kwok rewrite those often, and the digest
# (of this projection, but the resourceVersion) leaves such writes unjournaled.
NODE_METADATA = ("name", "uid", "resourceVersion", "creationTimestamp", "labels")
NODE_SPEC = ("taints", "unschedulable")
NODE_STATUS = ("allocatable",)
TAINT = ("key", "value", "effect")  # not timeAdded


def node_projection(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What the fold reads of a Node (:data:`NODE_METADATA` ... :data:`TAINT`), each
    field copied as found, as for a Job."""
    out: dict[str, Any] = {k: copy.deepcopy(obj[k]) for k in ("apiVersion", "kind") if k in obj}
    for field, keys in (("metadata", NODE_METADATA), ("spec", NODE_SPEC), ("status", NODE_STATUS)):
        if field in obj:
            out[field] = pick(obj[field], keys)
    spec = out.get("spec")
    if isinstance(spec, dict) and isinstance(spec.get("taints"), list):
        spec["taints"] = [pick(t, TAINT) for t in spec["taints"]]
    return out


# What the fold reads of a ResourceClaim (kuota.api.dra.ResourceClaim; #17), and so
# all of a claim that is journaled: its identity, its whole spec.devices (what a
# claim made directly, not from a template, asks for), and of its status only what
# the allocator decided: each result's device and request (adminAccess: a device
# allocated for admin access is not taken; shareID and consumedCapacity: the share of
# a device several claims use), the allocation's nodeSelector, and whom the claim is
# reserved for. Not the drivers' device status (conditions, data, network data), the
# opaque config, nor the allocation's timestamps and binding conditions: the
# digest (of this projection, but the resourceVersion) leaves their writes
# unjournaled.
CLAIM_METADATA = ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
CLAIM_SPEC = ("devices",)
CLAIM_ALLOCATION = ("nodeSelector",)  # and devices.results, trimmed to CLAIM_RESULT
CLAIM_RESULT = ("request", "driver", "pool", "device", "adminAccess", "shareID", "consumedCapacity")
CLAIM_CONSUMER = ("apiGroup", "resource", "name", "uid")


def _each(value: object, keys: tuple[str, ...]) -> object:
    """Each item of a list trimmed to ``keys`` (:func:`pick`); a non-list as found."""
    if not isinstance(value, list):
        return copy.deepcopy(value)
    return [pick(item, keys) for item in value]


def _allocation(value: object) -> object:
    if not isinstance(value, Mapping):
        return copy.deepcopy(value)
    out: dict[str, Any] = {k: copy.deepcopy(value[k]) for k in CLAIM_ALLOCATION if k in value}
    if "devices" in value:
        devices = value["devices"]
        if isinstance(devices, Mapping):
            out["devices"] = (
                {"results": _each(devices["results"], CLAIM_RESULT)} if "results" in devices else {}
            )
        else:
            out["devices"] = copy.deepcopy(devices)
    return out


def claim_projection(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What the fold reads of a ResourceClaim (:data:`CLAIM_METADATA` ...
    :data:`CLAIM_CONSUMER`), each field copied as found, as for a Job."""
    out: dict[str, Any] = {k: copy.deepcopy(obj[k]) for k in ("apiVersion", "kind") if k in obj}
    for field, keys in (("metadata", CLAIM_METADATA), ("spec", CLAIM_SPEC)):
        if field in obj:
            out[field] = pick(obj[field], keys)
    if "status" not in obj:
        return out
    status = obj["status"]
    if not isinstance(status, Mapping):
        out["status"] = copy.deepcopy(status)
        return out
    picked: dict[str, Any] = {}
    if "allocation" in status:
        picked["allocation"] = _allocation(status["allocation"])
    if "reservedFor" in status:
        picked["reservedFor"] = _each(status["reservedFor"], CLAIM_CONSUMER)
    if picked:
        out["status"] = picked
    return out


# The kinds journaled as a projection of what the fold reads, and digested by it
# (a Job is projected too, but digested whole: see fold_digest).
