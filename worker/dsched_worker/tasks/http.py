"""The HTTP task type: one HTTP request, made by the child program
:mod:`dsched_worker.programs.http` (:mod:`dsched_worker.tasks.child`: its own process group, the
spec on stdin, the log live), never inside the worker.

The worker adds its allow-list (``http_allow``, :mod:`dsched_worker.programs.allow`) to the spec
it sends: the task's definition has no say in it.
"""

from __future__ import annotations

from collections.abc import Sequence

from dsched.http_spec import HttpSpec, http_to_json
from dsched_server.protocol.execution import TaskExecution
from dsched_worker.programs.allow import parse_entry
from dsched_worker.tasks.base import OutputSink, RunningTask, SpawnError
from dsched_worker.tasks.child import ChildPrograms

PROGRAM = "dsched_worker.programs.http"


class HttpTaskType:
    """Starts HTTP attempts with ``children``; ``allow`` is the worker's allow-list of URL
    patterns (checked here, so that a bad entry stops the worker at start rather than failing
    every attempt)."""

    def __init__(self, *, children: ChildPrograms, allow: Sequence[str] = ()) -> None:
        for entry in allow:
            parse_entry(entry)  # raises ValueError naming the bad entry
        self._children = children
        self._allow = list(allow)

    async def start(self, execution: TaskExecution, output: OutputSink) -> RunningTask:
        if not isinstance(execution.kind, HttpSpec):
            raise SpawnError(f"not an HTTP task: {type(execution.kind).__name__}")
        spec = {"task": http_to_json(execution.kind), "allow": self._allow}
        return await self._children.start(PROGRAM, spec, execution, output)
