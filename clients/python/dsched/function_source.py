"""A plain Python function as source text that runs somewhere else: the body of an ``@task``
(:mod:`dsched.python_task`) or of a PySpark job travels in the workflow definition and runs in
another interpreter, on a worker, long after the workflow file was read.

Only what the definition carries reaches that interpreter: the text of the ``def`` itself. So a
function is accepted only if that text is all it needs, and refused with a message saying what to
change otherwise (:class:`~dsched.errors.InvalidArgument`, raised before anything is sent):

- a plain ``def`` at the top level of a module whose source file Python can read (not a lambda, a
  method, a function defined inside another one, a coroutine or generator, nor one typed at the
  interactive prompt);
- no names from around it: no closure variables, and no module-level names other than builtins
  and the function's own name (an ``import`` at the top of the module does not travel; import
  inside the function instead);
- parameters passed by name (no ``*args``, ``**kwargs`` or positional-only ones), with literal
  defaults (``None``, numbers, strings, tuples...).

The text is the ``def`` dedented, with its decorators removed (``@task`` must not run again where
the function is called), and :meth:`FunctionSource.script` makes a complete program of it:
``from __future__ import annotations`` first (annotations such as ``df: pd.DataFrame`` are then not
evaluated, so their names need not exist), the ``def``, then a call with keyword arguments given as
literals.
"""

from __future__ import annotations

import ast
import builtins
import dis
import inspect
import math
import textwrap
import types
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from dsched.errors import FieldViolation, InvalidArgument

FUTURE = "from __future__ import annotations\n"
_LITERALS = (str, int, float, bool, type(None), bytes)


@dataclass(frozen=True, slots=True)
class FunctionSource:
    """A function as text: its ``name``, its ``def`` (``source``), and its parameter names with
    the ones that have a default."""

    name: str
    source: str
    parameters: tuple[str, ...]
    optional: frozenset[str]

    def script(self, kwargs: Mapping[str, object] | None = None) -> str:
        """A program that defines the function and calls it with ``kwargs`` (literal values:
        strings, numbers, booleans, None, and lists, tuples and dicts of them)."""
        args = dict(kwargs or {})
        unknown = sorted(set(args) - set(self.parameters))
        if unknown:
            raise _refuse(self.name, f"it takes no parameter {', '.join(unknown)}")
        missing = sorted(set(self.parameters) - self.optional - set(args))
        if missing:
            raise _refuse(self.name, f"no value given for {', '.join(missing)}")
        for key, value in args.items():
            if not _literal(value):
                raise _refuse(self.name, f"the value of {key} is not a literal: {value!r}")
        call = ", ".join(f"{key}={value!r}" for key, value in args.items())
        return f"{FUTURE}\n{self.source}\n\n{self.name}({call})\n"


def function_source(fn: Callable[..., object]) -> FunctionSource:
    """``fn`` as text (see the module); raises InvalidArgument if it cannot run from its text
    alone."""
    if not isinstance(fn, types.FunctionType):
        raise _refuse(repr(fn), "only a plain function (def) can be shipped")
    name = fn.__name__
    if name == "<lambda>":
        raise _refuse("a lambda", "a lambda has no source of its own: use a def")
    if "<locals>" in fn.__qualname__:
        raise _refuse(name, "it is defined inside another function: define it at module level")
    if fn.__qualname__ != name:
        raise _refuse(name, "it is a method: define a function at module level")
    if inspect.iscoroutinefunction(fn) or inspect.isgeneratorfunction(fn):
        raise _refuse(name, "coroutines and generators cannot be called as a task")
    if fn.__code__.co_freevars:
        raise _refuse(name, f"it uses variables around it: {', '.join(fn.__code__.co_freevars)}")
    outside = sorted(_outside_names(fn))
    if outside:
        raise _refuse(
            name,
            f"it uses module-level names that do not travel with it: {', '.join(outside)} "
            "(import or define them inside the function)",
        )
    node, source = _parse(fn)
    _check_parameters(name, node.args)
    params = [a.arg for a in (*node.args.args, *node.args.kwonlyargs)]
    optional = {a.arg for a in node.args.args[len(node.args.args) - len(node.args.defaults) :]}
    optional |= {
        a.arg for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults, strict=True) if d
    }
    return FunctionSource(name, source, tuple(params), frozenset(optional))


def _refuse(name: str, why: str) -> InvalidArgument:
    return InvalidArgument(
        f"cannot ship function {name}: {why}",
        reason="INVALID_ARGUMENT",
        metadata={"function": name},
        violations=[FieldViolation("function", why)],
    )


def _outside_names(fn: types.FunctionType) -> set[str]:
    """Global names ``fn`` (and functions and classes defined in it) reads, other than builtins
    and its own name."""
    allowed = set(dir(builtins)) | {fn.__name__}
    return {name for name in _global_loads(fn.__code__) if name not in allowed}


def _global_loads(code: types.CodeType) -> Iterator[str]:
    for instruction in dis.get_instructions(code):
        if instruction.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
            yield str(instruction.argval)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _global_loads(const)


def _parse(fn: types.FunctionType) -> tuple[ast.FunctionDef, str]:
    """The ``def`` node and its text without decorators, dedented."""
    try:
        text = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError) as exc:
        raise _refuse(fn.__name__, f"its source cannot be read ({exc})") from None
    tree = ast.parse(text)
    node = tree.body[0] if tree.body else None
    if not isinstance(node, ast.FunctionDef) or node.name != fn.__name__:
        raise _refuse(fn.__name__, "its source is not a def of that name")
    lines = text.splitlines()
    assert node.end_lineno is not None
    source = "\n".join(lines[node.lineno - 1 : node.end_lineno])
    return node, source


def _check_parameters(name: str, args: ast.arguments) -> None:
    if args.vararg or args.kwarg or args.posonlyargs:
        raise _refuse(name, "its parameters are passed by name: no *args, **kwargs or '/'")
    for default in (*args.defaults, *(d for d in args.kw_defaults if d is not None)):
        try:
            ast.literal_eval(default)
        except ValueError:
            raise _refuse(name, f"a default is not a literal: {ast.unparse(default)}") from None


def _literal(value: object) -> bool:
    if isinstance(value, _LITERALS):
        return not isinstance(value, float) or math.isfinite(value)
    if isinstance(value, list | tuple):
        return all(_literal(v) for v in value)
    if isinstance(value, dict):
        return all(_literal(k) and _literal(v) for k, v in value.items())
    return False
