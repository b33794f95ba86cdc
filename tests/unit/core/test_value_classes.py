"""The dataclasses whose constructors are written out by hand (``init=False``).

They are built on the scheduling path, where the constructor the ``dataclass``
decorator would generate is interpreted even in the compiled core
(docs/design/native-core.md). Written out, a constructor can drift from the
fields: a field left unset, two swapped, a default that differs from the one
declared. These tests read the fields and the constructor and fail on any of
that, for every such class, compiled or not.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import inspect
import pickle
import sys
from pathlib import Path
from typing import Any

import pytest

import kuota
from kuota.api.types import WorkloadSpec
from kuota.core.flavors import Assignment, Mode, PodSetAssignment, QuotaFact, Shortfall
from kuota.core.queues import ShapeGroup
from kuota.core.verdict import Verdict
from kuota.core.workload import Admission, WorkloadRecord
from kuota.events.schema import Tick
from kuota.sim.engine import Step

# value classes: equal and hashed by their fields, as the frozen dataclasses were
VALUES: list[type] = [Shortfall, QuotaFact, PodSetAssignment, Assignment, Verdict, Admission]
RECORDS: list[type] = [WorkloadRecord, ShapeGroup, Step]  # mutable state, or a step of a run
ALL = VALUES + RECORDS

_SPEC = WorkloadSpec("ns", "job", "uid-1", "queue", None, 1.5, ())
_EVENT = Tick(id="sim-1", at=2.0)
_FR = ("flavor", "cpu")
# For each class, one argument per field, of the field's type (the compiled
# classes check types) and all different, so that a swap cannot go unseen.
ARGUMENTS: dict[type, tuple[Any, ...]] = {
    Shortfall: ("f1", "r1", 11, 12, 13, Mode.PREEMPT),
    QuotaFact: ("r2", "f2", 21, 22, 23, 24, "limit", Mode.NO_FIT, True),
    PodSetAssignment: ("ps", (("cpu", "f3"),), Mode.FIT, 31, ("why",), ()),
    Assignment: ((), Mode.PREEMPT, 41, ((_FR, 42),), "Reason", ((_FR, 43),), ("sig",)),
    Verdict: ("Reason", ("sig",), "text", (("ps", ("why",)),), ["rendered"]),
    Admission: ("cq", ((_FR, 61),), (("ps", (("cpu", "f6"),)),), 6.5),
    WorkloadRecord: (
        _SPEC,
        (-7, 7.5, "ns/job"),
        71,
        "Admitted",
        "cq",
        True,
        72,
        73,
        (("cq", "x"),),
        (),
        Admission("cq", (), (), 1.0),
        ("Reason", ("sig",)),
        True,
        {"k": "v"},
    ),
    ShapeGroup: (
        81,
        {"ns/a": (0, 1.0, "ns/a")},
        [(0, 1.0, "ns/a")],
        True,
        82,
        Verdict("R", ()),
        ((_FR, 83),),
        {_FR: None},
    ),
    Step: (_EVENT, []),
}
# a different first argument, for the inequality check
OTHER_FIRST: dict[type, Any] = {
    Shortfall: "f9",
    QuotaFact: "r9",
    PodSetAssignment: "other",
    Assignment: (PodSetAssignment("x", (), Mode.FIT, 0, (), ()),),
    Verdict: "Other",
    Admission: "cq9",
}


def _parameters(cls: type) -> list[inspect.Parameter]:
    """The constructor's parameters, read from the class's source: a compiled
    class has no signature to inspect (its behaviour is tested below)."""
    module = sys.modules[cls.__module__]
    path = Path(kuota.__path__[0]).joinpath(*cls.__module__.split(".")[1:]).with_suffix(".py")
    source = path.read_text()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.name == cls.__name__:
            break
    else:
        raise AssertionError(f"class {cls.__name__} not found in {path}")
    init = next(n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    assert not (
        init.args.kwonlyargs or init.args.vararg or init.args.kwarg or init.args.posonlyargs
    )
    args = init.args.args[1:]  # without self
    defaults = [inspect.Parameter.empty] * (len(args) - len(init.args.defaults)) + [
        eval(compile(ast.Expression(d), str(path), "eval"), vars(module))
        for d in init.args.defaults
    ]
    return [
        inspect.Parameter(a.arg, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=d)
        for a, d in zip(args, defaults, strict=True)
    ]


@pytest.mark.parametrize("cls", ALL, ids=lambda c: c.__name__)
def test_the_constructor_takes_every_field_in_order(cls: type) -> None:
    assert [p.name for p in _parameters(cls)] == [f.name for f in dataclasses.fields(cls)]


@pytest.mark.parametrize("cls", ALL, ids=lambda c: c.__name__)
def test_each_argument_lands_in_its_own_field(cls: type) -> None:
    arguments = ARGUMENTS[cls]
    built = cls(*arguments)
    for field, argument in zip(dataclasses.fields(cls), arguments, strict=True):
        assert getattr(built, field.name) == argument, field.name
    by_keyword = cls(**{p.name: a for p, a in zip(_parameters(cls), arguments, strict=True)})
    for field, argument in zip(dataclasses.fields(cls), arguments, strict=True):
        assert getattr(by_keyword, field.name) == argument, field.name


def _required(cls: type) -> dict[str, Any]:
    return {
        p.name: a
        for p, a in zip(_parameters(cls), ARGUMENTS[cls], strict=True)
        if p.default is inspect.Parameter.empty
    }


@pytest.mark.parametrize("cls", ALL, ids=lambda c: c.__name__)
def test_defaults_are_the_declared_ones_and_never_shared(cls: type) -> None:
    required = _required(cls)
    first, second = cls(**required), cls(**required)
    parameters = {p.name: p for p in _parameters(cls)}
    for field in dataclasses.fields(cls):
        if field.name in required:
            continue
        value = getattr(first, field.name)
        if field.default_factory is not dataclasses.MISSING:
            assert parameters[field.name].default is None
            assert value == field.default_factory()
            if isinstance(value, list | dict):  # a fresh one per instance
                assert value is not getattr(second, field.name), field.name
        elif field.default is not dataclasses.MISSING:
            assert value == field.default == parameters[field.name].default, field.name
        else:  # a Final field: its default is written in the constructor only
            assert value == parameters[field.name].default, field.name


@pytest.mark.parametrize("cls", VALUES, ids=lambda c: c.__name__)
def test_values_compare_and_hash_by_their_fields(cls: type) -> None:
    one, other = cls(*ARGUMENTS[cls]), cls(*ARGUMENTS[cls])
    assert one == other and hash(one) == hash(other)
    first = dataclasses.fields(cls)[0].name
    changed = dataclasses.replace(one, **{first: OTHER_FIRST[cls]})
    assert changed != one
    assert dataclasses.replace(one) == one


@pytest.mark.parametrize("cls", [*VALUES, WorkloadRecord, ShapeGroup], ids=lambda c: c.__name__)
def test_the_folds_classes_pickle_and_copy_to_equal_instances(cls: type) -> None:
    # a snapshot pickles them; the preemption search deep-copies them
    one = cls(*ARGUMENTS[cls])
    assert pickle.loads(pickle.dumps(one)) == one
    assert copy.deepcopy(one) == one
    assert copy.copy(one) == one


def test_a_verdicts_rendered_message_is_not_part_of_its_value() -> None:
    plain = Verdict("Reason", ("sig",), "text")
    rendered = Verdict("Reason", ("sig",), "text", (), ["a rendered message"])
    assert plain == rendered and hash(plain) == hash(rendered)
    assert "rendered" not in repr(rendered)
