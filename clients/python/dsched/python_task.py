"""PYTHON tasks in workflows as code: :class:`Python` runs a script, :func:`task` turns a plain
function into a task whose source ships in the definition::

    @task(retries=2)
    def summarise(dt: str, rows: str = "10") -> dict[str, object]:
        import json                     # imports go inside: only the def travels
        return {"count": int(rows) * 2, "day": dt}

    with Workflow("daily", project="demo", params={"dt": "2024-05-06"}):
        Shell("extract", "echo '${setValue(rows=42)}'") >> summarise()

Calling the decorated function inside a ``with Workflow(...)`` block creates the task (named after
the function unless ``name=`` says otherwise; other keywords are :class:`~dsched.tasks.Task`'s
options and :class:`Python`'s ``interpreter``). When it runs, each parameter of the function takes
the value of the task parameter of the same name (a string: global, local or an upstream task's
OUT parameter), or its default; a parameter with neither fails the attempt with a message saying
so. The function's return value, a dict or None, becomes OUT parameters: strings as they are,
other values as JSON. The original function stays reachable as ``summarise.fn`` (for unit tests).

The shipped program needs nothing of dsched on the worker: the function's text
(:mod:`dsched.function_source`) and a few lines that read the parameters and print
``${setValue(key=value)}`` lines. A value that cannot travel in such a line (a line break or
``)}``) fails the attempt rather than arriving cut.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, ParamSpec, TypeVar, Unpack, overload

from dsched.errors import FieldViolation, InvalidArgument
from dsched.function_source import FunctionSource, function_source
from dsched.names import param_name_problem
from dsched.python_spec import PythonSpec
from dsched.tasks import Task, TaskOptions

P = ParamSpec("P")
R = TypeVar("R")


class Python(Task):
    """Runs ``script`` with Python on a worker, in its own process group and working directory,
    like :class:`~dsched.tasks.Shell`: parameters are environment variables
    (``os.environ["dt"]``), a printed line ``${setValue(key=value)}`` sets an OUT parameter.
    ``interpreter``: an absolute path or a command name on the worker (default: the worker's
    ``python_interpreter`` setting, else the Python the worker runs on). Other keyword options
    are those of :class:`~dsched.tasks.Task`."""

    def __init__(
        self, name: str, script: str, *, interpreter: str = "", **options: Unpack[TaskOptions]
    ) -> None:
        self.script = script
        self.interpreter = interpreter
        super().__init__(name, **options)

    def kind(self) -> PythonSpec:
        return PythonSpec(script=self.script, interpreter=self.interpreter)


# The lines after the function's def: parameters in, OUT parameters out. Self-contained (the
# interpreter on the worker need not have dsched installed).
_MAIN = """

def _dsched_main_(fn, names, required):
    import json, os, sys
    missing = [n for n in required if n not in os.environ]
    if missing:
        sys.stderr.write(
            "error: %s() needs the parameter(s) %s: give the task (or the workflow, or an upstream "
            "task's OUT parameters) a value for each\\n" % (fn.__name__, ", ".join(missing))
        )
        sys.exit(1)
    result = fn(**{n: os.environ[n] for n in names if n in os.environ})
    if result is None:
        return
    if not isinstance(result, dict):
        sys.stderr.write("error: %s() returned %s; OUT parameters are a dict (or None)\\n"
                         % (fn.__name__, type(result).__name__))
        sys.exit(1)
    for key, value in result.items():
        text = value if isinstance(value, str) else json.dumps(value)
        if "\\n" in text or "\\r" in text or ")}" in text:
            sys.stderr.write("error: OUT parameter %r: its value holds a line break or ')}', "
                             "which a ${setValue(...)} line cannot carry\\n" % (key,))
            sys.exit(1)
        sys.stdout.write("${setValue(%s=%s)}\\n" % (key, text))


_dsched_main_(@CALL@)
"""


def function_script(shipped: FunctionSource) -> str:
    """The PYTHON task script that calls ``shipped`` with the task's parameters (see the
    module)."""
    for name in shipped.parameters:
        problem = param_name_problem(name)
        if problem is not None:
            raise InvalidArgument(
                f"cannot ship function {shipped.name}: its parameter {name} cannot be a task "
                f"parameter ({problem[1]})",
                metadata={"function": shipped.name},
                violations=[FieldViolation("function", problem[1], problem[0])],
            )
    required = tuple(n for n in shipped.parameters if n not in shipped.optional)
    main = _MAIN.replace("@CALL@", f"{shipped.name}, {shipped.parameters!r}, {required!r}")
    return f"from __future__ import annotations\n\n{shipped.source}\n{main}"


class TaskFunction(Generic[P, R]):
    """A function made into a PYTHON task by :func:`task`: calling it (inside a workflow) adds a
    task; ``fn`` is the function itself."""

    def __init__(self, fn: Callable[P, R], defaults: dict[str, Any]) -> None:
        self.fn = fn
        self.script = function_script(function_source(fn))
        self._defaults = defaults

    def __call__(self, name: str = "", **options: Any) -> Python:
        merged = {**self._defaults, **options}
        return Python(name or self.fn.__name__, self.script, **merged)


@overload
def task(fn: Callable[P, R], /) -> TaskFunction[P, R]: ...
@overload
def task(
    *, interpreter: str = "", **options: Unpack[TaskOptions]
) -> Callable[[Callable[P, R]], TaskFunction[P, R]]: ...
def task(
    fn: Callable[P, R] | None = None, /, **options: Any
) -> TaskFunction[P, R] | Callable[[Callable[P, R]], TaskFunction[P, R]]:
    """Makes ``fn`` a PYTHON task (see the module); ``@task`` or ``@task(retries=2, ...)`` with
    default options for the tasks it creates. Raises InvalidArgument at once if the function
    cannot run from its own text (:mod:`dsched.function_source`)."""
    if fn is not None:
        return TaskFunction(fn, {})

    def wrap(inner: Callable[P, R]) -> TaskFunction[P, R]:
        return TaskFunction(inner, dict(options))

    return wrap
