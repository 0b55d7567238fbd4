"""OUT parameters set by a task on its output: ``${setValue(key=value)}`` or
``#{setValue(key=value)}``.

Output arrives in arbitrary chunks, so a line may be split across several; the parser keeps the
unfinished tail and parses each line once it is complete (the last unterminated line at
:meth:`close`). The marker may appear anywhere in a line and several times per line; a later value
for a key wins. Keys must be shell identifiers outside the reserved ``DSCHED_`` prefix; anything
else is ignored, as are values over 64 KiB. Lines longer than :data:`MAX_LINE_BYTES` are skipped
without being buffered whole, so a task printing one endless line cannot exhaust the worker's
memory.
"""

from __future__ import annotations

import logging
import re

from dsched.spec import MAX_PARAM_VALUE_BYTES, MAX_PARAMS

log = logging.getLogger(__name__)

MAX_LINE_BYTES = 1024 * 1024
_MARKER = b"setValue("
_PATTERN = re.compile(r"[$#]\{setValue\(([A-Za-z_][A-Za-z0-9_]{0,127})=(.*?)\)\}")


class OutParamParser:
    """Feed it output chunks with :meth:`feed`; :meth:`close` returns the OUT parameters found."""

    def __init__(self) -> None:
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
            key, value = match.group(1), match.group(2)
            if key.upper().startswith("DSCHED_") or len(value.encode()) > MAX_PARAM_VALUE_BYTES:
                continue
            if key not in self._params and len(self._params) >= MAX_PARAMS:
                if not self._warned:
                    log.warning(
                        "task set more than %d OUT parameters; ignoring the rest", MAX_PARAMS
                    )
                    self._warned = True
                continue
            self._params[key] = value
