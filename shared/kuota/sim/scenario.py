"""Scenario files: ordinary Kubernetes manifests plus timing annotations.

Theory of operation: a scenario is a multi-document YAML file that stays valid
for ``kubectl apply``; its annotations say *when* each object appears, runs and goes away:

``kuota.dev/submit-at``   when the object is applied (default ``0s``)
``kuota.dev/run-for``     a Job finishes this long after its latest admission
                          (default: it runs until the end of the simulation)
``kuota.dev/ready-after`` its pods become ready this long after admission, or
                          ``never`` (default: at once)
``kuota.dev/delete-at``   when the object is deleted (default: never)
``kuota.dev/stop-after``  its pods are gone this long after a stop (preemption,
                          eviction, deletion), when the quota kept for them is
                          released (default: at once)

Durations are Go-style (``1m30s``) or bare seconds; a bad value is a
``ScenarioError`` naming the object and the annotation; ``kind: List``
documents are expanded, as ``kubectl`` does.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from kuota.sim.duration import DurationError, parse_duration

SUBMIT_AT = "kuota.dev/submit-at"
RUN_FOR = "kuota.dev/run-for"
READY_AFTER = "kuota.dev/ready-after"
DELETE_AT = "kuota.dev/delete-at"
STOP_AFTER = "kuota.dev/stop-after"
#: Set by the engine on workloads when they are submitted (seconds, as text) so
#: that the workload's creation time is its submission time; the api parser
#: reads it. A value already in the file wins.
CREATED_AT = "kuota.dev/created-at"
TIMING_ANNOTATIONS = (SUBMIT_AT, RUN_FOR, READY_AFTER, DELETE_AT, STOP_AFTER, CREATED_AT)
NEVER = "never"


class ScenarioError(ValueError):
    """A scenario that cannot be simulated: bad YAML, a bad timing annotation."""


class SimulationError(RuntimeError):
    """The run cannot finish: too many steps, or a fold that keeps waking up.
    (Raised by ``kuota.sim.engine``; defined here because the engine is compiled
    by ``make native`` and a compiled class cannot derive from RuntimeError.)"""


@dataclass(frozen=True, slots=True)
class Timing:
    """When things happen to one object, in engine microseconds."""

    submit_at: int = 0
    run_for: int | None = None  # None: runs until the end
    ready_after: int | None = 0  # None: never ready
    delete_at: int | None = None  # None: never deleted
    stop_after: int = 0  # a stop -> its pods gone (WorkloadStopped)


def describe(manifest: Mapping[str, Any], *, index: int) -> str:
    """How error messages name an object: ``Job team-a/train-1 (document 3)``."""
    kind = manifest.get("kind") or "<no kind>"
    metadata = manifest.get("metadata")
    name = namespace = ""
    if isinstance(metadata, Mapping):
        name = str(metadata.get("name") or "")
        namespace = str(metadata.get("namespace") or "")
    qualified = f"{namespace}/{name}" if namespace else name
    return f"{kind} {qualified or '<no name>'} (document {index + 1})"


def annotations_of(manifest: Mapping[str, Any]) -> Mapping[str, Any]:
    metadata = manifest.get("metadata")
    if not isinstance(metadata, Mapping):
        return {}
    annotations = metadata.get("annotations")
    return annotations if isinstance(annotations, Mapping) else {}


def timing_of(manifest: Mapping[str, Any], *, index: int) -> Timing:
    """Read the timing annotations of one manifest (``index`` is its file position)."""
    annotations = annotations_of(manifest)

    def duration(key: str, *, allow_never: bool = False) -> int | None:
        raw = annotations.get(key)
        if raw is None:
            return None
        if allow_never and isinstance(raw, str) and raw.strip().lower() == NEVER:
            return None
        try:
            return parse_duration(raw)
        except DurationError as err:
            extra = " or 'never'" if allow_never else ""
            raise ScenarioError(
                f"{describe(manifest, index=index)}: annotation {key}: {err}{extra}"
            ) from None

    for key in annotations:
        if isinstance(key, str) and key.startswith("kuota.dev/") and key not in TIMING_ANNOTATIONS:
            close = difflib.get_close_matches(key, TIMING_ANNOTATIONS, n=1)
            if close:
                raise ScenarioError(
                    f"{describe(manifest, index=index)}: unknown annotation {key} "
                    f"(did you mean {close[0]}?)"
                )

    submit_at = duration(SUBMIT_AT) or 0
    delete_at = duration(DELETE_AT)
    if delete_at is not None and delete_at < submit_at:
        raise ScenarioError(
            f"{describe(manifest, index=index)}: annotation {DELETE_AT} is before {SUBMIT_AT}"
        )
    ready_after = (
        0 if annotations.get(READY_AFTER) is None else duration(READY_AFTER, allow_never=True)
    )
    return Timing(
        submit_at=submit_at,
        run_for=duration(RUN_FOR),
        ready_after=ready_after,
        delete_at=delete_at,
        stop_after=duration(STOP_AFTER) or 0,
    )


# libyaml's parser when PyYAML was built with it (8x faster on big scenarios).
_SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_SafeLoader):  # type: ignore[valid-type,misc]
    """A safe loader that keeps timestamps as the strings Kubernetes sends.

    Manifests travel as JSON in journal events; a ``datetime`` would not.
    """


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in _SafeLoader.yaml_implicit_resolvers.items()
}


def load_scenario(text: str, *, source: str = "<scenario>") -> list[dict[str, Any]]:
    """Parse a scenario file into manifests, in file order.

    Empty documents are skipped; ``kind: List`` documents contribute their
    items (none without ``items``). Raises ``ScenarioError`` for malformed YAML, a
    document that is not a mapping, or a List whose items are not a list of
    mappings.
    """
    try:
        documents = list(yaml.load_all(text, Loader=_Loader))  # a safe loader
    except yaml.YAMLError as err:
        raise ScenarioError(f"{source}: malformed YAML: {_yaml_message(err)}") from None
    manifests: list[dict[str, Any]] = []
    for number, document in enumerate(documents, start=1):
        if document is None:
            continue
        if not isinstance(document, dict):
            raise ScenarioError(
                f"{source}: document {number} is a {type(document).__name__}, not a mapping"
            )
        if document.get("kind") == "List":
            items = document.get("items")
            if items is None:  # an empty List, as kubectl reads it
                continue
            if not isinstance(items, list):
                raise ScenarioError(
                    f"{source}: document {number}: kind List: items must be a list of "
                    f"manifests, not a {type(items).__name__}"
                )
            for position, item in enumerate(items):
                if not isinstance(item, dict):
                    raise ScenarioError(
                        f"{source}: document {number}: items[{position}] is not a mapping"
                    )
                manifests.append(item)
            continue
        manifests.append(document)
    return manifests


def _yaml_message(err: yaml.YAMLError) -> str:
    if isinstance(err, yaml.MarkedYAMLError):
        where = err.problem_mark
        position = f" at line {where.line + 1}, column {where.column + 1}" if where else ""
        return f"{err.problem or err.context or 'syntax error'}{position}"
    return str(err)
