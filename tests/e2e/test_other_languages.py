"""The Go and TypeScript clients: each is generated from protos/ by its checked-in build script, and
its example runs against a real standalone server.

The example creates a project and a workflow, puts it online, starts it, watches the instance and
follows the log of its task ``hello`` while it runs; the test checks what it printed against what
the Python SDK reads from the same server. A rejected request shows that each client decodes the
contract's error details (the ErrorInfo reason and the BadRequest field).

The toolchains are Debian packages and pinned npm packages (``.ci/run`` installs them); a missing
one fails here with the build script's message naming what to install.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from dsched import Client, TaskState, WorkflowState
from tests.e2e.conftest import REPO, Standalone, clean_env

BUILD_TIMEOUT_S = 540.0  # a cold Go build of grpc on a loaded 2-core machine takes a few minutes
RUN_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Language:
    build: Path
    command: Callable[[str, str], list[str]]  # (server address, project) -> argv
    workflow: str
    greeting: str  # the value the example passes as the start parameter ``who``


LANGUAGES = {
    "go": Language(
        build=REPO / "clients/go/build.sh",
        command=lambda server, project: [
            str(REPO / "clients/go/build/bin/example"),
            *("-server", server, "-project", project),
        ],
        workflow="hello-go",
        greeting="go",
    ),
    "typescript": Language(
        build=REPO / "clients/typescript/build.sh",
        command=lambda server, project: [
            "node",
            str(REPO / "clients/typescript/dist/example.js"),
            *("--server", server, "--project", project),
        ],
        workflow="hello-ts",
        greeting="typescript",
    ),
}


@pytest.fixture(scope="module", params=sorted(LANGUAGES))
def language(request: pytest.FixtureRequest) -> Language:
    """A language whose client was just built by its build script (once per module)."""
    lang = LANGUAGES[request.param]
    built = subprocess.run(
        [str(lang.build)],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
        env=clean_env(),
        stdin=subprocess.DEVNULL,
    )
    assert built.returncode == 0, (
        f"{lang.build} failed:\n{built.stdout[-3000:]}{built.stderr[-3000:]}"
    )
    return lang


def _run(lang: Language, server: Standalone, project: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        lang.command(server.address, project),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        env=clean_env(),
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.slow
@pytest.mark.timeout(BUILD_TIMEOUT_S + 2 * RUN_TIMEOUT_S)
def test_the_example_runs_a_workflow_and_follows_a_log(
    language: Language, server: Standalone, client: Client, project: str
) -> None:
    ran = _run(language, server, project)
    assert ran.returncode == 0, f"exit {ran.returncode}:\n{ran.stdout}\n{ran.stderr}"
    lines = ran.stdout.splitlines()
    assert lines[0] == f"workflow {project}/{language.workflow} online", lines
    started = re.fullmatch(r"instance (\d+) SUBMITTED", lines[1])
    assert started, lines
    instance_id = int(started.group(1))
    assert lines[-1] == f"instance {instance_id} SUCCEEDED", lines

    # Every event of the run, in order, ending with the workflow's SUCCEEDED.
    events = [line.split(" ", 5) for line in lines if line.startswith("event ")]
    sequences = [int(e[1]) for e in events]
    assert sequences == sorted(set(sequences)) and len(sequences) >= 9, events
    assert events[-1][2:5] == ["STATE", "workflow", "SUCCEEDED"], events
    assert ["CLAIMED", "workflow", "RUNNING"] in [e[2:5] for e in events], events
    for task in ("hello", "bye"):
        states = [e[4] for e in events if e[3] == task]
        assert states[0] == "SUBMITTED" and states[-1] == "SUCCEEDED", (task, states)

    # The followed log, line by line, is the task's log as the Python SDK reads it.
    instance = client.get_instance(instance_id)
    assert (instance.project, instance.workflow, instance.state) == (
        project,
        language.workflow,
        WorkflowState.SUCCEEDED,
    )
    [hello] = [t for t in client.iter_task_instances(instance_id) if t.task_name == "hello"]
    assert hello.state is TaskState.SUCCEEDED
    followed = [
        line.removeprefix("log hello: ") for line in lines if line.startswith("log hello: ")
    ]
    assert followed[-1] == "end"
    stored = client.read_log(hello.id).data.decode()
    assert followed[:-1] == stored.splitlines()
    greetings = [line for line in followed if line.startswith("hello from")]
    assert greetings == [f"hello from {language.greeting} {i}" for i in (1, 2, 3)]


@pytest.mark.slow
@pytest.mark.timeout(BUILD_TIMEOUT_S + RUN_TIMEOUT_S)
def test_the_example_reports_a_rejected_request_with_reason_and_field(
    language: Language, server: Standalone
) -> None:
    ran = _run(language, server, "no/slash")
    assert ran.returncode == 1, f"exit {ran.returncode}:\n{ran.stdout}\n{ran.stderr}"
    assert ran.stdout == ""
    assert re.search(
        r"\(InvalidArgument INVALID_ARGUMENT\); project\.name: .*path separator", ran.stderr
    ), ran.stderr
