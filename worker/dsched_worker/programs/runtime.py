"""The child's side of a dsched child program (the worker's side: :mod:`dsched_worker.tasks.child`).

The protocol:

- **stdin** carries one JSON object, ``{"spec": {...}, "params": {"name": "value", ...}}``: what
  the task type sends (its part of the task definition; secrets such as a datasource's password
  travel here) and the attempt's resolved parameters. Never the arguments or the environment:
  other users of the host can read ``/proc/<pid>/cmdline`` and ``/proc/<pid>/environ``.
- **stdout and stderr** are the attempt's log, streamed live. The worker does *not* scan them for
  ``${setValue(...)}``: a program logs what others wrote (a response body, a row), and a remote
  server must not be able to set OUT parameters by putting a marker in its answer.
- **OUT parameters** are what :func:`main`'s ``run`` returns, written as a JSON object to
  :data:`RESULT_FILE` in the working directory (the process's cwd) when it succeeds, atomically
  (a temporary file renamed). The worker reads it once the process has exited and applies the
  OUT parameter rules (names, sizes) with notes in the log.
- **exit status**: 0 success; 1 the task failed (:class:`ProgramError`: one line ``error: ...``
  in the log; any other exception: its traceback); 2 the worker sent something unreadable.
  Killing the group (kill, timeout, a lost worker) ends it like any task.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any, NoReturn

RESULT_FILE = ".dsched-result.json"

Spec = Mapping[str, Any]
Params = Mapping[str, str]
Program = Callable[[Spec, Params], Mapping[str, str]]


class ProgramError(Exception):
    """The task failed for a reason its message states in one line (no traceback is logged)."""


def log(text: str) -> None:
    """Writes ``text`` as a line of the attempt's log."""
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def read_request(data: bytes) -> tuple[Spec, Params]:
    """The spec and the parameters of the JSON object ``data`` (see the module); raises
    ValueError if it is not one."""
    doc = json.loads(data)
    if not isinstance(doc, dict) or not isinstance(doc.get("spec"), dict):
        raise ValueError('expected an object {"spec": {...}, "params": {...}}')
    params = doc.get("params", {})
    if not isinstance(params, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in params.items()
    ):
        raise ValueError("params must map names to strings")
    return doc["spec"], params


def write_result(out: Mapping[str, str], directory: str = ".") -> None:
    """Writes the OUT parameters ``out`` to :data:`RESULT_FILE` in ``directory`` atomically."""
    path = os.path.join(directory, RESULT_FILE)
    temporary = path + ".tmp"
    with open(temporary, "w", encoding="utf-8") as file:
        json.dump(dict(out), file)
    os.replace(temporary, path)


def main(run: Program) -> NoReturn:
    """Runs a program: reads the request from stdin, calls ``run(spec, params)``, writes what it
    returns as the OUT parameters and exits (see the module for the exit status)."""
    try:
        spec, params = read_request(sys.stdin.buffer.read())
    except ValueError as exc:
        _fail(f"cannot read the task from stdin: {exc}", 2)
    try:
        out = run(spec, params)
    except ProgramError as exc:
        _fail(str(exc), 1)
    if out:
        write_result(out)
    sys.exit(0)


def _fail(message: str, status: int) -> NoReturn:
    sys.stdout.flush()
    sys.stderr.write(f"error: {message}\n")
    sys.stderr.flush()
    sys.exit(status)
