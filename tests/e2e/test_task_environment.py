"""A real ``dsched standalone`` process passes its tasks only the variables of its environment
that are allowed (the defaults plus ``DSCHED_TASK_ENV_ALLOW``)."""

from __future__ import annotations

from pathlib import Path

from dsched import Client, Shell, Workflow, WorkflowState
from tests.e2e.conftest import clean_env, start_standalone


def test_a_worker_passes_only_allowed_variables_to_its_tasks(tmp_path: Path) -> None:
    """The setting reaches the worker of a real process: DSCHED_TASK_ENV_ALLOW adds a variable
    and a prefix; other variables of the server's environment stay out of its tasks."""
    env = clean_env(
        DSCHED_TASK_ENV_ALLOW="SITE,WAREHOUSE_*",
        SITE="eu-1",
        WAREHOUSE_URL="jdbc:x",
        UNLISTED="secret",
        PYTHONDONTWRITEBYTECODE="1",
    )
    server = start_standalone(tmp_path / "server", env=env)
    dump = tmp_path / "env"
    try:
        with Client.connect(server.address) as client:
            with Workflow("envdump", project="env") as wf:
                Shell("dump", f"env -0 > '{dump}'")
            assert wf.run(client=client, timeout=60).state is WorkflowState.SUCCEEDED
    finally:
        code, _ = server.terminate()
    assert code == 0, server.output()[-2000:]
    seen = dict(e.split("=", 1) for e in dump.read_text().split("\0") if e)
    assert (seen["SITE"], seen["WAREHOUSE_URL"]) == ("eu-1", "jdbc:x")
    assert "UNLISTED" not in seen and "PYTHONDONTWRITEBYTECODE" not in seen
    assert not [k for k in seen if k.startswith("DSCHED_") and k not in IDENTITIES]


IDENTITIES = {
    "DSCHED_IDEMPOTENCY_KEY",
    "DSCHED_TASK_INSTANCE_ID",
    "DSCHED_WORKFLOW_INSTANCE_ID",
    "DSCHED_TASK_NAME",
    "DSCHED_ATTEMPT",
    "DSCHED_WORKER_ADDRESS",
    "DSCHED_WORKER_EPOCH",
    "DSCHED_FENCING_TOKEN",
}
