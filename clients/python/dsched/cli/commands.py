"""The client subcommands of ``dsched``: each takes the parsed arguments and a client, prints its
result to stdout and returns the exit code. Errors propagate to :func:`dsched.cli.main.main`, which
prints them and picks the exit code, so the handlers stay free of error plumbing."""

from __future__ import annotations

import argparse
import runpy
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from dsched import coerce
from dsched.cli import format as fmt
from dsched.cli import kinds
from dsched.cli.logs import LogFollower, Printer, event_line
from dsched.client import Client
from dsched.errors import FieldViolation, InvalidArgument, NotFound
from dsched.options import HistoryKind, TaskDependType
from dsched.results import InstanceEvent, ServerRole, WorkflowInstance
from dsched.states import WorkflowState
from dsched.workflow import collect

Handler = Callable[[argparse.Namespace, Client], int]

DEPEND_TYPES = {
    "only": TaskDependType.TASK_ONLY,
    "pre": TaskDependType.TASK_PRE,
    "post": TaskDependType.TASK_POST,
}


def _out(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def parse_params(pairs: list[str]) -> dict[str, str]:
    """``["a=1", "b=x=y"]`` -> ``{"a": "1", "b": "x=y"}``; a pair without ``=`` is an error."""
    params: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise InvalidArgument(f"--param expects NAME=VALUE, got {pair!r}")
        params[key] = value
    return params


def submit(args: argparse.Namespace, client: Client) -> int:
    """Runs a Python file, then submits every workflow it built (all validated before any)."""
    with collect() as found:
        runpy.run_path(args.file, run_name="__dsched_submit__")
    if not found:
        raise InvalidArgument(f"{args.file} defines no workflow (use `with Workflow(...):`)")
    for wf in found:
        if wf.project is None:
            wf.project = args.project
    for wf in found:
        wf.validate()  # all or nothing: a broken workflow stops the file before any RPC
    for wf in found:
        info = wf.submit(client)
        _out(f"{info.project}/{info.name}  version {info.version}  {info.release_state}")
    return 0


def run(args: argparse.Namespace, client: Client) -> int:
    """Starts a run; with --wait (or --logs) follows it and exits 0 only if it SUCCEEDED."""
    instance = client.start_workflow(
        args.project,
        args.workflow,
        params=parse_params(args.param),
        start_tasks=args.start_task,
        task_depend_type=DEPEND_TYPES[args.depend_type] if args.depend_type else None,
        failure_strategy=args.failure_strategy,
        priority=args.priority,
        worker_group=args.worker_group,
        dry_run=args.dry_run,
        dispatch_timeout=args.dispatch_timeout,
    )
    _out(
        f"instance {instance.id}  {instance.project}/{instance.workflow} "
        f"v{instance.workflow_version}  {instance.state}"
    )
    if not (args.wait or args.logs):
        return 0
    final = follow(client, instance, logs=args.logs, timeout=args.timeout)
    return 0 if final.state is WorkflowState.SUCCEEDED else 1


def follow(
    client: Client, instance: WorkflowInstance, *, logs: bool, timeout: float | None
) -> WorkflowInstance:
    """Prints the instance's events (and task logs) until it is terminal; returns it."""
    printer = Printer(sys.stdout)
    follower = LogFollower(client, printer) if logs else None

    def on_event(event: InstanceEvent) -> None:
        printer.line(event_line(event))
        if follower is not None:
            follower.on_event(event)

    final = client.wait(instance.id, timeout=timeout, on_event=on_event)
    if follower is not None:
        follower.join()
    reason = f"  ({final.state_reason})" if final.state_reason else ""
    printer.line(f"instance {final.id} {final.state} in {fmt.elapsed(final.duration)}{reason}")
    return final


def instances(args: argparse.Namespace, client: Client) -> int:
    """The newest instances, filtered; at most --limit of them."""
    found: list[WorkflowInstance] = []
    listing = client.iter_instances(
        project=args.project,
        workflow=args.workflow or "",
        states=args.state,
        page_size=min(args.limit, 1000),
    )
    for instance in listing:
        if len(found) >= args.limit:
            break
        found.append(instance)
    _out(fmt.instance_rows(found))
    return 0


def show(args: argparse.Namespace, client: Client) -> int:
    """An instance and all its task instances (superseded attempts included)."""
    instance = client.get_instance(args.instance)
    tasks = list(client.iter_task_instances(instance.id, include_superseded=True))
    try:
        definition = client.get_workflow(
            instance.project, instance.workflow, version=instance.workflow_version
        ).spec.tasks
    except NotFound:  # the version was deleted since: show the run without the task types
        definition = ()
    types = {t.name: kinds.kind_name(t.kind) for t in definition}
    _out(fmt.instance_header(instance))
    _out("")
    _out(fmt.task_rows(tasks, types if definition else None))
    details = kinds.detail_lines(definition)
    if details:
        _out("")
        _out(details)
    for extra in (fmt.task_reasons(tasks), fmt.task_outputs(tasks)):
        if extra:
            _out("")
            _out(extra)
    return 0


def logs(args: argparse.Namespace, client: Client) -> int:
    """Writes a task log to stdout as bytes; with -f, until the task instance is terminal."""
    out = sys.stdout.buffer
    for chunk in client.tail_log(args.task_instance, follow=args.follow):
        out.write(chunk.data)
        out.flush()
    return 0


def control(args: argparse.Namespace, client: Client) -> int:
    """pause | stop | resume | rerun | recover: prints the instance's state after the request."""
    action = {
        "pause": client.pause_instance,
        "stop": client.stop_instance,
        "resume": client.resume_instance,
        "rerun": client.rerun_instance,
        "recover": client.recover_failed_instance,
    }[args.command]
    instance = action(args.instance)
    _out(f"instance {instance.id}  {instance.state}")
    return 0


def workflows(args: argparse.Namespace, client: Client) -> int:
    """The project's workflows (current versions)."""
    rows = (
        (w.name, w.version, w.release_state, len(w.spec.tasks), fmt.when(w.update_time))
        for w in client.iter_workflows(args.project)
    )
    _out(fmt.table(("name", "version", "release", "tasks", "updated"), rows))
    return 0


def cluster(args: argparse.Namespace, client: Client) -> int:
    """The live masters and workers: latest heartbeat (with a worker's backlog), selection weight,
    uptime and, for masters, the cluster listener their workers report to."""
    # Uptime by this host's clock: a heartbeat's report time lags by up to an interval, and
    # cluster hosts keep their clocks in sync well enough for a display.
    now = datetime.now(UTC)
    rows = (
        (
            m.role,
            m.address,
            m.group,
            m.status,
            fmt.percent(m.cpu_usage),
            fmt.percent(m.memory_usage),
            f"{m.load_average:.2f}",
            fmt.percent(m.disk_usage),
            f"{m.slots_in_use}/{m.slots_total}",
            m.queued if m.role is ServerRole.WORKER else None,
            f"{m.weight:.1f}" if m.role is ServerRole.WORKER else None,
            m.cluster_address or None,
            fmt.elapsed(max(now - m.start_time, timedelta(0)) if m.start_time else None),
        )
        for m in client.cluster_members()
    )
    headers = (
        "role",
        "address",
        "group",
        "status",
        "cpu",
        "mem",
        "load",
        "disk",
        "slots",
        "queued",
        "weight",
        "cluster",
        "uptime",
    )
    _out(fmt.table(headers, rows))
    return 0


def info(args: argparse.Namespace, client: Client) -> int:
    """The answering server: version, API, role, address, start time, engine counters."""
    server = client.server_info()
    fields = [
        ("server", client.target),
        ("version", server.version),
        ("api", server.api_version),
        ("role", str(server.role or fmt.ABSENT)),
        ("address", server.address),
        ("started", fmt.when(server.start_time)),
    ]
    if server.counters:
        counters = sorted(server.counters.items())
        fields.append(("metrics", " ".join(f"{name}={value}" for name, value in counters)))
    _out("\n".join(f"{name + ':':<9}{value}" for name, value in fields))
    return 0


_AGE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_age(text: str) -> timedelta:
    """``30d``, ``12h``, ``90m``, ``45s`` or ``2w`` as a timedelta."""
    number, unit = text.strip()[:-1], text.strip()[-1:].lower()
    try:
        value = float(number)
    except ValueError:
        value = -1.0
    if unit not in _AGE_UNITS or not 0 <= value < 1e7:
        raise InvalidArgument(
            f"--older-than must be a number with a unit (s, m, h, d or w), e.g. 30d, not {text!r}",
            violations=[FieldViolation("--older-than", "not an age like 30d")],
        )
    return timedelta(seconds=value * _AGE_UNITS[unit])


def parse_kinds(text: str) -> list[HistoryKind]:
    """``request_ids,events`` as kinds (case-insensitive; ``-`` may stand for ``_``)."""
    return [coerce.enum_value(HistoryKind, k, "--what") for k in text.split(",") if k.strip()]


def cleanup(args: argparse.Namespace, client: Client) -> int:
    """Deletes (``--dry-run``: counts) the master's history older than ``--older-than``."""
    age, kinds = parse_age(args.older_than), parse_kinds(args.what)
    client.timeout = max(client.timeout, args.timeout)  # a long history takes a while
    tallies = client.clean_up_history(age, kinds, dry_run=args.dry_run)
    verb = "would delete" if args.dry_run else "deleted"
    rows = (
        (t.kind.value.lower(), t.count, fmt.when(t.oldest), fmt.when(t.newest)) for t in tallies
    )
    _out(fmt.table(("kind", verb, "oldest", "newest"), rows))
    if args.dry_run:
        _out("dry run: nothing was deleted")
    return 0
