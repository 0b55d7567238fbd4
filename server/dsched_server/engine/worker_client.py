"""Every call the master makes to a worker, as one seam: :class:`WorkerClient`.

The engine (the dispatcher, a runner's kills and take-overs, the probe that proves a worker dead)
reaches workers only through this protocol, in domain values. Production uses the gRPC adapter
(:class:`~dsched_server.engine.grpc_worker_client.GrpcWorkerClient`, which owns the channels);
engine tests use an in-memory fake (``tests/fakes/worker.py``) and run without a network.

A call either answers or raises :class:`WorkerCallError`. The error means *not known*: the worker
may have acted (a dispatch accepted, a kill delivered) before the answer was lost. Only
:class:`RequestRefused` says that the worker did nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from dsched_server.protocol.dispatch import DispatchReply
from dsched_server.protocol.execution import TaskExecution
from dsched_server.protocol.orders import Kill, TakeOver


class WorkerCallError(Exception):
    """A call whose outcome is unknown (timed out, connection lost, the worker failed). ``code``
    names the failure for logs (the gRPC status code name in production)."""

    def __init__(self, address: str, code: str, details: str = "") -> None:
        super().__init__(f"{address}: {code}{f' ({details})' if details else ''}")
        self.address = address
        self.code = code
        self.details = details


class RequestRefused(WorkerCallError):
    """The worker refused the request itself as malformed: nothing was done. Never expected from
    the master's own requests; resending the same request would be refused again."""


class WorkerClient(Protocol):
    """The master's calls to the worker listening at ``address``."""

    async def dispatch(
        self, address: str, specs: Sequence[TaskExecution], *, timeout: float
    ) -> DispatchReply:
        """Hands the attempts to the worker (``DispatchTasks``), idempotent per attempt. The reply
        has one result per attempt, in the order sent; ``accepted`` also covers an attempt the
        worker had accepted before."""
        ...

    async def kill(self, address: str, order: Kill, *, timeout: float) -> bool:
        """Asks the worker to kill an attempt; True if it had it (it then reports KILLED)."""
        ...

    async def take_over(self, address: str, order: TakeOver, *, timeout: float) -> bool:
        """Tells the worker that the master at ``order.owner_address`` (its cluster listener)
        owns the attempt now; True if the worker still has it."""
        ...

    async def refused(self, address: str, *, timeout: float) -> bool:
        """True if nothing listens at ``address`` any more (proof that the incarnation that
        served there is gone); False if something accepts or the host does not answer."""
        ...

    def forget(self, address: str) -> None:
        """The worker at ``address`` left the registry: release what is held for it."""
        ...

    async def close(self) -> None:
        """Releases everything (at shutdown)."""
        ...
