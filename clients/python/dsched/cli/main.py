"""The ``dsched`` command: argument parsing, dispatch, and the one place errors become exit codes.

Exit codes: 0 success; 1 a failed run or any error; 2 invalid input (INVALID_ARGUMENT, including
argparse usage errors); 130 interrupted with Ctrl-C. Errors print ``error: <message>`` and then
each field violation on its own line to stderr, never a traceback.

``standalone``, ``master`` and ``worker`` start servers. They import :mod:`dsched_server` only
inside their handler, so the client commands never load the server (or need its dependencies,
the extra ``dsched[server]``; without it these commands say so in one line).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from importlib import metadata

from dsched.cli import backfill, commands, datasource, schedule
from dsched.client import Client
from dsched.errors import DschedError, InvalidArgument
from dsched.options import FailureStrategy, Priority
from dsched.states import WorkflowState

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
# Server commands -> (module, entry point): dsched standalone, and the cluster processes.
_SERVER_ENTRIES = {
    "standalone": ("dsched_server.standalone", "main"),
    "master": ("dsched_server.processes", "master_main"),
    "worker": ("dsched_worker.main", "worker_main"),
}
SERVER_EXTRA = "pip install 'dsched[server]'"


def _version() -> str:
    try:
        return metadata.version("dsched")
    except metadata.PackageNotFoundError:
        return "unknown"


def _lower(kind: type[FailureStrategy] | type[Priority]) -> list[str]:
    return [m.value.lower() for m in kind]


def _common(suppress: bool) -> argparse.ArgumentParser:
    """--server and --project, accepted before and after the subcommand.

    On subcommands the defaults are suppressed, so that a value given before the subcommand is
    not overwritten by the subcommand's default.
    """
    parser = argparse.ArgumentParser(add_help=False)
    default: object = argparse.SUPPRESS
    parser.add_argument(
        "--server",
        metavar="HOST:PORT",
        default=default if suppress else None,
        help="master address (default: $DSCHED_SERVER, else 127.0.0.1:5678)",
    )
    parser.add_argument(
        "--project",
        default=default if suppress else "default",
        help='project of workflows and instances (default: "default")',
    )
    return parser


def _add_run(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: list[argparse.ArgumentParser]
) -> None:
    p = sub.add_parser("run", parents=common, help="start a workflow (and follow it)")
    p.add_argument("workflow")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("--start-task", action="append", default=[], metavar="TASK")
    p.add_argument("--depend-type", choices=sorted(commands.DEPEND_TYPES))
    p.add_argument("--failure-strategy", choices=_lower(FailureStrategy))
    p.add_argument("--priority", choices=_lower(Priority))
    p.add_argument("--worker-group", default="", metavar="GROUP")
    p.add_argument("--dry-run", action="store_true", help="run the engine, not the tasks")
    p.add_argument(
        "--dispatch-timeout",
        type=float,
        metavar="SECONDS",
        help="fail a task that waits longer for a worker (default: the master's; 0: no limit)",
    )
    p.add_argument("--wait", action="store_true", help="follow the run until it ends")
    p.add_argument("--logs", action="store_true", help="with --wait, stream every task's log")
    p.add_argument("--timeout", type=float, metavar="SECONDS", help="give up waiting after this")
    p.set_defaults(handler=commands.run)


def build_parser() -> argparse.ArgumentParser:
    """The full ``dsched`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="dsched",
        description="dsched: a distributed DAG workflow scheduler (client and servers)",
        parents=[_common(suppress=False)],
    )
    parser.add_argument("--version", action="version", version=f"dsched {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    common = [_common(suppress=True)]

    p = sub.add_parser("submit", parents=common, help="submit the workflows a Python file builds")
    p.add_argument("file", metavar="FILE.py")
    p.set_defaults(handler=commands.submit)

    _add_run(sub, common)

    p = sub.add_parser("instances", parents=common, help="list workflow instances")
    p.add_argument("--workflow", metavar="W")
    p.add_argument(
        "--state", action="append", default=[], type=str.upper, choices=list(WorkflowState)
    )
    p.add_argument("--limit", type=int, default=20, metavar="N")
    p.set_defaults(handler=commands.instances)

    p = sub.add_parser("show", parents=common, help="an instance and its task instances")
    p.add_argument("instance", type=int)
    p.set_defaults(handler=commands.show)

    p = sub.add_parser("logs", parents=common, help="print a task instance's log")
    p.add_argument("task_instance", type=int)
    p.add_argument("-f", "--follow", action="store_true", help="follow until the task ends")
    p.set_defaults(handler=commands.logs)

    for action, text in (
        ("pause", "pause a running instance"),
        ("stop", "stop an instance, killing its tasks"),
        ("resume", "resume a paused instance"),
        ("rerun", "run a finished instance again"),
        ("recover", "re-run the failed tasks of an instance"),
    ):
        p = sub.add_parser(action, parents=common, help=text)
        p.add_argument("instance", type=int)
        p.set_defaults(handler=commands.control)

    for name, text, handler in (
        ("workflows", "list the project's workflows", commands.workflows),
        ("cluster", "list live masters and workers", commands.cluster),
        ("info", "describe the server", commands.info),
    ):
        p = sub.add_parser(name, parents=common, help=text)
        p.set_defaults(handler=handler)

    backfill.add_parsers(sub, common)
    schedule.add_parsers(sub, common)
    datasource.add_parsers(sub, common)

    p = sub.add_parser(
        "cleanup",
        parents=common,
        help="delete the masters' history older than an age (README: Retention)",
    )
    p.add_argument("--older-than", required=True, metavar="AGE", help="e.g. 30d, 12h, 2w")
    p.add_argument(
        "--what",
        default="request_ids,events",
        metavar="KINDS",
        help="comma-separated: request_ids, events, instances (default: request_ids,events)",
    )
    p.add_argument("--dry-run", action="store_true", help="say what would go; delete nothing")
    p.add_argument("--timeout", type=float, default=600.0, metavar="SECONDS", help="(default 600)")
    p.set_defaults(handler=commands.cleanup)

    for name, what in (
        ("standalone", "a master and a worker on this machine"),
        ("master", "a master"),
        ("worker", "a worker"),
    ):
        # Only for --help: main() hands these commands over before argparse runs.
        p = sub.add_parser(name, help=f"run {what} (options are the {name}'s own)")
        p.add_argument("options", nargs=argparse.REMAINDER)
    return parser


def _pass_through(argv: Sequence[str]) -> tuple[str, list[str]] | None:
    """``(command, its argv)`` when the command is ``standalone``, ``master`` or ``worker``,
    else None.

    Their options belong to the server, in the order given, so argparse (which would reorder
    them around its own options) never sees them. Global options may come first.
    """
    i = 0
    while i < len(argv):
        token = argv[i]
        if token in ("--server", "--project"):
            i += 2
        elif token.startswith(("--server=", "--project=")):
            i += 1
        elif token in _SERVER_ENTRIES:
            return token, list(argv[i + 1 :])
        else:
            return None
    return None


def _serve(command: str, argv: list[str]) -> int:
    """Hands over to a server entry point, importing its module only now (see module docstring)."""
    module_name, entry_name = _SERVER_ENTRIES[command]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        # An SDK-only install: the server's dependencies are missing (the message names which).
        raise DschedError(
            f"dsched {command} needs the server, which is not installed here ({err}): "
            f"{SERVER_EXTRA}"
        ) from None
    except ImportError as err:
        raise DschedError(f"the dsched server is not available here: {err}") from None
    entry: Callable[[list[str]], int | None] | None = getattr(module, entry_name, None)
    if entry is None:
        # A server package of another version; say so instead of a traceback.
        raise DschedError(
            f"the dsched server here has no {module_name}.{entry_name}: "
            "install the same version of dsched for the client and the server"
        )
    return entry(argv) or 0


def _report(err: DschedError) -> int:
    sys.stderr.write(f"error: {err.message}\n")
    for violation in err.violations:
        sys.stderr.write(f"  {violation.field}: {violation.description}\n")
    return EXIT_USAGE if isinstance(err, InvalidArgument) else EXIT_FAILED


def main(argv: Sequence[str] | None = None) -> int:
    """Runs ``dsched`` with ``argv`` (default: the process's arguments); returns the exit code."""
    raw = sys.argv[1:] if argv is None else list(argv)
    server = _pass_through(raw)
    try:
        if server is not None:
            return _serve(*server)
        parser = build_parser()
        args, extra = parser.parse_known_args(raw)
        if extra:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        with Client.connect(args.server) as client:
            code: int = args.handler(args, client)
            return code
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return EXIT_INTERRUPTED
    except DschedError as err:
        return _report(err)
    except TimeoutError as err:
        sys.stderr.write(f"error: timed out: {err}\n")
        return EXIT_FAILED
    except FileNotFoundError as err:
        sys.stderr.write(f"error: {err.strerror}: {err.filename}\n")
        return EXIT_FAILED
    except BrokenPipeError:
        # The reader (``| head``) went away: stop quietly. Pointing stdout at /dev/null keeps
        # the interpreter's final flush from failing again at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
