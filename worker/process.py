"""A task's process group: spawn, feed its output to a callback, signal it, and clean up after it.

Each task process starts in a new session (``start_new_session=True``), so it leads its own process
group and every descendant that does not create its own session belongs to that group. This gives
one handle (the pgid, equal to the leader's pid) to kill the whole tree.

Output arrives through an :class:`asyncio.SubprocessProtocol` callback, not a reader loop.
``Process.wait()`` would not do: it returns only once the pipes close as well, and a background
grandchild (``sleep 1000 &``) that inherited stdout keeps them open long after the script exited. So
:meth:`ProcessGroup.wait` waits for the *leader's* exit, then SIGKILLs whatever is left in its
group. The task is over when its main process is; leftover children would otherwise hold the pipe,
hang the attempt and keep running unsupervised. A descendant that escaped into its own session is
out of reach: its end of the pipe is abandoned after :data:`DRAIN_TIMEOUT_S`.

The pgid stays valid until the last member of the group is gone. Signalling a group whose members
are all gone raises ProcessLookupError, which is ignored: there is nothing left to kill.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

log = logging.getLogger(__name__)

# After the group was killed, how long to wait for the pipe to report end-of-file (normally a few
# milliseconds; longer only if a descendant escaped the group with setsid and still holds it).
DRAIN_TIMEOUT_S = 2.0

OutputCallback = Callable[[bytes], None]


class _Protocol(asyncio.SubprocessProtocol):
    def __init__(self, on_output: OutputCallback) -> None:
        self._on_output = on_output
        self.exited = asyncio.Event()
        self.drained = asyncio.Event()

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        self._on_output(data if isinstance(data, bytes) else data.encode())

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self.drained.set()  # stdout is the only pipe (stderr is merged into it)

    def process_exited(self) -> None:
        self.exited.set()


class ProcessGroup:
    """A running process that leads its own process group. Create with :meth:`spawn`."""

    def __init__(self, transport: asyncio.SubprocessTransport, protocol: _Protocol) -> None:
        self._transport = transport
        self._protocol = protocol
        self.pid: int = transport.get_pid()

    @classmethod
    async def spawn(
        cls,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        on_output: OutputCallback,
    ) -> ProcessGroup:
        """Starts ``argv`` in a new session with stdin from /dev/null and stdout+stderr going to
        ``on_output`` (called on the loop with each chunk). Raises OSError if it cannot start."""
        loop = asyncio.get_running_loop()
        transport, protocol = await loop.subprocess_exec(
            lambda: _Protocol(on_output),
            *argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=dict(env),
            start_new_session=True,
        )
        return cls(transport, protocol)

    @property
    def exited(self) -> bool:
        return self._protocol.exited.is_set()

    async def wait(self) -> int:
        """Waits for the leader to exit, kills the rest of its group, waits (bounded) for the output
        to drain, and returns the leader's return code (negative: killed by that signal)."""
        try:
            await self._protocol.exited.wait()
            self.signal(signal.SIGKILL)  # leftovers: see the module docstring
            try:
                await asyncio.wait_for(self._protocol.drained.wait(), DRAIN_TIMEOUT_S)
            except TimeoutError:
                log.warning(
                    "output pipe of pid %d still open after its group was killed; abandoned",
                    self.pid,
                )
            code = self._transport.get_returncode()
            return code if code is not None else -int(signal.SIGKILL)
        finally:
            if not self.exited:  # cancelled while running: the group must not outlive its task
                self.signal(signal.SIGKILL)
            self._transport.close()

    def signal(self, sig: signal.Signals) -> None:
        """Sends ``sig`` to every process of the group; a group with no members left is ignored."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, sig)

    async def kill(self, grace: float) -> None:
        """SIGTERM to the group; SIGKILL if the leader is still alive after ``grace`` seconds.

        Members that outlive the leader are SIGKILLed by :meth:`wait`."""
        self.signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(self._protocol.exited.wait(), grace)
        except TimeoutError:
            self.signal(signal.SIGKILL)


def exit_code(returncode: int) -> int:
    """A return code as a shell reports it: death by signal N becomes 128 + N."""
    return 128 - returncode if returncode < 0 else returncode
