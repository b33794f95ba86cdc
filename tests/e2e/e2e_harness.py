"""The end-to-end harness: kuota's four services on the real stack, one scenario at a time.

Theory of operation. A test module gets one *run* (``e2e_run`` fixture, built by
``run_fixture``): its own pipeline of the four real services, started with
``scripts/kuota-services``' Python API under a unique name ``e2e-<hex>``, so
it has its own topics (prefix ``e2e-<hex>.``), free metrics and webhook
ports, a webhook registration matching only Jobs labelled
``kuota.dev/pipeline=e2e-<hex>``, an ingest that watches only those Jobs and an
actuator that writes only those ClusterQueues' status. The run also brings its
own hardware: two kwok nodes and, on them, partitionable GPUs of a driver
named after the run (``e2e-<hex>.gpu.kuota.dev``), its DeviceClasses
(``gpu-<run>`` and ``mig-<run>`` charged by the ``memory`` counter as
``gpu-memory``; ``wgpu-<run>``, whole GPUs with ``extendedResourceName:
nvidia.com/gpu``, charged by device count as ``whole-gpus``) and its Kueue
Configuration (a file, ``KUOTA_CONFIG_FILE``). Nothing else on the shared
apiserver can see or disturb it.

While the run lives, background tasks record the journal and the decision
topic (from offset 0), every change of the run's Jobs (a watch), and every DRA
allocation of a ResourceClaim in the run's namespaces.

``run_scenario`` plays one file of ``tests/e2e/scenarios/``: Kubernetes
manifests with the simulator's timing annotations (``kuota.dev/submit-at``,
``kuota.dev/run-for``) and the test's expectations (``e2e.kuota.dev/charge``:
what the Job must be charged, ``e2e.kuota.dev/device``: ``whole`` or ``mig``,
``e2e.kuota.dev/expect``: ``Inadmissible/<Reason>`` for a Job that must never
be admitted, ``e2e.kuota.dev/admissions``: how often it is admitted, 2 for a
Job preempted once). It applies the queue objects, waits until ingest has
journaled them, then creates each Job at its time — *without*
``spec.suspend``: the webhook must suspend it — with kwok annotations so its
pods run for ``run-for``. While it plays, a sampler lists the run's Jobs every
``SAMPLE_PERIOD`` and checks that the admitted (unsuspended, not finished)
usage never exceeds quota; the Job watch gives the same check at every single
change. It ends when every Job reached its expected end, and returns an
``Outcome``: what the cluster and the decision topic show, and what
``kuota.sim`` decides for the very same manifests.

The harness is split by concern; this module re-exports every name, so tests
and scripts import from ``e2e_harness`` alone:

- ``e2e_hardware.py``: the run's kwok nodes, ResourceSlices, DeviceClasses and
  Kueue Configuration (``hardware``, ``configuration``, the labels);
- ``e2e_pipeline.py``: ``Run``, the recorders, ``kubectl_apply``,
  ``wait_journaled``, ``run_fixture`` and the cleanup;
- ``e2e_outcome.py``: ``QuotaModel``, ``ScenarioJob``, ``Outcome`` and the Job
  predicates;
- ``e2e_scenario.py``: ``load_scenario`` and ``run_scenario`` (sampler, report);
- ``e2e_checks.py``: ``assert_pipeline``, ``wait_message``, ``decided_before``,
  and for DRA ``claim_failures``, ``job_devices``, ``counter_peaks``.

A constant is read where it is defined: to change one for a run (say
``SAMPLE_PERIOD``), set it on its own module (``e2e_scenario``), not here.
"""

from __future__ import annotations

from e2e_checks import (
    assert_pipeline,
    claim_failures,
    counter_peaks,
    decided_before,
    job_devices,
    wait_message,
)
from e2e_hardware import (
    GPUS_PER_NODE,
    KWOK_COMPLETE,
    KWOK_READY,
    MIG_PER_GPU,
    NODE_POOL_LABEL,
    NODES,
    PIPELINE_LABEL,
    SHARED_GPU,
    configuration,
    hardware,
)
from e2e_outcome import (
    Outcome,
    QuotaModel,
    ScenarioJob,
    Usage,
    job_done,
    job_key,
    job_running,
    parse_charge,
    unsuspended_after,
    usage_of,
)
from e2e_pipeline import (
    JOURNALED_KINDS,
    KUEUE,
    REPO,
    WAIT,
    JobChange,
    Run,
    _cleanup,
    _record_claims,
    _record_jobs,
    _record_topic,
    kubectl_apply,
    load_launcher,
    run_fixture,
    wait_journaled,
    wait_nodes_ready,
)
from e2e_scenario import (
    ADMISSIONS,
    CHARGE,
    DEVICE,
    EXPECT,
    QUEUE_LABEL,
    SAMPLE_PERIOD,
    SCENARIOS,
    SETTLE_TIMEOUT,
    _collect,
    _report,
    _sample,
    load_scenario,
    run_scenario,
)

_unsuspended_after = unsuspended_after  # the name it had before the split

__all__ = [
    "ADMISSIONS",
    "CHARGE",
    "DEVICE",
    "EXPECT",
    "GPUS_PER_NODE",
    "JOURNALED_KINDS",
    "KUEUE",
    "KWOK_COMPLETE",
    "KWOK_READY",
    "MIG_PER_GPU",
    "NODES",
    "NODE_POOL_LABEL",
    "PIPELINE_LABEL",
    "QUEUE_LABEL",
    "REPO",
    "SAMPLE_PERIOD",
    "SCENARIOS",
    "SETTLE_TIMEOUT",
    "SHARED_GPU",
    "WAIT",
    "JobChange",
    "Outcome",
    "QuotaModel",
    "Run",
    "ScenarioJob",
    "Usage",
    "_cleanup",
    "_collect",
    "_record_claims",
    "_record_jobs",
    "_record_topic",
    "_report",
    "_sample",
    "_unsuspended_after",
    "assert_pipeline",
    "claim_failures",
    "configuration",
    "counter_peaks",
    "decided_before",
    "hardware",
    "job_devices",
    "job_done",
    "job_key",
    "job_running",
    "kubectl_apply",
    "load_launcher",
    "load_scenario",
    "parse_charge",
    "run_fixture",
    "run_scenario",
    "unsuspended_after",
    "usage_of",
    "wait_journaled",
    "wait_message",
    "wait_nodes_ready",
]
