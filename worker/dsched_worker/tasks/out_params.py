"""OUT parameters set by a task on its output: ``${setValue(key=value)}`` or
``#{setValue(key=value)}``.

Output arrives in arbitrary chunks, so a line may be split across several; the parser keeps the
unfinished tail and parses each line once it is complete (the last unterminated line at
:meth:`close`). The marker may appear anywhere in a line and several times per line; a later value
for a key wins. A key must be a parameter name :mod:`dsched.names` accepts: a key outside the
grammar or a reserved one (``${setValue(BASH_ENV=...)}``: a task's output must not take over the
next task's interpreter) is dropped, as is a value over 64 KiB or with a NUL character, each with
a note in the task's log, and so are parameters past 256 of them or past 256 KiB of names and
values together (``dsched.spec.MAX_PARAMS_BYTES``). Lines longer than :data:`MAX_LINE_BYTES` are
skipped without being buffered whole, so a task printing one endless line cannot exhaust the
worker's memory.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable

from dsched.names import MAX_PARAM_NAME_LENGTH, param_name_problem
from dsched.spec import MAX_PARAM_VALUE_BYTES, MAX_PARAMS, MAX_PARAMS_BYTES, params_bytes

log = logging.getLogger(__name__)

MAX_LINE_BYTES = 1024 * 1024
MAX_NOTES = 100  # notes about dropped parameters per attempt; then one line says the rest are not
_MARKER = b"setValue("
# The key is whatever precedes the first '=' and is judged by the parameter name rules, so that a
# refused key is reported instead of passing unnoticed. Bounded: a longer key does not match.
_KEY = f"[^=()]{{0,{MAX_PARAM_NAME_LENGTH + 1}}}"
_PATTERN = re.compile(rf"[$#]\{{setValue\(({_KEY})=(.*?)\)\}}")
Note = Callable[[str], None]


def _ignore(text: str) -> None:
    pass


class OutParamParser:
    """Feed it output chunks with :meth:`feed`; :meth:`close` returns the OUT parameters found.
    ``note`` receives a line for the task's log about each dropped parameter."""

    def __init__(self, note: Note = _ignore) -> None:
        self._note_to = note
        self._notes = 0
        self._tail = bytearray()
        self._skipping = False  # inside an over-long line: drop bytes until its newline
        self._params: dict[str, str] = {}
        self._warned = False

    @property
    def params(self) -> dict[str, str]:
        """The parameters of the complete lines seen so far."""
        return dict(self._params)

    def feed(self, data: bytes) -> None:
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            if self._skipping:
                self._skipping = False
                self._tail.clear()
            else:
                self._tail += data[start:end]
                self._line(bytes(self._tail))
                self._tail.clear()
            start = end + 1
        if self._skipping:
            return
        self._tail += data[start:]
        if len(self._tail) > MAX_LINE_BYTES:
            self._tail.clear()
            self._skipping = True

    def _note(self, text: str) -> None:
        self._notes += 1
        if self._notes <= MAX_NOTES:
            self._note_to(text)
        elif self._notes == MAX_NOTES + 1:
            self._note_to("more OUT parameters dropped; not reported one by one")

    def close(self) -> dict[str, str]:
        """Parses the unterminated last line, if any, and returns every parameter found."""
        if self._tail and not self._skipping:
            self._line(bytes(self._tail))
        self._tail.clear()
        return self.params

    def _line(self, line: bytes) -> None:
        if _MARKER not in line:  # the common case: skip decoding and the regex
            return
        text = line.decode("utf-8", errors="replace").rstrip("\r")
        for match in _PATTERN.finditer(text):
            self.offer(match.group(1), match.group(2))

    def offer(self, key: str, value: str) -> None:
        """Takes one OUT parameter found by other means than a ``setValue`` line (a child
        program's result: :mod:`dsched_worker.tasks.child`), with the same rules and notes."""
        problem = param_name_problem(key)
        if problem is not None:
            self._note(f"OUT parameter dropped: {problem[1]}")
            return
        try:
            size = len(value.encode())
        except UnicodeEncodeError:  # a lone surrogate (from a JSON result) has no UTF-8 form
            self._note(f"OUT parameter {key!r} dropped: its value is not valid Unicode text")
            return
        if size > MAX_PARAM_VALUE_BYTES:
            self._note(f"OUT parameter {key!r} dropped: its value is larger than 64 KiB")
            return
        if "\x00" in value:
            self._note(f"OUT parameter {key!r} dropped: its value contains a NUL character")
            return
        if key not in self._params and len(self._params) >= MAX_PARAMS:
            self._warn(f"more than {MAX_PARAMS} OUT parameters")
            return
        if params_bytes({**self._params, key: value}) > MAX_PARAMS_BYTES:
            self._warn(f"OUT parameters over {MAX_PARAMS_BYTES} bytes")
            return
        self._params[key] = value

    def _warn(self, what: str) -> None:
        if not self._warned:
            log.warning("task set %s; ignoring the rest", what)
            self._note(f"{what}; the rest are dropped")
            self._warned = True
