"""The DRA CEL environment: Kubernetes' device variable, quantities, semver, errors."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from kuota.core.dra.cel import (
    CompiledSelector,
    DeviceEnv,
    SelectorError,
    compile_selector,
    rewrite_bind,
    semver_value,
)
from kuota.quantity import parse_quantity


def h100_mig() -> DeviceEnv:
    return DeviceEnv(
        driver="gpu.nvidia.com",
        attributes=[
            ("profile", "1g.10gb"),  # no domain: the driver's
            ("productName", "H100"),
            ("index", 0),
            ("mig", True),
            ("driverVersion", semver_value("550.54.15")),
            ("resource.kubernetes.io/pcieRoot", "pci0000:00"),
        ],
        capacity=[("memory", parse_quantity("10Gi")), ("multiprocessors", parse_quantity("14"))],
    )


@dataclass
class Case:
    name: str
    expression: str
    want: bool | str  # a bool, or a substring of the error message


CASES = [
    # --- the device variable
    Case("driver", "device.driver == 'gpu.nvidia.com'", True),
    Case(
        "attribute in the driver's domain",
        "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'",
        True,
    ),
    Case("int attribute", "device.attributes['gpu.nvidia.com'].index == 0", True),
    Case("bool attribute", "device.attributes['gpu.nvidia.com'].mig", True),
    Case(
        "attribute in another domain",
        "device.attributes['resource.kubernetes.io'].pcieRoot == 'pci0000:00'",
        True,
    ),
    Case("has() on a present attribute", "has(device.attributes['gpu.nvidia.com'].profile)", True),
    Case(
        "has() on a missing attribute", "has(device.attributes['gpu.nvidia.com'].memoryGiB)", False
    ),
    Case(
        "an unknown domain is an empty map",
        "has(device.attributes['dra.example.com'].model)",
        False,
    ),
    Case("an unknown domain has size 0", "size(device.attributes['dra.example.com']) == 0", True),
    Case("'in' on domains is unchanged", "'dra.example.com' in device.attributes", False),
    Case(
        "a missing attribute is a runtime error",
        "device.attributes['gpu.nvidia.com'].memoryGiB > 40",
        "no such key: memoryGiB",
    ),
    Case(
        "missing attribute in an unknown domain",
        "device.attributes['dra.example.com'].model == 'x'",
        "no such key: model",
    ),
    Case(
        "short-circuit avoids the error",
        "device.driver == 'x' && device.attributes['gpu.nvidia.com'].nope",
        False,
    ),
    Case("allowMultipleAllocations", "device.allowMultipleAllocations == false", True),
    Case(
        "strings extension",
        "device.attributes['gpu.nvidia.com'].productName.lowerAscii() == 'h100'",
        True,
    ),
    Case("macros", "device.attributes['gpu.nvidia.com'].exists(k, k == 'profile')", True),
    Case(
        "cel.bind",
        "cel.bind(g, device.attributes['gpu.nvidia.com'], g.profile == '1g.10gb' && g.index == 0)",
        True,
    ),
    Case("nested cel.bind", "cel.bind(a, 1, cel.bind(b, a + 1, b == 2))", True),
    # --- quantities
    Case(
        "capacity is a quantity",
        "device.capacity['gpu.nvidia.com'].memory == quantity('10Gi')",
        True,
    ),
    Case("quantity equality is by value", "quantity('1') == quantity('1000m')", True),
    Case(
        "isGreaterThan",
        "device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity('9Gi'))",
        True,
    ),
    Case("isGreaterThan, equal", "quantity('10Gi').isGreaterThan(quantity('10Gi'))", False),
    Case("isLessThan", "quantity('50M').isLessThan(quantity('50Mi'))", True),
    Case("compareTo", "quantity('200M').compareTo(quantity('0.2G')) == 0", True),
    Case("compareTo, less", "quantity('50M').compareTo(quantity('50Mi')) == -1", True),
    Case("add quantity", "quantity('50k').add(quantity('20k')) == quantity('70k')", True),
    Case("add int", "quantity('50k').add(20) == quantity('50020')", True),
    Case(
        "sub chain",
        "quantity('50k').add(20).sub(quantity('100k')).sub(-50000) == quantity('20')",
        True,
    ),
    Case("sign", "quantity('-1').sign() == -1 && quantity('0').sign() == 0", True),
    Case("isInteger", "quantity('50k').isInteger() && !quantity('1500m').isInteger()", True),
    Case("asInteger", "quantity('50k').asInteger() == 50000", True),
    Case(
        "asInteger of a fraction",
        "quantity('1500m').asInteger() == 1",
        "cannot convert value to integer",
    ),
    Case("asApproximateFloat", "quantity('1500m').asApproximateFloat() == 1.5", True),
    Case("mul", "quantity('10Gi').mul(8) == quantity('80Gi')", True),
    Case("isQuantity", "isQuantity('1.3Gi') && !isQuantity('200K')", True),
    Case(
        "an invalid quantity",
        "quantity('200K') == quantity('1')",
        "not a valid Kubernetes quantity",
    ),
    Case("< on quantities is not defined", "quantity('1') < quantity('2')", "No such overload"),
    Case(
        "quantity compared with a version",
        "quantity('1').isGreaterThan(semver('1.0.0'))",
        "no such overload: isGreaterThan(Quantity, Semver)",
    ),
    # --- semantic versions
    Case(
        "version attribute",
        "device.attributes['gpu.nvidia.com'].driverVersion.isGreaterThan(semver('550.0.0'))",
        True,
    ),
    Case("version parts", "device.attributes['gpu.nvidia.com'].driverVersion.minor() == 54", True),
    Case("semver equality", "semver('1.2.3') == semver('1.2.3+build.5')", True),
    Case(
        "pre-release ranks below release", "semver('1.0.0-rc.1').isLessThan(semver('1.0.0'))", True
    ),
    Case(
        "numeric pre-release identifiers",
        "semver('1.0.0-rc.2').isLessThan(semver('1.0.0-rc.10'))",
        True,
    ),
    Case("normalize", "semver('v1.2', true) == semver('1.2.0')", True),
    Case("isSemver", "isSemver('1.2.3') && !isSemver('v1.2.3') && isSemver('v1.2.3', true)", True),
    # --- errors
    Case(
        "string compared with int",
        "device.attributes['gpu.nvidia.com'].productName > 1",
        "No such overload",
    ),
    Case(
        "not a bool", "device.attributes['gpu.nvidia.com'].index", "must evaluate to bool, not int"
    ),
    Case("unknown function", "device.frobnicate()", "Undefined variable or function"),
    Case("overflow", "9223372036854775807 + 1 > 0", "overflow"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_selector(case: Case) -> None:
    compiled = compile_selector(case.expression)
    assert isinstance(compiled, CompiledSelector), compiled
    got = h100_mig().matches(compiled)
    if isinstance(case.want, bool):
        assert got is case.want
    else:
        assert isinstance(got, SelectorError), got
        assert got.phase == "runtime"
        assert got.expression == case.expression
        assert case.want in got.message, got.message


SYNTAX_CASES = [
    ("device.driver == ", "line 1, column 18: syntax error: the expression ends too early"),
    ("device.attributes['gpu.nvidia.com'.profile", "line 1, column 43: syntax error: missing ']'"),
    # the parser's "Incomplete `IndexContext`!" at column 1 is left out: the real error
    ("device.attributes[", "line 1, column 19: syntax error: the expression ends too early"),
    ("device.driver == 'a' )", "line 1, column 22: syntax error: unexpected ')' after a complete"),
    ("device.driver == 'a' &&\n  (", "line 2, column 4"),
    ("", "expression is empty"),
    ("true || " * 2000 + "true", "more than the limit of 10240"),
]


@pytest.mark.parametrize(("expression", "want"), SYNTAX_CASES, ids=[w for _, w in SYNTAX_CASES])
def test_compile_errors_name_the_position(expression: str, want: str) -> None:
    got = compile_selector(expression)
    assert isinstance(got, SelectorError)
    assert got.phase == "compile"
    assert want in got.message, got.message
    assert "compilation failed" in str(got) or "expression" in got.message


def test_compiled_programs_are_cached_by_text() -> None:
    assert compile_selector("device.driver == 'x'") is compile_selector("device.driver == 'x'")


def test_results_are_cached_per_device() -> None:
    env = h100_mig()
    calls = []
    compiled = compile_selector("device.driver == 'gpu.nvidia.com'")
    assert isinstance(compiled, CompiledSelector)

    class Counting:
        def execute(self, ctx: object) -> object:
            calls.append(ctx)
            return compiled.program.execute(ctx)  # type: ignore[union-attr]

    counting = CompiledSelector(compiled.expression + " ", Counting(), (), ())
    assert env.matches(counting) is True
    assert env.matches(counting) is True
    assert len(calls) == 1


BIND_CASES = [
    ("cel.bind(x, 1, x == 1)", "([1].map(x, x == 1)[0])"),
    ("'cel.bind(x, 1, x)' == ''", "'cel.bind(x, 1, x)' == ''"),
    ("cel.bind(x, [1, 2], x.size() == 2)", "([[1, 2]].map(x, x.size() == 2)[0])"),
    ("mycel.bind(x, 1, x)", "mycel.bind(x, 1, x)"),
]


@pytest.mark.parametrize(("expression", "want"), BIND_CASES)
def test_rewrite_bind(expression: str, want: str) -> None:
    assert rewrite_bind(expression) == want
