"""Wake-ups of waiting DEPENDENT attempts when a run they wait for changes on this master.

A waiting attempt is registered under every (project, workflow) its items name while it is being
checked; a batch of an instance of such a workflow that ends a task or the instance wakes them all
(and forgets them: each check registers again, so a burst of batches costs one check, not one per
batch). Runs that finish on other masters are seen by the attempt's periodic check instead.
"""

from __future__ import annotations

from collections.abc import Iterable

from dsched_server.engine.effects import Mailbox
from dsched_server.engine.messages import AttemptCheck, Check

Target = tuple[str, str]  # (project, workflow)


class DependencyWaits:
    def __init__(self) -> None:
        self._waiting: dict[Target, dict[tuple[int, int], Mailbox]] = {}

    def __len__(self) -> int:
        return sum(len(waiters) for waiters in self._waiting.values())

    def watch(self, targets: Iterable[Target], runner: Mailbox, task_instance_id: int) -> None:
        for target in targets:
            self._waiting.setdefault(target, {})[(runner.id, task_instance_id)] = runner

    def watched(self, target: Target) -> bool:
        return target in self._waiting

    def wake(self, target: Target) -> None:
        """A run of ``target`` moved: its waiters look again."""
        for (_, ti_id), runner in self._waiting.pop(target, {}).items():
            if not runner.done:
                runner.post(AttemptCheck(Check.DEPENDENCY, ti_id))

    def forget(self, runner: Mailbox) -> None:
        """A runner stopped driving its instance: its attempts wait no more here."""
        for target in list(self._waiting):
            waiters = self._waiting[target]
            for key in [k for k in waiters if k[0] == runner.id]:
                del waiters[key]
            if not waiters:
                del self._waiting[target]
