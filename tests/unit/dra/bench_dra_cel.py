"""Micro-benchmark of DRA CEL evaluation and charging. Prints figures; asserts nothing.

.venv/bin/python tests/unit/dra/bench_dra_cel.py [nodes]
"""

from __future__ import annotations

import sys
import time

from dra_builders import ARTICLE_MANIFESTS, GPU_MEMORY, h100_mig_node, podset

from kuota.core.dra.cel import CompiledSelector, DeviceEnv, compile_selector, semver_value
from kuota.core.dra.charging import DraInventory, charge_podset
from kuota.quantity import parse_quantity


def rate(label: str, n: int, seconds: float) -> None:
    print(f"{label:<58} {n / seconds:>12,.0f} /s  ({n} in {seconds:.3f}s)")


def main(nodes: int) -> None:
    expressions = [
        "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'",
        "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'",
        "device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity('5Gi'))",
        "device.attributes['gpu.nvidia.com'].driverVersion.isGreaterThan(semver('550.0.0'))",
    ]
    selectors = [compile_selector(e) for e in expressions]
    assert all(isinstance(s, CompiledSelector) for s in selectors)

    def env() -> DeviceEnv:
        return DeviceEnv(
            driver="gpu.nvidia.com",
            attributes=[
                ("type", "mig"),
                ("profile", "1g.10gb"),
                ("productName", "H100"),
                ("index", 3),
                ("driverVersion", semver_value("550.54.15")),
            ],
            capacity=[("memory", parse_quantity("10Gi"))],
        )

    n = 5000
    t = time.perf_counter()
    envs = [env() for _ in range(n)]
    rate("DeviceEnv built (CEL context built on first eval)", n, time.perf_counter() - t)

    for sel in selectors:
        assert isinstance(sel, CompiledSelector)
        t = time.perf_counter()
        for e in envs:
            e.matches(sel)
        label = f"first eval per device: {sel.expression[:32]}..."
        rate(label, n, time.perf_counter() - t)

    for sel in selectors:
        assert isinstance(sel, CompiledSelector)
        t = time.perf_counter()
        for e in envs:
            e._evaluate(sel)  # bypass the result cache: the raw evaluation rate
        rate(f"evaluation on a built context: {sel.expression[:26]}...", n, time.perf_counter() - t)

    sel = selectors[0]
    assert isinstance(sel, CompiledSelector)
    t = time.perf_counter()
    for _ in range(20):
        for e in envs:
            e.matches(sel)
    rate("cached (expression, device) result", 20 * n, time.perf_counter() - t)

    inv = DraInventory()
    for m in ARTICLE_MANIFESTS:
        inv.upsert(m)
    for i in range(nodes):
        inv.upsert(h100_mig_node(f"node-{i}").build())
    devices = len(inv.usable_devices())
    ps = podset({"cpu": "1"}, "gpu-partition")
    t = time.perf_counter()
    charge_podset(inventory=inv, config=GPU_MEMORY, namespace="team-a", podset=ps)
    cold = time.perf_counter() - t
    print(
        f"charge_podset, cold, {devices} devices: {cold * 1000:.1f} ms "
        f"({2 * devices / cold:,.0f} selector evals/s incl. context build)"
    )
    t = time.perf_counter()
    for _ in range(1000):
        charge_podset(inventory=inv, config=GPU_MEMORY, namespace="team-a", podset=ps)
    rate("charge_podset, same generation (memoised match)", 1000, time.perf_counter() - t)
    inv.upsert(h100_mig_node("node-extra").build())
    t = time.perf_counter()
    charge_podset(inventory=inv, config=GPU_MEMORY, namespace="team-a", podset=ps)
    warm = time.perf_counter() - t
    print(f"charge_podset after one new slice (CEL results reused): {warm * 1000:.1f} ms")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000)
