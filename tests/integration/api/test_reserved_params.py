"""No parameter can change how a task starts (issue 8, acceptance 1), on a real master and worker
over gRPC with real bash processes.

Every reserved name (as written and in a mixed case), two members of every reserved family (upper
and mixed case) and names outside the grammar are tried as (a) a global parameter of a new
definition, (b) a task's local parameter, (c) a global or local parameter of an UpdateWorkflow,
(d) a start parameter and (e) an OUT parameter an upstream task prints. Each attempt's value tries
to create its own marker file (``$(touch ...)``, which bash runs if the value reaches
``BASH_ENV``). Each call must answer INVALID_ARGUMENT with the exact reason and field, nothing may
be stored, and after the workflow the refused parameters were aimed at has run, no marker exists
and its task's environment holds none of them.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path

import pytest

from dsched.names import RESERVED_NAMES, RESERVED_PREFIXES
from dsched.v1 import enums_pb2, log_service_pb2
from tests.integration.api.conftest import (
    SUCCEEDED,
    Cluster,
    Failure,
    assert_invalid,
    failure,
    online_workflow,
    pb,
    res,
    run_to_end,
    shell,
    snapshot,
    start,
    task_instances,
    workflow,
)
from tests.reserved import KNOWN_DANGEROUS

pytestmark = pytest.mark.timeout(600)


def mixed(name: str) -> str:
    """``bAsH_eNv``: a spelling no case-sensitive comparison would catch."""
    return "".join(c.upper() if i % 2 else c.lower() for i, c in enumerate(name))


RESERVED = sorted({s for n in RESERVED_NAMES for s in (n, mixed(n))})
# Members known to run code or change identity, and two made-up ones per family (a family covers
# names added by later versions of its tools).
FAMILIES = sorted(
    {s for n in KNOWN_DANGEROUS for s in (n, mixed(n))}
    | {s for p in RESERVED_PREFIXES for s in (p + "X1", mixed(p + "Y2"))}
)
OUTSIDE_GRAMMAR = ["1abc", "a-b", "a b", "a.b", "é", "PATH;x", "IFS\n", "x" * 129, ""]
ATTEMPTS: list[tuple[str, str]] = [
    *((n, "RESERVED_PARAMETER_NAME") for n in RESERVED + FAMILIES),
    *((n, "INVALID_PARAMETER_NAME") for n in OUTSIDE_GRAMMAR),
]

PROJECT = "p"
PROBE = "probe"  # the workflow the refused parameters were aimed at


def field_key(name: str) -> str:
    """A name as it appears in a field path (cut after 128 characters)."""
    return repr(name) if len(name) <= 128 else repr(name[:128]) + "..."


class Markers:
    """One marker file per attempt; a value that would create it if it ever reached bash."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir()
        self._next = 0

    def value(self) -> str:
        self._next += 1
        return f"$(touch {self.root}/{self._next})"

    def created(self) -> list[str]:
        return sorted(p.name for p in self.root.iterdir())


async def probe(c: Cluster, dump: Path, *, online: bool = True) -> None:
    """The target: a workflow whose only task traces itself and dumps its environment."""
    tasks = [shell("show", f"set -x; env -0 > '{dump}'")]
    if online:
        await online_workflow(c, PROJECT, PROBE, tasks)
    else:
        await c.stub.CreateProject(pb.CreateProjectRequest(project=res.Project(name=PROJECT)))
        await c.stub.CreateWorkflow(
            pb.CreateWorkflowRequest(workflow=workflow(PROJECT, PROBE, tasks))
        )


async def go_online(c: Cluster) -> None:
    await c.stub.SetWorkflowReleaseState(
        pb.SetWorkflowReleaseStateRequest(
            project=PROJECT, name=PROBE, release_state=enums_pb2.RELEASE_STATE_ONLINE
        )
    )


def read_env(path: Path) -> dict[str, str]:
    return dict(e.decode().split("=", 1) for e in path.read_bytes().split(b"\0") if e)


def assert_not_in(env: dict[str, str], tried: Iterable[tuple[str, str]]) -> None:
    """No attempted (name, value) reached the environment; a name the worker passes on itself
    (``PATH``, ``HOME``, ...) keeps the worker's value."""
    for name, value in tried:
        assert env.get(name) != value, name
    assert not any("touch " in v for v in env.values()), env


Attempt = Callable[[str, str], Awaitable[Failure]]


def definition(c: Cluster, *, name: str, local: bool) -> Attempt:
    """(a)/(c): a CreateWorkflow or UpdateWorkflow with the parameter, global or local."""

    def call(key: str, value: str) -> Awaitable[Failure]:
        params = {key: value}
        task = shell("show", "true", params=params if local else {})
        wf = workflow(PROJECT, name, [task], params={} if local else params)
        if name == PROBE:
            return failure(c.stub.UpdateWorkflow(pb.UpdateWorkflowRequest(workflow=wf)))
        return failure(c.stub.CreateWorkflow(pb.CreateWorkflowRequest(workflow=wf)))

    return call


def start_params(c: Cluster) -> Attempt:
    def call(key: str, value: str) -> Awaitable[Failure]:
        request = pb.StartWorkflowRequest(project=PROJECT, workflow=PROBE, params={key: value})
        return failure(c.stub.StartWorkflow(request))

    return call


VECTORS: dict[str, tuple[Callable[[Cluster], Attempt], str]] = {
    "a-definition-global": (
        lambda c: definition(c, name="attempt", local=False),
        "workflow.params[{key}]",
    ),
    "b-definition-local": (
        lambda c: definition(c, name="attempt", local=True),
        "workflow.tasks[0].params[{key}]",
    ),
    "c-update-global": (lambda c: definition(c, name=PROBE, local=False), "workflow.params[{key}]"),
    "c-update-local": (
        lambda c: definition(c, name=PROBE, local=True),
        "workflow.tasks[0].params[{key}]",
    ),
    "d-start": (start_params, "params[{key}]"),
}


@pytest.mark.parametrize("vector", VECTORS)
async def test_refused_names_are_never_stored_and_never_reach_a_task(
    cluster: Cluster, tmp_path: Path, vector: str
) -> None:
    markers = Markers(tmp_path / "markers")
    dump = tmp_path / "env"
    updating = vector.startswith("c-")
    await probe(cluster, dump, online=not updating)  # UpdateWorkflow wants it OFFLINE
    make_call, field_path = VECTORS[vector]
    call = make_call(cluster)
    before = await snapshot(cluster)

    tried = []
    for key, reason in ATTEMPTS:
        value = markers.value()
        tried.append((key, value))
        got = await call(key, value)
        assert_invalid(got, field_path.format(key=field_key(key)), reason=reason)
        assert got.fields == [field_path.format(key=field_key(key))], got  # that field only

    assert await snapshot(cluster) == before  # no definition, version or instance stored
    if updating:
        await go_online(cluster)
    wf = await cluster.stub.GetWorkflow(pb.GetWorkflowRequest(project=PROJECT, name=PROBE))
    assert wf.workflow.version == 1
    inst = await start(cluster, PROJECT, PROBE, params={"fine": "1"})
    seen = await run_to_end(cluster, inst.id)
    assert seen.state == SUCCEEDED
    env = read_env(dump)
    assert env["fine"] == "1"  # the channel the refused names were aimed at works
    assert_not_in(env, tried)
    assert markers.created() == []


async def test_an_upstream_task_cannot_set_a_refused_name_downstream(
    cluster: Cluster, tmp_path: Path
) -> None:
    markers = Markers(tmp_path / "markers")
    dump = tmp_path / "env"
    tried = [(key, markers.value()) for key, _ in ATTEMPTS if "\n" not in key]  # one line each
    # Two upstream tasks, so that each one's notes about dropped keys stay under the cap.
    halves = [tried[: len(tried) // 2], tried[len(tried) // 2 :]]
    ups = []
    for i, half in enumerate(halves):
        lines = [f"echo '${{setValue({k}={v})}}'" for k, v in half]
        ups.append(shell(f"up{i}", "\n".join([*lines, f"echo '${{setValue(ok{i}=yes)}}'"])))
    down = shell("down", f"set -x; env -0 > '{dump}'", [u.name for u in ups])
    await online_workflow(cluster, PROJECT, "out", [*ups, down])

    inst = await start(cluster, PROJECT, "out")
    seen = await run_to_end(cluster, inst.id)

    assert seen.state == SUCCEEDED
    env = read_env(dump)
    assert (env["ok0"], env["ok1"]) == ("yes", "yes")  # OUT parameters do reach the next task
    assert_not_in(env, tried)
    assert markers.created() == []
    by_name = {t.task_name: t for t in await task_instances(cluster, inst.id)}
    for i, half in enumerate(halves):
        up = by_name[f"up{i}"]
        assert dict(up.out_params) == {f"ok{i}": "yes"}  # nothing refused was stored
        log = await read_log(cluster, up.id)
        for key, _ in half:
            expected = "is reserved" if key.upper() in reserved_upper() else "is not an identifier"
            assert (
                f"[dsched] OUT parameter dropped: parameter name {field_key(key)} {expected}"
                in (log)
            ), key


def reserved_upper() -> set[str]:
    return {n.upper() for n in RESERVED + FAMILIES}


async def read_log(c: Cluster, task_instance_id: int) -> str:
    reply = await c.logs.ReadTaskLog(
        log_service_pb2.ReadTaskLogRequest(task_instance_id=task_instance_id)
    )
    return bytes(reply.data).decode()


def test_the_attack_is_real_on_this_machine(tmp_path: Path) -> None:
    """The control: bash does run a command substitution in BASH_ENV, so a missing marker above
    means the parameter was stopped, not that the attack could not work here."""
    marker = tmp_path / "ran"
    env = {"PATH": os.environ["PATH"], "BASH_ENV": f"$(touch {marker})"}
    script = tmp_path / "script.sh"
    script.write_text("true\n")
    subprocess.run(["bash", "--noprofile", "--norc", str(script)], env=env, check=True, timeout=30)
    assert marker.exists()
