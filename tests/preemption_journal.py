"""Journals that need preemption, shared by the admission unit tests and the
real-stack preemption tests (``tests/integration/test_preemption_*.py``).

``Journal`` writes journal events the way ingest would (``ObjectUpserted`` of
Kueue objects and Jobs, ``Tick``), with event times one second apart from
``T0``. The scenarios are the four of docs/design/preemption.md ("How it is
tested"): priority within a ClusterQueue, the cohort reclaim of reference
article 004 (team-alpha / team-beta), fair sharing, and the liveness journal.
Expected victims and reasons are what Kueue's rules give; the tests check
them against the real services, never against a stand-in search.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml
from builders import manifests
from builders.manifests import cluster_queue, configuration, flavor, local_queue, priority_class

from kuota.events.schema import JournalEvent, ObjectUpserted, Tick

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z
WAITING = "WaitingForPreemptionPlan"
WAIT_MESSAGE = "waiting for a preemption plan from the preemption service"

# Reference article 004 ("GPU Job Queueing with Kueue and DRA"): its
# ResourceFlavor and its team-alpha ClusterQueue + LocalQueue, with the
# article's "reclaimWithinCohort: Any" ("When the owning team submits new
# work, reclaimWithinCohort: Any preempts the borrower's jobs"); team-beta is
# the same ClusterQueue for the other team.
ARTICLE_004 = """\
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata:
  name: nvidia-h100
spec:
  nodeLabels:
    node.kubernetes.io/instance-type: p5.48xlarge
  tolerations:
  - key: nvidia.com/gpu
    operator: Exists
    effect: NoSchedule
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: team-alpha-cq
spec:
  cohort: gpu-pool
  preemption:
    reclaimWithinCohort: Any
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: nvidia-h100
      resources:
      - name: "nvidia.com/gpu"
        nominalQuota: 8
        borrowingLimit: 4
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  name: training-queue
  namespace: team-alpha
spec:
  clusterQueue: team-alpha-cq
"""


def article_004() -> list[dict[str, Any]]:
    """The article's objects, and team-beta's ClusterQueue and LocalQueue."""
    flavor, alpha, alpha_lq = (d for d in yaml.safe_load_all(ARTICLE_004))
    beta = yaml.safe_load(yaml.safe_dump(alpha))
    beta["metadata"]["name"] = "team-beta-cq"
    beta_lq = yaml.safe_load(yaml.safe_dump(alpha_lq))
    beta_lq["metadata"]["namespace"] = "team-beta"
    beta_lq["spec"]["clusterQueue"] = "team-beta-cq"
    return [flavor, alpha, beta, alpha_lq, beta_lq]


def job(name: str, *, namespace: str, gpus: int, created: float, **kw: Any) -> dict[str, Any]:
    """A suspended Job as ingest journals it (a uid, the creation time)."""
    return manifests.job(
        name,
        namespace=namespace,
        gpus=gpus,
        created=created,
        uid=f"uid-{namespace}-{name}",
        suspend=True,
        **kw,
    )


@dataclass
class Journal:
    """Journal events in the order written, event time one second apart."""

    t: float = T0
    events: list[JournalEvent] = field(default_factory=list)

    def objects(self, *objs: dict[str, Any]) -> list[JournalEvent]:
        out: list[JournalEvent] = []
        for obj in objs:
            self.t += 1.0
            meta = obj["metadata"]
            rid = f"{obj['kind']}/{meta.get('namespace', '')}/{meta['name']}@{self.t:.0f}"
            out.append(ObjectUpserted(id=rid, at=self.t, object=obj))
        self.events += out
        return out

    def job(self, name: str, *, namespace: str, gpus: int, **kw: Any) -> list[JournalEvent]:
        return self.objects(job(name, namespace=namespace, gpus=gpus, created=self.t + 1.0, **kw))

    def tick(self, after: float = 1.0) -> list[JournalEvent]:
        self.t += after
        out: list[JournalEvent] = [Tick(id=f"tick@{self.t}", at=self.t)]
        self.events += out
        return out


# ---------------------------------------------------------------------- scenarios


def within_cluster_queue(j: Journal) -> list[JournalEvent]:
    """One ClusterQueue of 4 GPUs, ``withinClusterQueue: LowerPriority``;
    ``team-a/low`` (2 GPUs, priority 10) and ``team-a/mid`` (2, 50) run."""
    return j.objects(
        flavor("h100", spec={}),
        priority_class("low", value=10),
        priority_class("mid", value=50),
        priority_class("high", value=100),
        cluster_queue("cq", gpus=4, within="LowerPriority"),
        local_queue("lq", namespace="team-a", cluster_queue="cq"),
        job("low", namespace="team-a", gpus=2, priority="low", created=j.t),
        job("mid", namespace="team-a", gpus=2, priority="mid", created=j.t + 0.5),
    )


def fair_sharing(j: Journal) -> list[JournalEvent]:
    """Fair sharing on; a cohort of two ClusterQueues of 4 GPUs each
    (``reclaimWithinCohort: Any``); team-a runs four Jobs of 2 GPUs: 8 GPUs,
    borrowing all of cq-b's."""
    evs = j.objects(
        configuration(
            api_version="config.kueue.x-k8s.io/v1beta1",
            metadata={"name": "kueue-config"},
            fairSharing={"enable": True},
        ),
        flavor("h100", spec={}),
        cluster_queue("cq-a", gpus=4, cohort="pool", reclaim="Any"),
        cluster_queue("cq-b", gpus=4, cohort="pool", reclaim="Any"),
        local_queue("lq", namespace="team-a", cluster_queue="cq-a"),
        local_queue("lq", namespace="team-b", cluster_queue="cq-b"),
    )
    for i in range(1, 5):
        evs += j.job(f"a-{i}", namespace="team-a", gpus=2)
    return evs


def cohort_reclaim(j: Journal) -> list[JournalEvent]:
    """Article 004's two teams; team-beta runs 8 + 2 + 2 GPUs: 4 borrowed."""
    evs = j.objects(*article_004())
    evs += j.job("beta-1", namespace="team-beta", gpus=8, queue="training-queue")
    evs += j.job("beta-2", namespace="team-beta", gpus=2, queue="training-queue")
    evs += j.job("beta-3", namespace="team-beta", gpus=2, queue="training-queue")
    return evs
