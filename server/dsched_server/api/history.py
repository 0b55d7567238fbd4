"""MasterService.CleanUpHistory: the history clean-up on demand (``dsched cleanup``).

The work is :meth:`dsched_server.engine.history.History.clean`, the one the periodic retention
runs: many short transactions, not one, so the answer to a ``request_id`` is stored after them
(a retry after a lost answer runs the clean-up again, which deletes only what is still due).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from grpc import aio

from dsched.convert import HISTORY_KIND
from dsched.options import HistoryKind
from dsched.v1 import master_service_pb2 as pb
from dsched_server.api import convert
from dsched_server.api.context import MasterContext
from dsched_server.api.idempotency import recall, remember_answer
from dsched_server.api.validation import Checks
from dsched_server.core.retention import Tally

Ctx = aio.ServicerContext[Any, Any]
METHOD = "CleanUpHistory"
MIN_AGE = timedelta(seconds=1)
MAX_AGE = timedelta(days=36500)  # a cutoff before year 1 cannot be computed
_NAMES = ", ".join(k.value for k in HistoryKind)


def _tally(tally: Tally) -> pb.HistoryTally:
    return pb.HistoryTally(
        kind=HISTORY_KIND.number(tally.kind),
        count=tally.count,
        oldest=convert.timestamp(tally.oldest),
        newest=convert.timestamp(tally.newest),
    )


class HistoryApi:
    ctx: MasterContext

    async def CleanUpHistory(self, request: pb.CleanUpHistoryRequest, context: Ctx) -> Any:
        checks = Checks()
        age = request.older_than.ToTimedelta() if request.HasField("older_than") else None
        if age is None or not MIN_AGE <= age <= MAX_AGE:
            checks.add("older_than", "must be between one second and 36,500 days")
        kinds: list[HistoryKind] = []
        if not request.kinds:
            checks.add("kinds", f"name at least one of {_NAMES}")
        for i, number in enumerate(request.kinds):
            kind = HISTORY_KIND.by_number.get(number)
            if kind is None:
                checks.add(f"kinds[{i}]", f"must be one of {_NAMES}")
            elif kind in kinds:
                checks.add(f"kinds[{i}]", f"{kind.value} is named twice")
            else:
                kinds.append(HistoryKind(kind))
        checks.request_id(request.request_id)
        checks.raise_if_any()
        assert age is not None  # checked above

        answer = await recall(self.ctx, request, METHOD, pb.CleanUpHistoryResponse)
        if answer is not None:
            return answer
        cutoff = self.ctx.clock.now() - age
        tallies = await self.ctx.history.clean(
            dict.fromkeys(kinds, cutoff), dry_run=request.dry_run
        )
        response = pb.CleanUpHistoryResponse(
            tallies=[_tally(t) for t in tallies.values()], dry_run=request.dry_run
        )
        await remember_answer(self.ctx, request, METHOD, response)
        return response
