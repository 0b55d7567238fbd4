"""What the script task types (SHELL, PYTHON) share: a script reaches its interpreter inline as an
argument when it fits, else through a file in the working directory; the output goes to the log as
it arrives and is scanned for ``${setValue(key=value)}`` OUT parameters.

Inline is the common case: no file system round trip per attempt on the worker's hot path. A
script too large for one argument (:data:`INLINE_MAX` bytes; Linux allows 128 KiB, shared with the
environment's quarter of the stack) or holding a NUL byte is written to a file in the working
directory and run from there. Parameters are never spliced into the script text: they reach it as
environment variables (:mod:`dsched_worker.tasks.environment`).
"""

from __future__ import annotations

from dsched_server.protocol.execution import TaskExecution
from dsched_worker.process import ProcessGroup
from dsched_worker.tasks.base import OutputSink, RunningTask, TaskExit
from dsched_worker.tasks.out_params import OutParamParser
from dsched_worker.tasks.spawner import GroupRun, Launch, Spawner

# Scripts up to this size (UTF-8 bytes) go to the interpreter as an argument, larger ones through
# a file.
INLINE_MAX = 64 * 1024


class ScriptRun(GroupRun):
    """A running script attempt: its process group and the OUT parameters seen in its output."""

    def __init__(self, group: ProcessGroup, parser: OutParamParser) -> None:
        super().__init__(group)
        self._parser = parser

    async def wait(self) -> TaskExit:
        returncode = await self._group.wait()
        return TaskExit(
            returncode=returncode, out_params=self._parser.close(), ended=self._group.exited_at
        )


def inline(script: str) -> bool:
    """Whether ``script`` goes to its interpreter as an argument (see the module)."""
    # Characters count at least one byte each: most scripts are decided without encoding them.
    if "\0" in script or len(script) > INLINE_MAX:
        return False
    return len(script) * 4 <= INLINE_MAX or len(script.encode("utf-8")) <= INLINE_MAX


async def start_script(
    spawner: Spawner,
    execution: TaskExecution,
    output: OutputSink,
    launch: Launch,
) -> RunningTask:
    """Starts ``launch`` (an interpreter given the script inline, or the name of its file, see
    :func:`inline`) with its output logged and scanned for OUT parameters."""
    parser = OutParamParser(note=output.note)

    def on_output(data: bytes) -> None:
        output.append(data)
        parser.feed(data)

    group = await spawner.spawn(launch, execution, output, on_output)
    return ScriptRun(group, parser)
