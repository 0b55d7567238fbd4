"""The error reasons: ``dsched.reasons.Reason`` equals the contract's ``ErrorReason`` enum, and the
source raises no reason that is not in it (a static scan of server/, worker/ and the SDK).

The scan reads every call of a ``DschedError`` class (and of its subclasses, wherever defined) and
every ``default_reason`` of those classes. A ``reason=`` argument must be a string literal, a
conditional between literals, a ``Reason`` member, or ``dsched.names.reason_for(violations, one of
those)``, so that this test can check it; anything else fails here rather than at run time (the
interceptor's run-time check is the backstop for the rest).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from dsched.names import PARAMETER_NAME_REASONS
from dsched.reasons import LISTED, PROTO_PREFIX, Reason
from dsched.v1 import error_reason_pb2

REPO = Path(__file__).resolve().parents[3]
SOURCE_ROOTS = ("server", "worker", "clients/python/dsched")
GENERATED = REPO / "clients/python/dsched/v1"
PROTO = "protos/dsched/v1/error_reason.proto"
HOW_TO_ADD = (
    "To add a reason <NAME>: append `ERROR_REASON_<NAME> = <next free number>;` with a comment "
    f'naming its status code to enum ErrorReason in {PROTO}, add `<NAME> = "<NAME>"` to class '
    "Reason in clients/python/dsched/reasons.py (same order), then run `make proto`. To retire "
    "one: remove it from Reason and turn its proto value into `reserved <number>; reserved "
    '"ERROR_REASON_<NAME>";`.'
)


@dataclass(frozen=True)
class Use:
    """A reason the source raises (``reason`` None: an argument the scan cannot resolve)."""

    reason: str | None
    where: str


def _proto_names() -> list[str]:
    numbers = error_reason_pb2.ErrorReason.items()
    return [name.removeprefix(PROTO_PREFIX) for name, number in sorted(numbers, key=lambda i: i[1])]


def _name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _values(node: ast.expr) -> Iterator[str | None]:
    """The reason strings an expression can evaluate to; None for one the scan cannot resolve."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value
    elif isinstance(node, ast.IfExp):
        yield from _values(node.body)
        yield from _values(node.orelse)
    elif (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "Reason"
    ):
        yield node.attr
    elif isinstance(node, ast.Call) and _name(node.func) == "reason_for" and len(node.args) == 2:
        # dsched.names.reason_for(violations, default): a parameter-name reason or the default.
        yield from (str(r) for r in PARAMETER_NAME_REASONS)
        yield from _values(node.args[1])
    else:
        yield None


def _error_classes(trees: Iterable[ast.Module]) -> set[str]:
    """Names of DschedError and of every class derived from it in the scanned source."""
    classes = {"DschedError"}
    defs = [n for t in trees for n in ast.walk(t) if isinstance(n, ast.ClassDef)]
    grown = True
    while grown:
        new = {d.name for d in defs if any(_name(b) in classes for b in d.bases)} - classes
        classes |= new
        grown = bool(new)
    return classes


def scan(sources: dict[str, str]) -> list[Use]:
    """Every reason that ``sources`` (file name -> Python text) can put into an error."""
    trees = {where: ast.parse(text) for where, text in sources.items()}
    classes = _error_classes(trees.values())
    uses: list[Use] = []
    for where, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _name(node.func) in classes:
                for kw in node.keywords:
                    if kw.arg == "reason":
                        uses += [Use(r, f"{where}:{node.lineno}") for r in _values(kw.value)]
            elif isinstance(node, ast.ClassDef) and node.name in classes:
                for stmt in node.body:
                    if isinstance(stmt, ast.Assign):
                        target, value = stmt.targets[0], stmt.value
                    elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
                        target, value = stmt.target, stmt.value
                    else:
                        continue
                    if _name(target) == "default_reason":
                        uses += [Use(r, f"{where}:{stmt.lineno}") for r in _values(value)]
    return uses


def _source_uses() -> list[Use]:
    files = [
        path
        for root in SOURCE_ROOTS
        for path in sorted((REPO / root).rglob("*.py"))
        if GENERATED not in path.parents
    ]
    assert len(files) > 50, f"the scan found only {len(files)} source files under {SOURCE_ROOTS}"
    return scan({str(p.relative_to(REPO)): p.read_text() for p in files})


def test_python_list_equals_the_proto_enum() -> None:
    proto = _proto_names()
    assert proto[0] == "UNSPECIFIED", "ErrorReason's zero value must be ERROR_REASON_UNSPECIFIED"
    python = [str(r) for r in Reason]
    assert all(r.name == r.value for r in Reason), "each Reason member's value is its own name"
    only_proto = sorted(set(proto[1:]) - set(python))
    only_python = sorted(set(python) - set(proto[1:]))
    assert not only_proto and not only_python and python == proto[1:], (
        f"{PROTO} and clients/python/dsched/reasons.py disagree: only in the proto {only_proto}, "
        f"only in Python {only_python} (or the order differs; keep the proto's). "
        "Did you run `make proto`? " + HOW_TO_ADD
    )


def test_the_source_raises_only_listed_reasons() -> None:
    unlisted: dict[str, list[str]] = {}
    for use in _source_uses():
        if use.reason is not None and use.reason not in LISTED:
            unlisted.setdefault(use.reason, []).append(use.where)
    assert not unlisted, (
        "reasons raised in the source but missing from the contract: "
        + "; ".join(f"{r} at {', '.join(w)}" for r, w in sorted(unlisted.items()))
        + ". "
        + HOW_TO_ADD
    )


def test_every_reason_argument_is_checkable() -> None:
    opaque = [use.where for use in _source_uses() if use.reason is None]
    assert not opaque, (
        f"reason= arguments this test cannot check at {', '.join(opaque)}: pass a string literal "
        "(or `a if cond else b` of literals, a dsched.reasons.Reason member, or "
        "dsched.names.reason_for(violations, one of those)) so the contract "
        "test sees every reason the server can send."
    )


def test_every_listed_reason_is_raised_somewhere() -> None:
    raised = {use.reason for use in _source_uses()}
    dead = sorted(LISTED - raised)
    assert not dead, (
        f"listed reasons that no source raises any more: {dead}. Retire them (or use them). "
        + HOW_TO_ADD
    )


def test_the_scan_sees_every_form_of_reason() -> None:
    # The scan must find what it claims to; otherwise the two tests above pass vacuously.
    sources = {
        "base.py": (
            "class DschedError(Exception):\n    default_reason = 'UNKNOWN'\n"
            "class NotFound(DschedError):\n    default_reason: str = 'NOT_FOUND'\n"
        ),
        "sub.py": (
            "from base import NotFound\n"
            "class Gone(NotFound):\n    default_reason = 'GONE'\n"
            "def f(c, r, errors):\n"
            "    raise errors.Gone('x', reason='A' if c else 'B')\n"
            "def g(r):\n"
            "    NotFound('x', reason=Reason.C)\n"
            "    NotFound('x', reason=r)\n"
            "    print('x', reason='NOT_AN_ERROR')\n"
            "    NotFound('x', reason=reason_for(v, 'D' if c else 'E'))\n"
        ),
    }
    found = sorted((u.reason or "?", u.where) for u in scan(sources))
    assert found == [
        ("?", "sub.py:8"),
        ("A", "sub.py:5"),
        ("B", "sub.py:5"),
        ("C", "sub.py:7"),
        ("D", "sub.py:10"),
        ("E", "sub.py:10"),
        ("GONE", "sub.py:3"),
        ("INVALID_PARAMETER_NAME", "sub.py:10"),
        ("NOT_FOUND", "base.py:4"),
        ("RESERVED_PARAMETER_NAME", "sub.py:10"),
        ("UNKNOWN", "base.py:2"),
    ]
