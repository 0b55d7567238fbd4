"""Exactly-once recorded execution on a healthy server: every task of a 20-task DAG appends its
idempotency key and attempt to a ledger; afterwards each task has exactly one line (none lost, none
duplicated), its key is that of its one accepted attempt, and no task ran before its upstream."""

from __future__ import annotations

from pathlib import Path

from dsched import Client, Shell, Task, Workflow, WorkflowState
from tests.e2e.conftest import Ledger, assert_ran, attempts

WIDTH = 6  # root, three layers of six, sink: 20 tasks


def test_twenty_task_dag_ledger_has_one_line_per_task(
    client: Client, project: str, tmp_path: Path
) -> None:
    ledger = Ledger(tmp_path / "ledger")
    upstream: dict[str, list[str]] = {}
    with Workflow("ledger20", project=project) as wf:
        root = Shell("root", ledger.append())
        layer: list[Task] = [root]
        for depth in range(3):
            nxt: list[Task] = [Shell(f"l{depth}-{i}", ledger.append()) for i in range(WIDTH)]
            for i, task in enumerate(nxt):
                # Each task waits for two of the previous layer (all of it after the root).
                parents = layer if len(layer) == 1 else [layer[i], layer[(i + 1) % WIDTH]]
                task.set_upstream(parents)
            layer = nxt
        sink = Shell("sink", ledger.append())
        sink.set_upstream(layer)
    for t in wf.tasks:
        upstream[t.name] = [u.name for u in t.upstream]
    assert len(wf.tasks) == 20

    final = wf.run(client=client, timeout=90)
    assert final.state is WorkflowState.SUCCEEDED
    tis = attempts(client, final.id)
    assert len(tis) == 20 and all(t.valid for t in tis)
    for ti in tis:
        assert_ran(ti)  # its DISPATCHED/RUNNING transitions were recorded, not just the end

    entries = ledger.entries()
    assert sorted(e.task for e in entries) == sorted(upstream), "lost or duplicated runs"
    assert len({e.key for e in entries}) == 20
    for entry in entries:
        assert entry.attempt == 1
        assert entry.key.startswith(f"{final.id}-") and entry.key.endswith("-1"), entry.key
    # Ledger order is run order: every task's line comes after its upstream's.
    position = {e.task: i for i, e in enumerate(entries)}
    for name, ups in upstream.items():
        for up in ups:
            assert position[up] < position[name], f"{name} ran before its upstream {up}"
