"""Workflows as code: a ``with`` block collects tasks; ``submit`` and ``run`` talk to the server.

::

    from dsched import Shell, Workflow

    with Workflow("etl", project="demo", params={"dt": "2024-01-01"}) as wf:
        extract = Shell("extract", "echo extracting $dt")
        load = Shell("load", "echo loading", retries=2, retry_interval=30)
        extract >> load

    final = wf.run()                 # submit (create or update + ONLINE), start, wait
    assert final.state == "SUCCEEDED"

Nothing is sent while the DAG is built, and :meth:`Workflow.to_spec` plus the same validation the
server runs (:func:`dsched.spec.check_workflow`) happen before the first RPC, so a broken DAG
fails fast and offline. Every workflow whose ``with`` block is entered is also reported to the
open :func:`collect` blocks: that is how ``dsched submit FILE.py`` finds the workflows of a file.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from types import TracebackType
from typing import Self

from dsched import coerce
from dsched.client import Client, default_client
from dsched.errors import FieldViolation, InvalidWorkflow
from dsched.options import FailureStrategy, Priority, TaskDependType
from dsched.results import WorkflowInfo, WorkflowInstance
from dsched.schedules import Schedule
from dsched.spec import WorkflowSpec, check_workflow
from dsched.tasks import Task, pop_workflow, push_workflow

DEFAULT_PROJECT = "default"

_collectors: list[list[Workflow]] = []
_collectors_lock = threading.Lock()


@contextmanager
def collect() -> Iterator[list[Workflow]]:
    """Collects every :class:`Workflow` whose ``with`` block is entered while this one is open.

    Yields:
        A list that fills up with the workflows, in the order their blocks were entered.
    """
    found: list[Workflow] = []
    with _collectors_lock:
        _collectors.append(found)
    try:
        yield found
    finally:
        with _collectors_lock:
            _collectors.remove(found)


def _record(workflow: Workflow) -> None:
    with _collectors_lock:
        for found in _collectors:
            if all(w is not workflow for w in found):
                found.append(workflow)


def _client(client: Client | None) -> Client:
    return client if client is not None else default_client()


class Workflow:
    """A workflow definition under construction.

    Args:
        name: unique within the project: letters, digits, ``.``, ``_``, ``-``.
        project: the project; None means :data:`DEFAULT_PROJECT` (the CLI's ``--project``
            fills it in for ``dsched submit``).
        description: free text.
        params: global parameters, visible to every task as environment variables.
        schedule: when it runs by itself: created (or updated) and put online with the workflow
            by :meth:`submit`.
    """

    def __init__(
        self,
        name: str,
        *,
        project: str | None = None,
        description: str = "",
        params: Mapping[str, object] | None = None,
        schedule: Schedule | None = None,
    ) -> None:
        self.name = name
        self.schedule = schedule
        self.project = project
        self.description = description
        self.params = coerce.params(params)
        self._tasks: dict[str, Task] = {}

    def __enter__(self) -> Self:
        push_workflow(self)
        _record(self)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        pop_workflow(self)

    def __repr__(self) -> str:
        return f"Workflow({self.name!r}, project={self.project!r}, tasks={len(self._tasks)})"

    @property
    def tasks(self) -> tuple[Task, ...]:
        """The tasks in the order they were created."""
        return tuple(self._tasks.values())

    def __getitem__(self, name: str) -> Task:
        """The task called ``name`` (KeyError if there is none)."""
        return self._tasks[name]

    def add(self, task: Task) -> None:
        """Adds ``task`` (task constructors call this).

        Raises:
            InvalidWorkflow: a task of the same name exists.
        """
        if task.name in self._tasks:
            index = list(self._tasks).index(task.name)
            raise InvalidWorkflow(
                f"workflow {self.name!r} already has a task named {task.name!r}",
                metadata={"workflow": self.name, "task": task.name},
                violations=[
                    FieldViolation(
                        f"workflow.tasks[{len(self._tasks)}].name",
                        f"duplicate task name {task.name!r} (also tasks[{index}])",
                    )
                ],
            )
        self._tasks[task.name] = task

    def to_spec(self) -> WorkflowSpec:
        """The definition as a plain value (not validated; see :meth:`validate`)."""
        return WorkflowSpec(
            project=self.project or DEFAULT_PROJECT,
            name=self.name,
            tasks=tuple(t.to_spec() for t in self._tasks.values()),
            description=self.description,
            params=dict(self.params),
        )

    def validate(self) -> WorkflowSpec:
        """Returns :meth:`to_spec` after checking it as the server will.

        Raises:
            InvalidWorkflow: with a field violation per problem (reason CYCLE_DETECTED for a
                cycle).
        """
        spec = self.to_spec()
        check_workflow(spec)
        return spec

    def submit(
        self, client: Client | None = None, *, expected_version: int | None = None
    ) -> WorkflowInfo:
        """Validates the workflow, then makes it the current ONLINE version on the server.

        Creates the project if it is missing. An unchanged workflow keeps its version; a
        changed one is taken OFFLINE, stored as a new version and taken ONLINE again.

        Args:
            client: the client to use; default :func:`dsched.client.default_client`.
            expected_version: the version this definition was based on (e.g. the ``version``
                of the :class:`~dsched.results.WorkflowInfo` it was read from). If someone
                stored another version since, :class:`~dsched.errors.Aborted` with reason
                VERSION_MISMATCH and nothing changes.
        """
        spec = self.validate()
        conn = _client(client)
        info = conn.put_workflow(spec, expected_version=expected_version)
        if self.schedule is not None:
            conn.put_schedule(info.project, info.name, self.schedule)
        return info

    def run(
        self,
        *,
        wait: bool = True,
        params: Mapping[str, object] | None = None,
        client: Client | None = None,
        timeout: float | None = None,
        start_tasks: Iterable[str] = (),
        task_depend_type: TaskDependType | str | None = None,
        failure_strategy: FailureStrategy | str | None = None,
        priority: Priority | str | None = None,
        worker_group: str = "",
        dry_run: bool = False,
        request_id: str | None = None,
    ) -> WorkflowInstance:
        """Submits the workflow and starts a run.

        Args:
            wait: block until the run is terminal and return its final state; otherwise return
                the new SUBMITTED instance at once.
            params: startup parameters; they override every other parameter.
            client: the client to use; default :func:`dsched.client.default_client`.
            timeout: with ``wait``, seconds to wait at most (then TimeoutError).
            start_tasks, task_depend_type, failure_strategy, priority, worker_group, dry_run,
                request_id: as for :meth:`dsched.Client.start_workflow`.
        """
        conn = _client(client)
        info = self.submit(conn)
        instance = conn.start_workflow(
            info.project,
            info.name,
            params=params,
            start_tasks=start_tasks,
            task_depend_type=task_depend_type,
            failure_strategy=failure_strategy,
            priority=priority,
            worker_group=worker_group,
            dry_run=dry_run,
            request_id=request_id,
        )
        if not wait:
            return instance
        return conn.wait(instance.id, timeout=timeout)
