"""Fault-injection scenarios against a real cluster: F1 (a master killed), F2 (a worker killed),
F3 (a member frozen), F4 (ZooKeeper lost) and F11 (master churn).

Each test builds its own cluster (ZooKeeper with tickTime 1 s, a fresh PostgreSQL database, masters
and workers as processes, with the product's default session timeout and failover delay, 4 s each),
runs ledger workflows, injects
one fault, heals, drains, and checks. Every scenario keeps the invariants of
:meth:`Report.assert_invariants` (nothing lost or stuck, one instance per start, no duplicate fenced
effect) and then what is particular to it. Each prints one report line with its counts and timings:

- T_detect: fault -> the member's znode is gone (seen by a bystander ZooKeeper client);
- T_takeover: fault -> no unfinished instance is stamped with the dead master's epoch any more,
  or every attempt of the dead worker is NEED_FAULT_TOLERANCE;
- T_redispatch: fault -> every such attempt has a successor attempt;
- T_recover: fault -> every affected workflow instance is terminal.

Raw duplicates (two runs of one task) are reported, never hidden: they are the at-least-once
window. A failure here is a product finding; do not relax an assertion to make it pass.
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from functools import partial

import pytest

from dsched import Client, Unavailable
from dsched_worker.app import fence_deadline_for
from tests.cluster.checker import Report, check, drain
from tests.cluster.harness import Cluster, Member
from tests.cluster.workload import (
    PROJECT,
    attempts_of,
    busiest_master,
    busiest_worker,
    define,
    event_kinds,
    first_event_after,
    running_tasks,
    since,
    start_many,
    unfinished_of_epoch,
    wait_running,
)
from tests.e2e.conftest import eventually
from tests.tcp_proxy import TcpProxy

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

# > session timeout + failover delay (4 s each by default) + ZooKeeper's tick rounding, with room.
PAUSE_S = 14.0
DETECT_TIMEOUT_S = 30.0
TAKEOVER_TIMEOUT_S = 45.0
DRAIN_S = 90.0
# dsched's ZooKeeper client caps kazoo's reconnect back-off at 0.5 s, +-40 % (dsched_server/coord).
RECONNECT_BACKOFF_S = 0.7
DIAMOND = [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")]


def publish(capsys: pytest.CaptureFixture[str], report: Report) -> None:
    """Prints the report line past pytest's capture, so a plain run shows every scenario's."""
    with capsys.disabled():
        print(f"\n{report.line()}")


def task_rows(cluster: Cluster) -> int:
    return int(cluster.db.scalar("SELECT count(*) FROM task_instances"))


def observe(t0: float, until: float, probes: dict[str, Callable[[], bool]]) -> dict[str, float]:
    """Polls ``probes`` until the monotonic time ``until``; returns when each first held (seconds
    after ``t0``). Used while a fault is in force, whose length the test fixes in advance."""
    seen: dict[str, float] = {}
    while time.monotonic() < until:
        for name, probe in probes.items():
            if name not in seen and probe():
                seen[name] = since(t0)
        time.sleep(0.2)
    return seen


def gone(cluster: Cluster, member: Member, t0: float) -> Callable[[], bool]:
    """A probe: has ``member``'s znode gone since ``t0``?"""
    watcher = cluster.watcher
    assert watcher is not None
    return lambda: watcher.first(member.address, "gone", after=t0) is not None


def with_failover_event(
    cluster: Cluster, timings: dict[str, float], fault_wall: float | None
) -> dict[str, float]:
    """``timings`` with T_failover (fault -> first FAILOVER event) after T_detect."""
    assert fault_wall is not None
    at = first_event_after(cluster, "FAILOVER", fault_wall)
    extra = {} if at is None else {"T_failover": at}
    head = {k: v for k, v in timings.items() if k == "T_detect"}
    return head | extra | {k: v for k, v in timings.items() if k != "T_detect"}


def attempt_states(
    cluster: Cluster, logical: set[tuple[int, str]]
) -> dict[tuple[int, str], list[str]]:
    return {k: [a.state for a in attempts_of(cluster, *k)] for k in sorted(logical)}


# ------------------------------------------------------------------------------------------ F1


def test_kill9_master_mid_workflow(cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    """F1: the master owning the most running instances dies; the survivor takes them over and
    adopts their running attempts: no task runs twice, downstream tasks run once."""
    cluster.start(masters=2, workers=2)
    assert cluster.watcher is not None
    diamond = define(cluster, "diamond", {"a": 14, "b": 3, "c": 3, "d": 1}, DIAMOND)
    pair = define(cluster, "pair", {"a": 4, "b": 3}, [("a", "b")])
    started = start_many(cluster, diamond, 4) | start_many(cluster, pair, 2)
    wait_running(cluster, 6)
    victim, owned = busiest_master(cluster)

    t0 = cluster.kill9(victim)
    timings = {
        "T_detect": cluster.watcher.wait(victim.address, "gone", after=t0, timeout=DETECT_TIMEOUT_S)
        - t0
    }
    eventually(
        lambda: unfinished_of_epoch(cluster, victim.epoch) == 0,
        timeout=TAKEOVER_TIMEOUT_S,
        what=f"instances of dead epoch {victim.epoch} taken over",
    )
    timings["T_takeover"] = since(t0)
    drain(cluster, set(owned), DRAIN_S)
    timings["T_recover"] = since(t0)
    timings = with_failover_event(cluster, timings, victim.killed_wall)

    report = check(cluster, "F1 kill-9 master", started, timings=timings)
    publish(capsys, report)
    report.assert_invariants()
    assert set(event_kinds(cluster, "FAILOVER")) >= set(owned), "every owned instance failed over"
    assert report.reruns == 0, report.details
    assert report.raw_dup_concurrent == 0 and report.raw_dup_success == 0, report.details
    assert report.runs == task_rows(cluster), "each attempt ran exactly once"


# ------------------------------------------------------------------------------------------ F2


def test_kill9_worker_mid_task(cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    """F2a: a worker and its task process groups die; each of its attempts ends
    NEED_FAULT_TOLERANCE and runs once more elsewhere, without using a user retry (retries=0)."""
    cluster.start(masters=1, workers=2)
    assert cluster.watcher is not None
    chain = define(cluster, "chain", {"a": 10, "b": 2}, [("a", "b")], retries=0)
    started = start_many(cluster, chain, 4)
    wait_running(cluster, 4)
    victim, lost_runs = busiest_worker(cluster)
    affected = {(t.wi, t.task) for t in lost_runs}

    t0 = cluster.kill9(victim, tasks=True)
    timings = {
        "T_detect": cluster.watcher.wait(victim.address, "gone", after=t0, timeout=DETECT_TIMEOUT_S)
        - t0
    }

    def states() -> dict[tuple[int, str], list[str]]:
        return attempt_states(cluster, affected)

    eventually(
        lambda: all(s[0] == "NEED_FAULT_TOLERANCE" for s in states().values()),
        timeout=TAKEOVER_TIMEOUT_S,
        what="the dead worker's attempts NEED_FAULT_TOLERANCE",
    )
    timings["T_takeover"] = since(t0)
    eventually(
        lambda: all(len(s) >= 2 for s in states().values()),
        timeout=TAKEOVER_TIMEOUT_S,
        what="a new attempt of each",
    )
    timings["T_redispatch"] = since(t0)
    drain(cluster, {wi for wi, _ in affected}, DRAIN_S)
    timings["T_recover"] = since(t0)

    report = check(cluster, "F2 kill-9 worker+tasks", started, timings=timings)
    reasons = failover_reasons(cluster)
    report.notes["failover_reasons"] = dict(reasons)
    publish(capsys, report)
    report.assert_invariants()
    # Nothing listens at its address: known dead once its session ends, no failover delay.
    assert set(reasons) == {"nothing listens at its address any more"}, reasons
    for key, states_of in states().items():
        assert states_of == ["NEED_FAULT_TOLERANCE", "SUCCEEDED"], (key, states_of)
        old, new = attempts_of(cluster, *key)
        assert not old.valid and old.worker_epoch == victim.epoch, old
        assert new.worker_epoch != victim.epoch, new
        assert old.retry_times == new.retry_times == 0, "failover used up a user retry"
    assert report.reruns == len(affected), report.details
    assert report.raw_dup_concurrent == 0 and report.raw_dup_success == 0, report.details
    assert report.counters["tasks_failed_over"] >= 1, report.counters


def test_kill9_worker_pid_then_restart(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    """F2b: only the worker's pid dies, which would orphan its task processes (they lead sessions
    of their own); a supervisor restarts it on the same data directory at once. The worker's
    reaper, a process of its own reading a pipe only the worker held, sees the pipe close at the
    kill and SIGKILLs the recorded task groups at once, whenever (or whether) the worker comes
    back; the new process would kill any it still found recorded before it registers. Either way
    they are gone long before the masters re-dispatch the attempts (after the registry session
    expired): no two runs of a task overlap, even on a loaded host."""
    cluster.start(masters=1, workers=2)
    assert cluster.watcher is not None
    chain = define(cluster, "chain", {"a": 16, "b": 1}, [("a", "b")], retries=0)
    started = start_many(cluster, chain, 4)
    wait_running(cluster, 4)
    victim, lost_runs = busiest_worker(cluster)
    affected = {(t.wi, t.task) for t in lost_runs}
    orphans = cluster.task_pids(victim)
    assert orphans, "the worker runs no task process"

    t0 = cluster.kill9(victim, tasks=False)
    restarted = cluster.restart(victim)
    timings = {"T_restarted": since(t0)}
    timings["T_orphans_dead"] = cluster.wait_dead(orphans, timeout=20) - t0
    by_reaper = set(cluster.note_leftover_kills(victim))  # (its log: the reaper's stderr)
    at_restart = set(cluster.note_leftover_kills(restarted))
    timings["T_detect"] = (
        cluster.watcher.wait(victim.address, "gone", after=t0, timeout=DETECT_TIMEOUT_S) - t0
    )
    eventually(
        lambda: all(len(s) >= 2 for s in attempt_states(cluster, affected).values()),
        timeout=TAKEOVER_TIMEOUT_S,
        what="a new attempt of each orphaned task",
    )
    timings["T_redispatch"] = since(t0)
    drain(cluster, {wi for wi, _ in affected}, DRAIN_S)
    timings["T_recover"] = since(t0)

    report = check(cluster, "F2b kill-9 worker pid, restart", started, timings=timings)
    report.notes["failover_reasons"] = dict(failover_reasons(cluster))
    report.notes["orphans_killed"] = {"by_reaper": len(by_reaper), "at_restart": len(at_restart)}
    if by_reaper and victim.killed_wall is not None:  # the reaper's log times, to the ms
        reaped = max(cluster.deaths[p] for p in by_reaper) - victim.killed_wall
        report.notes["reaped_ms_after_kill"] = round(reaped * 1000)
    publish(capsys, report)
    report.assert_invariants()
    assert restarted.epoch != victim.epoch
    assert set(orphans) <= by_reaper | at_restart, (orphans, by_reaper, at_restart)
    for key, states_of in attempt_states(cluster, affected).items():
        assert states_of == ["NEED_FAULT_TOLERANCE", "SUCCEEDED"], (key, states_of)
    assert report.reruns == len(affected), report.details
    assert report.raw_dup_concurrent == 0 and report.raw_dup_success == 0, report.details


def test_kill9_worker_restarted_on_its_port_again_and_again(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    """F2c: the only worker, running 5 tasks, is killed (-9, its pid only) and restarted at once on
    the same address and port, as systemd or the local cluster restart it; four times in a row.
    The new incarnation replaces the old one's registry node under the same name, often before the
    masters look: each master must still see the new epoch, fail the old one's attempts over at
    once (the orphans are gone: the old incarnation's reaper killed them at the kill, or else the
    new process before it registered) and run them again on the new incarnation. Every instance
    finishes; nothing runs twice at once; nothing is lost."""
    cluster.start(masters=2, workers=1)
    long = define(cluster, "long", {"a": 20, "b": 1}, [("a", "b")], retries=0)
    started = start_many(cluster, long, 5)
    victim = cluster.workers()[0]
    victims: list[Member] = []
    timings: dict[str, float] = {}
    t_first = time.monotonic()
    for round_ in range(1, 5):
        eventually(
            partial(running_on, cluster, victim, 5),
            timeout=TAKEOVER_TIMEOUT_S,
            what=f"5 attempts running on {victim!r}",
        )
        killed_before = set(cluster.note_leftover_kills(victim))  # its own start's
        t0 = cluster.kill9(victim, tasks=False)
        restarted = cluster.restart(victim, same_port=True)
        assert (restarted.address, restarted.epoch > victim.epoch) == (victim.address, True)
        killed = set(cluster.note_leftover_kills(victim)) - killed_before
        killed |= set(cluster.note_leftover_kills(restarted))
        assert len(killed) >= 5, (victim.log_tail(), restarted.log_tail())
        eventually(
            partial(released, cluster, victim),
            timeout=TAKEOVER_TIMEOUT_S,
            what=f"the attempts of dead epoch {victim.epoch} failed over",
        )
        timings[f"T_takeover{round_}"] = since(t0)
        victims.append(victim)
        victim = restarted
    drain(cluster, set(started.values()), DRAIN_S)
    timings["T_recover"] = since(t_first)

    report = check(
        cluster, "F2c kill-9 worker pid, restart on its port x4", started, timings=timings
    )
    report.notes["failover_reasons"] = dict(failover_reasons(cluster))
    publish(capsys, report)
    report.assert_invariants()
    epochs = [v.epoch for v in victims]
    for wi in started.values():
        attempts = attempts_of(cluster, wi, "a")
        assert [a.state for a in attempts] == ["NEED_FAULT_TOLERANCE"] * 4 + ["SUCCEEDED"], attempts
        assert [a.worker_epoch for a in attempts[:4]] == epochs, (attempts, epochs)
        assert attempts[4].worker_epoch == victim.epoch
        assert all(a.retry_times == 0 for a in attempts), "failover used up a user retry"
    assert report.raw_dup_concurrent == 0 and report.raw_dup_success == 0, report.details
    assert report.orphans == 0, report.details
    for master in cluster.masters():  # every master's view ended on the live incarnation
        (member,) = cluster.client(master).cluster_members(role="WORKER")
        # Clients see no epochs (fencing tokens); the process id tells the incarnations apart.
        assert (member.address, member.pid) == (victim.address, victim.pid), member


def failover_reasons(cluster: Cluster) -> Counter[str]:
    """How the masters knew each failed-over attempt's worker was dead (the end of the
    NEED_FAULT_TOLERANCE event's message: "is back as epoch N", "nothing listens...")."""
    rows = cluster.db.query(
        "SELECT message FROM instance_events WHERE task_state = 'NEED_FAULT_TOLERANCE'"
    )
    return Counter(re.sub(r"epoch \d+", "epoch N", str(r[0]).split(") ", 1)[-1]) for r in rows)


def running_on(cluster: Cluster, worker: Member, count: int) -> bool:
    """Whether at least ``count`` attempts run on ``worker``'s incarnation."""
    running = [t for t in running_tasks(cluster) if (t.host, t.worker_epoch) == worker.incarnation]
    return len(running) >= count


def released(cluster: Cluster, worker: Member) -> bool:
    """Whether the masters hold no attempt on ``worker``'s incarnation any more."""
    held = cluster.db.scalar(
        "SELECT count(*) FROM task_instances WHERE host = $1 AND worker_epoch = $2 "
        "AND state IN ('DISPATCHED', 'RUNNING')",
        *worker.incarnation,
    )
    return int(held) == 0


# ------------------------------------------------------------------------------------------ F3


@pytest.mark.parametrize("task_s", [24.0, 7.0], ids=["task-outlives-pause", "task-ends-in-pause"])
def test_sigstop_worker_past_session(
    cluster: Cluster, capsys: pytest.CaptureFixture[str], task_s: float
) -> None:
    """F3a: a worker freezes (its tasks do not) past its session; its attempts are re-run
    elsewhere; after SIGCONT it fences itself, and its late reports and effects are refused.

    With ``task_s`` 24 the stale runs outlive the failover: the fence must refuse every effect
    they try (fenced_dup 0). With 7 they end *during* the pause, before the failover, while their
    attempt still owns its row: their effect is rightly accepted, the master cannot know, and the
    re-run adds a second. That is the at-least-once window: fenced_dup is reported and bounded
    by the attempts failed over, and no effect may land after its attempt was failed over.
    """
    cluster.start(masters=1, workers=2)
    assert cluster.watcher is not None
    straddle = define(cluster, "straddle", {"a": task_s, "b": 1}, [("a", "b")])
    started = start_many(cluster, straddle, 4)
    wait_running(cluster, 4)
    victim, frozen = busiest_worker(cluster)
    affected = {(t.wi, t.task) for t in frozen}

    def all_states(prefix: list[str]) -> Callable[[], bool]:
        return lambda: all(
            s[: len(prefix)] == prefix for s in attempt_states(cluster, affected).values()
        )

    t0 = cluster.pause(victim)
    timings = observe(
        t0,
        t0 + PAUSE_S,
        {
            "T_detect": gone(cluster, victim, t0),
            "T_takeover": all_states(["NEED_FAULT_TOLERANCE"]),
            "T_redispatch": all_states(["NEED_FAULT_TOLERANCE", "RUNNING"]),
        },
    )
    t_resume = cluster.resume(victim)
    resume_wall = time.time()
    back = cluster.watcher.wait(victim.address, "appeared", after=t_resume, timeout=30)
    timings["T_reregister"] = back - t0
    drain(cluster, {wi for wi, _ in affected}, DRAIN_S)
    timings["T_recover"] = since(t0)

    name = f"F3 SIGSTOP worker {PAUSE_S:g}s, task {task_s:g}s"
    report = check(cluster, name, started, timings=timings)
    report.notes["affected"] = len(affected)
    publish(capsys, report)
    outlives = task_s > PAUSE_S
    report.assert_invariants(tolerate=() if outlives else ("fenced_dup",))
    assert report.fenced_dup <= len(affected), report.details
    assert "T_detect" in timings and "T_takeover" in timings, "no failover during the pause"
    old_tis = set()
    for key in sorted(affected):
        old, new = attempts_of(cluster, *key)
        assert (old.state, new.state) == ("NEED_FAULT_TOLERANCE", "SUCCEEDED"), (key, old, new)
        assert old.worker_epoch == victim.epoch != new.worker_epoch, (old, new)
        old_tis.add(old.ti)
    late_ends = [
        line
        for line in cluster.ledger.lines()
        if line.ti in old_tis and line.kind == "end" and line.at > resume_wall
    ]
    if late_ends:  # the frozen worker's task finished after the pause: its report must bounce
        assert report.counters["stale_events"] >= 1, (late_ends, report.counters)


def test_sigstop_master_past_session(cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    """F3m: a master freezes past its session while its instances' tasks finish; the survivor
    takes them over; after SIGCONT the old master changes nothing and dispatches nothing."""
    cluster.start(masters=2, workers=2)
    assert cluster.watcher is not None
    steps = define(cluster, "steps", {"a": 6, "b": 6, "c": 2}, [("a", "b"), ("b", "c")])
    started = start_many(cluster, steps, 4)
    wait_running(cluster, 4)
    victim, owned = busiest_master(cluster)

    t0, paused_wall = cluster.pause(victim), time.time()
    timings = observe(
        t0,
        t0 + PAUSE_S,
        {
            "T_detect": gone(cluster, victim, t0),
            "T_takeover": lambda: unfinished_of_epoch(cluster, victim.epoch) == 0,
        },
    )
    cluster.resume(victim)
    drain(cluster, set(owned), DRAIN_S)
    timings["T_recover"] = since(t0)
    timings = with_failover_event(cluster, timings, paused_wall)

    report = check(cluster, f"F3m SIGSTOP master {PAUSE_S:g}s", started, timings=timings)
    # The resumed master either dropped its instances on LOST before acting on anything, or
    # acted first and had each write refused by the epoch fence; then it must count them.
    tried = victim.log().count("stale_write")
    old = cluster.counters([victim])
    report.notes.update(
        old_master_stale_write_logs=tried,
        old_master_stale_writes=old["stale_writes"],
        old_master_ownership_lost=old["ownership_lost"],
    )
    publish(capsys, report)
    report.assert_invariants()
    assert "T_takeover" in timings, "the instances were not taken over during the pause"
    assert set(event_kinds(cluster, "FAILOVER")) >= set(owned)
    assert report.reruns == 0, report.details
    assert report.raw_dup_concurrent == 0 and report.raw_dup_success == 0, report.details
    assert report.runs == task_rows(cluster), "a task was dispatched twice"
    if tried:
        assert old["stale_writes"] + old["ownership_lost"] >= 1, old
    final = cluster.db.query("SELECT id, epoch FROM workflow_instances WHERE id = ANY($1)", owned)
    assert all(int(epoch) != victim.epoch for _, epoch in final), final


# ------------------------------------------------------------------------------------------ F11


def test_master_churn_while_commands_stream(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    """F11: a third master comes and goes four times while starts stream in at 3/s for 30 s:
    exactly one instance per start, none lost or stuck."""
    cluster.start(masters=2, workers=2)
    tiny = define(cluster, "tiny", {"t": 1.0})
    clients = [cluster.client(m) for m in cluster.masters()]
    started: dict[str, int] = {}
    failures: list[BaseException] = []

    def feed(count: int = 90, rate: float = 3.0) -> None:
        begin = time.monotonic()
        for i in range(count):
            time.sleep(max(0.0, begin + i / rate - time.monotonic()))
            try:
                k = i % len(clients)
                started[f"churn-{i}"] = _start(clients[k:] + clients[:k], tiny, i)
            except BaseException as exc:  # reported by the test, never lost in the thread
                failures.append(exc)
                return

    feeder = threading.Thread(target=feed, name="chaos-feeder", daemon=True)
    t0 = time.monotonic()
    feeder.start()
    for _ in range(4):
        extra = cluster.add_master()
        time.sleep(3)
        assert cluster.stop(extra) == 0, extra.log_tail()
        time.sleep(1)
    feeder.join(60)
    assert not feeder.is_alive() and not failures, failures
    timings = {"T_stream": since(t0)}
    report = check(cluster, "F11 master churn", started, drain_timeout=DRAIN_S, timings=timings)
    waits = cluster.db.query(
        "SELECT max(extract(epoch FROM start_time - submit_time)), "
        "percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM start_time - submit_time))"
        " FROM workflow_instances"
    )[0]
    report.timings["max_cmd_wait"] = float(waits[0] or 0)
    report.timings["p95_cmd_wait"] = float(waits[1] or 0)
    publish(capsys, report)
    report.assert_invariants()
    assert report.starts == 90
    assert report.raw_dup_concurrent == 0 and report.raw_dup_success == 0, report.details


def _start(clients: list[Client], workflow: str, i: int) -> int:
    """One start with a fixed request id, tried on each base master in turn until one answers."""
    last: Exception | None = None
    for client in clients:
        try:
            return client.start_workflow(PROJECT, workflow, request_id=f"churn-{i}").id
        except Unavailable as exc:
            last = exc
    raise AssertionError(f"start {i}: no master answered: {last!r}")


# ------------------------------------------------------------------------------------------ F4


@pytest.mark.parametrize("gap_s", [0.3, 1.0], ids=["restart-at-once", "restart-after-1s"])
def test_zookeeper_restart_within_session(
    cluster: Cluster, capsys: pytest.CaptureFixture[str], gap_s: float
) -> None:
    """F4a: ZooKeeper is SIGKILLed and restarted ``gap_s`` later (the JVM's start-up, 1-2.5 s on
    this box, makes the rest of the outage). A starting ZooKeeper gives every session it restores a
    fresh timeout, so sessions survive, no instance fails over, and everything completes.

    Workers fence themselves after ``fence_deadline`` without the registry (4 s with the
    defaults), and a client may need up to its reconnect back-off (0.7 s) to notice ZooKeeper is
    back. An outage that leaves that much time before the fence must cause no failover at all; a
    longer one (the JVM can be slow to start under load) makes the workers fence and their attempts
    re-run, by design: then only the invariants are asserted, the re-runs reported and bounded.
    """
    cluster.start(masters=2, workers=2)
    assert cluster.watcher is not None
    straddle = define(cluster, "straddle", {"a": 8, "b": 3}, [("a", "b")])
    started = start_many(cluster, straddle, 4)
    wait_running(cluster, 4)

    t0 = time.monotonic()
    cluster.zk.kill()
    time.sleep(gap_s)
    cluster.zk.restart()
    timings = {"T_zk_down": since(t0)}
    drain(cluster, set(started.values()), DRAIN_S)
    timings["T_recover"] = since(t0)

    report = check(
        cluster, f"F4a ZooKeeper kill-9, restart after {gap_s:g}s", started, timings=timings
    )
    fence_s = fence_deadline_for(cluster.timeouts.session, cluster.timeouts.failover_delay)
    quiet = timings["T_zk_down"] + RECONNECT_BACKOFF_S < fence_s
    report.notes["within_fence_deadline"] = quiet
    publish(capsys, report)
    report.assert_invariants()
    assert report.counters["instances_taken_over"] == 0, report.counters
    assert not event_kinds(cluster, "FAILOVER"), "an instance failed over"
    if quiet:
        assert report.counters["tasks_failed_over"] == 0, report.counters
        assert report.reruns == 0 and report.runs == task_rows(cluster), report.details
        assert not cluster.watcher.gone_since(after=t0), cluster.watcher.gone_since(after=t0)
    else:
        assert report.reruns <= len(started), report.details  # each running attempt once
        assert report.raw_dup_concurrent == 0, report.details  # fenced before the re-run


STALL_S = 2.0


@pytest.mark.parametrize("stall", ["zookeeper-frozen", "worker-cut-off"])
def test_a_short_network_stall_fails_nothing_over(
    cluster: Cluster, capsys: pytest.CaptureFixture[str], stall: str
) -> None:
    """F4b: a 2 s network stall with the default timeouts, while the worker runs 6 tasks.
    ``zookeeper-frozen``: ZooKeeper is SIGSTOPped (nobody hears from it); ``worker-cut-off``: the
    worker's line to ZooKeeper (through a proxy) drops everything, then is reset, while the
    masters' lines stay up. Every session survives (4 s outlast the stall plus a reconnect), the
    worker does not fence itself (its deadline is 4 s), and nothing fails over or runs twice."""
    cluster.start(masters=2, workers=0)
    assert cluster.watcher is not None
    with TcpProxy(cluster.zk.port) as proxy:
        cut = cluster.add_worker(zookeeper=proxy.connect_string)
        straddle = define(cluster, "straddle", {"a": 12, "b": 2}, [("a", "b")])
        started = start_many(cluster, straddle, 6)
        wait_running(cluster, 6)

        t0 = time.monotonic()
        if stall == "zookeeper-frozen":
            cluster.zk.pause()
            time.sleep(STALL_S)
            cluster.zk.resume()
        else:
            proxy.block()
            time.sleep(STALL_S)
            proxy.heal()
        drain(cluster, set(started.values()), DRAIN_S)
        timings = {"T_recover": since(t0)}
        report = check(cluster, f"F4b {STALL_S:g}s stall, {stall}", started, timings=timings)
    fenced = [m.name for m in cluster.workers() if "fencing this worker" in m.log()]
    suspended = [m.name for m in cluster.members if "connection suspended" in m.log()]
    report.notes.update(suspended=suspended, fenced=fenced)
    publish(capsys, report)
    if stall == "worker-cut-off":
        assert cut.name in suspended, "the worker did not notice the stall"
    report.assert_invariants()
    assert not fenced, fenced
    assert report.counters["instances_taken_over"] == 0, report.counters
    assert report.counters["tasks_failed_over"] == 0, report.counters
    assert not event_kinds(cluster, "FAILOVER"), "an instance failed over"
    assert report.reruns == 0 and report.runs == task_rows(cluster), report.details
    assert not cluster.watcher.gone_since(after=t0), cluster.watcher.gone_since(after=t0)
