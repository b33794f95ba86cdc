"""Devices alike in what a selector sees share one DeviceEnv, and sharing never
changes which devices match (``DraInventory.env``)."""

from __future__ import annotations

from dra_builders import GPU_DRIVER, h100_mig_node, inventory, slice_
from hypothesis import given, settings
from hypothesis import strategies as st

from kuota.core.dra.cel import DeviceEnv, SelectorError, compile_selector, semver_value


def test_identical_nodes_share_envs_and_a_different_device_does_not() -> None:
    inv = inventory(
        h100_mig_node("node-a").build(),
        h100_mig_node("node-b").build(),
        slice_("node-c").device("gpu-0", type="gpu", productName="A100").build(),
    )
    devices = {(d.pool, d.device.name): d for d in inv.usable_devices()}
    a, b = devices[("node-a", "gpu-0")], devices[("node-b", "gpu-0")]
    assert inv.env(a) is inv.env(b)
    assert inv.env(a) is not inv.env(devices[("node-c", "gpu-0")])
    assert inv.env(a) is not inv.env(devices[("node-a", "gpu-0-mig-1g10gb-0")])
    # seven alike MIG devices per node, two nodes: one env
    migs = {id(inv.env(d)) for d in inv.usable_devices() if "mig" in d.device.name}
    assert len(migs) == 1


_VALUES = st.sampled_from(["gpu", "mig", "A100", "H100", 1, 2, True, False])
_KEYS = st.sampled_from(["type", "productName", "index"])
_EXPRESSIONS = [
    "device.attributes['gpu.nvidia.com'].type == 'gpu'",
    "device.attributes['gpu.nvidia.com'].productName == 'H100'",
    "device.attributes['gpu.nvidia.com'].index == 1",
    "device.attributes['gpu.nvidia.com'].index > 0",  # a runtime error on a string
    "'productName' in device.attributes['gpu.nvidia.com']",
    "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) > 0",
]


@settings(max_examples=60, deadline=None)
@given(
    nodes=st.lists(
        st.lists(
            st.tuples(
                st.dictionaries(_KEYS, _VALUES, max_size=3), st.sampled_from(["40Gi", "80Gi"])
            ),
            min_size=1,
            max_size=4,
        ),
        min_size=1,
        max_size=4,
    ),
    expression=st.sampled_from(_EXPRESSIONS),
)
def test_shared_envs_match_what_one_env_per_device_matches(
    nodes: list[list[tuple[dict[str, object], str]]], expression: str
) -> None:
    manifests = []
    for n, devices in enumerate(nodes):
        builder = slice_(f"node-{n}")
        for i, (attrs, memory) in enumerate(devices):
            builder.device(f"dev-{i}", capacity={"memory": memory}, **attrs)
        manifests.append(builder.build())
    inv = inventory(*manifests)
    selector = compile_selector(expression)
    assert not isinstance(selector, SelectorError)
    got = inv.matching_devices(selectors=(selector,), driver=GPU_DRIVER)
    # The naive reading: a fresh env per device, in device order, stopping at an error.
    expected: list[str] = []
    error = None
    for device in inv.usable_devices():
        d = device.device
        env = DeviceEnv(
            driver=device.driver,
            attributes=[
                (a.name, semver_value(str(a.value)) if a.kind == "version" else a.value)
                for a in d.attributes
            ],
            capacity=d.capacity,
            allow_multiple_allocations=d.allow_multiple_allocations,
        )
        verdict = env.matches(selector)
        if isinstance(verdict, SelectorError):
            error = (str(device), verdict)
            break
        if verdict:
            expected.append(str(device))
    if error is not None:
        assert not isinstance(got, tuple)
        assert (str(got.device), got.error) == error
    else:
        assert isinstance(got, tuple)
        assert [str(d) for d in got] == expected
