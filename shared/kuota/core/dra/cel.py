"""Kubernetes' DRA CEL environment on top of the ``common-expression-language`` library.

Theory of operation: a DRA selector is a CEL expression over one variable,
``device`` (``driver``, ``attributes[domain][id]``, ``capacity[domain][id]``,
``allowMultipleAllocations``), that must return a bool. An unknown domain is an
empty map, a missing id inside a domain a runtime error (for the whole claim,
as in Kubernetes). cel-rust has no custom types, so a Quantity is the map
``{"@quantity": milli}`` and a semantic version ``{"@semver": "1.2.3"}``: map
equality gives Kubernetes' ``==``, and Kubernetes' functions (``quantity``,
``compareTo``, ``semver`` ...) are Python callbacks on each ``cel.Context``. A
:class:`DeviceEnv` is built once per device (converting a device costs about an
evaluation; evaluating on a prebuilt context is ~20x faster) and caches its
result per expression, the oldest results dropped first past
:data:`RESULTS_PER_DEVICE`; compiled programs are cached by text (LRU, 4096).
The library has no cost limit: the apiserver's estimated-cost check bounds an
expression (docs/design/claim-templates.md). Errors are :class:`SelectorError`
values, never raised. Gaps against cel-go: docs/design/dra-charging.md ("CEL").
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import cel
import cel.stdlib

from kuota.api.semver import Semver as _Semver
from kuota.api.semver import parse_semver
from kuota.quantity import MAX_MILLI, MILLI, QuantityError, parse_quantity

# cel-rust logs every failing Python callback at WARNING on the "cel" logger
# before raising; the failure reaches us as an exception and is reported as a
# SelectorError, so the log line is noise. A filter on that one logger, not a
# change to the logging configuration.
logging.getLogger("cel").addFilter(lambda record: record.levelno > logging.WARNING)

MAX_EXPRESSION_LENGTH = 10 * 1024  # Kubernetes' CELSelectorExpressionMaxLength
# Per DeviceEnv: the results of this many distinct expressions, and activations
# for this many sets of missing domains, are kept (#23 item 6: a tenant's
# templates can name any number of expressions). First in, first out.
RESULTS_PER_DEVICE = 1024
CONTEXTS_PER_DEVICE = 32
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_Q = "@quantity"
_V = "@semver"


@dataclass(frozen=True, slots=True)
class SelectorError:
    """A selector that cannot be used: it does not compile, fails while evaluating
    against a device, or does not return a bool."""

    expression: str
    message: str
    phase: str  # "compile" | "runtime"

    def __str__(self) -> str:
        return f"CEL expression {self.expression!r}: {self.message}"


@dataclass(frozen=True, slots=True)
class CompiledSelector:
    expression: str
    program: Any  # cel.Program
    # Literal domains indexed as device.attributes['d'] / device.capacity['d'];
    # a device lacking one gets an empty map there, as in Kubernetes.
    attribute_domains: tuple[str, ...]
    capacity_domains: tuple[str, ...]


# --------------------------------------------------------------------------- values


def quantity_value(milli: int) -> dict[str, int]:
    """The CEL representation of a Quantity of ``milli`` milli-units."""
    return {_Q: milli}


def semver_value(text: str) -> dict[str, str]:
    """The CEL representation of a semantic version (``text`` must parse)."""
    parsed = parse_semver(text)
    if parsed is None:
        raise ValueError(f"{text!r} is not a semantic version")
    return {_V: _semver_text(parsed)}


def _semver_text(v: _Semver) -> str:
    return f"{v[0]}.{v[1]}.{v[2]}" + ("-" + ".".join(v[3]) if v[3] else "")


def _semver_cmp(a: _Semver, b: _Semver) -> int:
    if a[:3] != b[:3]:
        return -1 if a[:3] < b[:3] else 1
    pa, pb = a[3], b[3]
    if pa == pb:
        return 0
    if not pa or not pb:  # a release ranks above its pre-releases
        return 1 if not pa else -1
    for x, y in zip(pa, pb, strict=False):
        if x == y:
            continue
        xn, yn = x.isdigit(), y.isdigit()
        if xn and yn:
            return -1 if int(x) < int(y) else 1
        if xn != yn:  # numeric identifiers rank below alphanumeric ones
            return -1 if xn else 1
        return -1 if x < y else 1
    return -1 if len(pa) < len(pb) else 1


# --------------------------------------------------------------------------- functions


def _no_overload(name: str, *args: object) -> TypeError:
    kinds = ", ".join(_kind(a) for a in args)
    return TypeError(f"no such overload: {name}({kinds})")


def _kind(value: object) -> str:
    if isinstance(value, dict) and len(value) == 1:
        if _Q in value:
            return "Quantity"
        if _V in value:
            return "Semver"
    return type(value).__name__


def _milli(value: object) -> int | None:
    if isinstance(value, dict) and len(value) == 1 and isinstance(value.get(_Q), int):
        return int(value[_Q])
    return None


def _ver(value: object) -> _Semver | None:
    if isinstance(value, dict) and len(value) == 1 and isinstance(value.get(_V), str):
        return parse_semver(value[_V])
    return None


def _checked(milli: int) -> dict[str, int]:
    if abs(milli) > MAX_MILLI:
        raise OverflowError("quantity overflow")
    return quantity_value(milli)


def _int_arg(name: str, q: object, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _no_overload(name, q, value)
    return value


def _fn_quantity(s: object) -> dict[str, int]:
    if not isinstance(s, str):
        raise _no_overload("quantity", s)
    try:
        return quantity_value(parse_quantity(s, allow_negative=True))
    except QuantityError as exc:
        raise ValueError(str(exc)) from None


def _fn_is_quantity(s: object) -> bool:
    if not isinstance(s, str):
        raise _no_overload("isQuantity", s)
    try:
        parse_quantity(s, allow_negative=True)
    except QuantityError:
        return False
    return True


def _compare(name: str, a: object, b: object) -> int:
    qa, qb = _milli(a), _milli(b)
    if qa is not None and qb is not None:
        return (qa > qb) - (qa < qb)
    va, vb = _ver(a), _ver(b)
    if va is not None and vb is not None:
        return _semver_cmp(va, vb)
    raise _no_overload(name, a, b)


def _fn_sign(q: object) -> int:
    m = _milli(q)
    if m is None:
        raise _no_overload("sign", q)
    return (m > 0) - (m < 0)


def _fn_as_integer(q: object) -> int:
    m = _milli(q)
    if m is None:
        raise _no_overload("asInteger", q)
    if m % MILLI or not _INT64_MIN <= m // MILLI <= _INT64_MAX:
        raise ValueError("cannot convert value to integer")
    return m // MILLI


def _fn_is_integer(q: object) -> bool:
    m = _milli(q)
    if m is None:
        raise _no_overload("isInteger", q)
    return m % MILLI == 0


def _fn_as_float(q: object) -> float:
    m = _milli(q)
    if m is None:
        raise _no_overload("asApproximateFloat", q)
    return m / MILLI


def _arith(name: str, sign: int) -> Callable[[object, object], dict[str, int]]:
    def fn(q: object, other: object) -> dict[str, int]:
        m = _milli(q)
        if m is None:
            raise _no_overload(name, q, other)
        o = _milli(other)
        if o is None:
            o = _int_arg(name, q, other) * MILLI
        return _checked(m + sign * o)

    return fn


def _fn_mul(q: object, n: object) -> dict[str, int]:
    m = _milli(q)
    if m is None:
        raise _no_overload("mul", q, n)
    return _checked(m * _int_arg("mul", q, n))


def _fn_semver(s: object, normalize: object = False) -> dict[str, str]:
    if not isinstance(s, str) or not isinstance(normalize, bool):
        raise _no_overload("semver", s, normalize)
    v = parse_semver(s, normalize=normalize)
    if v is None:
        raise ValueError(f"could not parse {s!r} as semver")
    return {_V: _semver_text(v)}


def _fn_is_semver(s: object, normalize: object = False) -> bool:
    if not isinstance(s, str) or not isinstance(normalize, bool):
        raise _no_overload("isSemver", s, normalize)
    return parse_semver(s, normalize=normalize) is not None


def _version_part(name: str, index: int) -> Callable[[object], int]:
    def fn(v: object) -> int:
        parsed = _ver(v)
        if parsed is None:
            raise _no_overload(name, v)
        return (parsed[0], parsed[1], parsed[2])[index]

    return fn


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "quantity": _fn_quantity,
    "isQuantity": _fn_is_quantity,
    "sign": _fn_sign,
    "isGreaterThan": lambda a, b: _compare("isGreaterThan", a, b) > 0,
    "isLessThan": lambda a, b: _compare("isLessThan", a, b) < 0,
    "compareTo": lambda a, b: _compare("compareTo", a, b),
    "asInteger": _fn_as_integer,
    "isInteger": _fn_is_integer,
    "asApproximateFloat": _fn_as_float,
    "add": _arith("add", 1),
    "sub": _arith("sub", -1),
    "mul": _fn_mul,
    "semver": _fn_semver,
    "isSemver": _fn_is_semver,
    "major": _version_part("major", 0),
    "minor": _version_part("minor", 1),
    "patch": _version_part("patch", 2),
}


def _new_context(variables: dict[str, Any]) -> Any:
    ctx = cel.Context(variables=variables, functions=_FUNCTIONS)
    cel.stdlib.add_stdlib_to_context(ctx, ["strings"])  # cel-go's ext.Strings, as in Kubernetes
    return ctx


# --------------------------------------------------------------------------- compile


_DOMAIN_INDEX = re.compile(
    r"""\b(attributes|capacity)\s*\[\s*(?:"((?:[^"\\]|\\.)*)"|'((?:[^'\\]|\\.)*)')\s*\]"""
)


@lru_cache(maxsize=4096)
def compile_selector(expression: str) -> CompiledSelector | SelectorError:
    """Compile a DRA selector once; the result (or the error) is cached by text."""
    if not isinstance(expression, str) or not expression.strip():
        return SelectorError(str(expression), "expression is empty", "compile")
    if len(expression) > MAX_EXPRESSION_LENGTH:
        return SelectorError(
            expression[:64] + "...",
            f"expression is {len(expression)} characters long, more than the limit of "
            f"{MAX_EXPRESSION_LENGTH}",
            "compile",
        )
    source = rewrite_bind(expression)
    try:
        program = cel.compile(source)
    except Exception as exc:  # the library reports syntax errors as ValueError
        return SelectorError(expression, "compilation failed: " + _clean(str(exc)), "compile")
    except BaseException as exc:  # a panic inside the Rust extension
        if isinstance(exc, KeyboardInterrupt | SystemExit | GeneratorExit):
            raise
        return SelectorError(expression, "compilation failed: " + _clean(str(exc)), "compile")
    attrs: set[str] = set()
    caps: set[str] = set()
    for m in _DOMAIN_INDEX.finditer(expression):
        domain = m.group(2) if m.group(2) is not None else m.group(3)
        (attrs if m.group(1) == "attributes" else caps).add(domain)
    return CompiledSelector(expression, program, tuple(sorted(attrs)), tuple(sorted(caps)))


def _clean(message: str) -> str:
    """Shorten the library's messages to the part that names the problem."""
    errors = [
        m
        for m in re.finditer(r"ERROR: <input>:(\d+):(\d+): (.*)", message)
        # the parser's own bookkeeping (``Incomplete `IndexContext`!`` at column 1),
        # reported beside the real syntax error
        if not re.match(r"Incomplete `\w+`!", m.group(3).strip())
    ]
    if errors:  # a syntax error: name the position, drop the caret drawing
        m = errors[0]
        return f"line {m.group(1)}, column {m.group(2)}: {_syntax(m.group(3).strip())}"
    marker = "Python function call failed: "
    if marker in message:
        message = message[message.index(marker) + len(marker) :]
        message = message.split(". Check function arguments", 1)[0].removeprefix("ValueError: ")
    elif message.startswith("No such overload"):
        message = message.split(". ", 1)[0]
    elif message.startswith("Undefined variable or function"):
        message = message.split(". Check", 1)[0]
    return message.strip()


def _syntax(text: str) -> str:
    """The parser's words for a syntax error, in plain ones: ``mismatched input
    '<EOF>' expecting {'[', '{', ...}`` is an expression that ends too early."""
    m = re.match(r"Syntax error: mismatched input '(.*)' expecting", text)
    if m:
        found = m.group(1)
        if found == "<EOF>":
            return "syntax error: the expression ends too early"
        return f"syntax error: unexpected {found!r}"
    m = re.match(r"Syntax error: extraneous input '(.*)' expecting <EOF>", text)
    if m:
        return f"syntax error: unexpected {m.group(1)!r} after a complete expression"
    if text.startswith("Syntax error: "):
        text = "syntax error: " + text.removeprefix("Syntax error: ")
    return text.replace("'<EOF>'", "the end of the expression")


def rewrite_bind(expression: str) -> str:
    """Rewrite ``cel.bind(v, init, body)`` (cel-go's ext.Bindings, which Kubernetes'
    DRA environment offers) into ``([init].map(v, body)[0])``, which binds ``v`` the
    same way with the macros cel-rust has. Text inside string literals is left alone."""
    if "cel.bind" not in expression:
        return expression
    out: list[str] = []
    i, n = 0, len(expression)
    while i < n:
        end = _string_end(expression, i)
        if end > i:
            out.append(expression[i:end])
            i = end
            continue
        if expression.startswith("cel.bind", i) and (i == 0 or not _ident(expression[i - 1])):
            j = i + len("cel.bind")
            while j < n and expression[j].isspace():
                j += 1
            args = _call_args(expression, j) if j < n and expression[j] == "(" else None
            if args is not None:
                parts, close = args
                var = parts[0].strip() if len(parts) == 3 else ""
                if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", var):
                    init, body = rewrite_bind(parts[1].strip()), rewrite_bind(parts[2].strip())
                    out.append(f"([{init}].map({var}, {body})[0])")
                    i = close + 1
                    continue
        out.append(expression[i])
        i += 1
    return "".join(out)


def _ident(ch: str) -> bool:
    return ch.isalnum() or ch in "_."


def _string_end(s: str, i: int) -> int:
    """If a string literal starts at ``i`` return the index after it, else ``i``."""
    j = i
    raw = False
    while j < len(s) and s[j] in "rRbB" and j - i < 2:
        raw = raw or s[j] in "rR"
        j += 1
    if j >= len(s) or s[j] not in "'\"" or (j > i and i > 0 and _ident(s[i - 1])):
        return i
    quote = s[j] * 3 if s.startswith(s[j] * 3, j) else s[j]
    k = j + len(quote)
    while k < len(s):
        if not raw and s[k] == "\\":
            k += 2
            continue
        if s.startswith(quote, k):
            return k + len(quote)
        k += 1
    return len(s)


def _call_args(s: str, open_at: int) -> tuple[list[str], int] | None:
    """Split the arguments of the call whose ``(`` is at ``open_at``."""
    depth, start, parts = 0, open_at + 1, []
    k = open_at
    while k < len(s):
        end = _string_end(s, k)
        if end > k:
            k = end
            continue
        ch = s[k]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                parts.append(s[start:k])
                return parts, k
        elif ch == "," and depth == 1:
            parts.append(s[start:k])
            start = k + 1
        k += 1
    return None


# --------------------------------------------------------------------------- evaluate


class DeviceEnv:
    """One device as the CEL variable ``device``, with a result cache per expression.

    ``attributes`` values are CEL-ready: int, bool, str, or :func:`semver_value`.
    ``capacity`` values are milli-units.
    """

    __slots__ = ("_attrs", "_caps", "_contexts", "_driver", "_multi", "_results")

    def __init__(
        self,
        *,
        driver: str,
        attributes: Iterable[tuple[str, object]],
        capacity: Iterable[tuple[str, int]],
        allow_multiple_allocations: bool = False,
    ) -> None:
        self._driver = driver
        self._multi = allow_multiple_allocations
        self._attrs: dict[str, dict[str, object]] = {}
        self._caps: dict[str, dict[str, object]] = {}
        for name, value in attributes:
            domain, ident = split_qualified_name(name, driver)
            self._attrs.setdefault(domain, {})[ident] = value
        for name, milli in capacity:
            domain, ident = split_qualified_name(name, driver)
            self._caps.setdefault(domain, {})[ident] = quantity_value(milli)
        self._contexts: dict[tuple[tuple[str, ...], tuple[str, ...]], Any] = {}
        self._results: dict[str, bool | SelectorError] = {}

    # Snapshots pickle the fold's state. cel.Context objects (the per-device CEL
    # activations) are native and derived, so they are dropped and rebuilt lazily;
    # the cached results are plain data and travel with the state.
    def __getstate__(self) -> dict[str, object]:
        return {
            "_attrs": self._attrs,
            "_caps": self._caps,
            "_driver": self._driver,
            "_multi": self._multi,
            "_results": self._results,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            object.__setattr__(self, name, value)
        self._contexts = {}

    def matches(self, selector: CompiledSelector) -> bool | SelectorError:
        results = self._results
        cached = results.get(selector.expression)
        if cached is None:
            cached = self._evaluate(selector)
            if len(results) >= RESULTS_PER_DEVICE:
                del results[next(iter(results))]
            results[selector.expression] = cached
        return cached

    def _evaluate(self, selector: CompiledSelector) -> bool | SelectorError:
        key = (
            tuple(d for d in selector.attribute_domains if d not in self._attrs),
            tuple(d for d in selector.capacity_domains if d not in self._caps),
        )
        ctx = self._contexts.get(key)
        if ctx is None:
            attrs = dict(self._attrs) | {d: {} for d in key[0]}
            caps = dict(self._caps) | {d: {} for d in key[1]}
            device = {
                "driver": self._driver,
                "attributes": attrs,
                "capacity": caps,
                "allowMultipleAllocations": self._multi,
            }
            ctx = _new_context({"device": device})
            if len(self._contexts) >= CONTEXTS_PER_DEVICE:
                del self._contexts[next(iter(self._contexts))]
            self._contexts[key] = ctx
        expr = selector.expression
        try:
            result = selector.program.execute(ctx)
        except KeyError as exc:
            return SelectorError(expr, f"no such key: {exc.args[0] if exc.args else ''}", "runtime")
        except Exception as exc:
            return SelectorError(expr, _clean(str(exc)) or type(exc).__name__, "runtime")
        except BaseException as exc:  # a panic inside the Rust extension
            if isinstance(exc, KeyboardInterrupt | SystemExit | GeneratorExit):
                raise
            return SelectorError(expr, _clean(str(exc)) or type(exc).__name__, "runtime")
        if not isinstance(result, bool):
            return SelectorError(
                expr, f"must evaluate to bool, not {_kind(result)} ({result!r:.40})", "runtime"
            )
        return result


def split_qualified_name(name: str, driver: str) -> tuple[str, str]:
    """``gpu.nvidia.com/profile`` -> (``gpu.nvidia.com``, ``profile``); a bare name
    belongs to the driver's domain."""
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (driver, name)
