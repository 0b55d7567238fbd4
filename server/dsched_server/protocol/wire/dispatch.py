"""The answers to dispatch requests: :class:`Dispatch` per attempt, :class:`DispatchReply` per
batch."""

from __future__ import annotations

from collections.abc import Sequence

from dsched.errors import FieldViolation, InvalidArgument
from dsched.v1 import enums_pb2, worker_service_pb2
from dsched_server.protocol.attempt import AttemptKey
from dsched_server.protocol.dispatch import Dispatch, DispatchOutcome, DispatchReply
from dsched_server.protocol.wire import checks


def dispatch_to_proto(
    dispatch: Dispatch, worker_epoch: int
) -> worker_service_pb2.DispatchTaskResponse:
    return worker_service_pb2.DispatchTaskResponse(
        outcome=_outcome(dispatch.outcome),
        worker_epoch=worker_epoch,
        log_path=dispatch.log_path,
        reason=dispatch.reason,
    )


def reply_to_proto(
    reply: DispatchReply, sent: Sequence[AttemptKey]
) -> worker_service_pb2.DispatchTasksResponse:
    """The answer to the batch ``sent`` (``reply.results`` in the same order)."""
    return worker_service_pb2.DispatchTasksResponse(
        worker_epoch=reply.worker_epoch,
        results=[
            worker_service_pb2.DispatchResult(
                task_instance_id=key.task_instance_id,
                attempt=key.attempt,
                outcome=_outcome(dispatch.outcome),
                log_path=dispatch.log_path,
                reason=dispatch.reason,
            )
            for key, dispatch in zip(sent, reply.results, strict=True)
        ],
    )


def reply_from_proto(
    msg: worker_service_pb2.DispatchTasksResponse, sent: Sequence[AttemptKey]
) -> DispatchReply:
    """The answer to the batch ``sent``; InvalidArgument if it is not one (another count of
    results, or a result for another attempt). An outcome this master does not know is
    UNSPECIFIED: not accepted."""
    out: list[FieldViolation] = []
    checks.not_negative("worker_epoch", msg.worker_epoch, out)
    if len(msg.results) != len(sent):
        out.append(FieldViolation("results", f"must hold {len(sent)} results, one per task sent"))
        raise InvalidArgument("invalid dispatch reply", violations=out)
    results = []
    for i, (key, result) in enumerate(zip(sent, msg.results, strict=True)):
        if AttemptKey(result.task_instance_id, result.attempt) != key:
            out.append(FieldViolation(f"results[{i}]", f"must answer attempt {key}"))
        outcome = checks.enum_member(
            DispatchOutcome, enums_pb2.DispatchOutcome, "DISPATCH_OUTCOME_", result.outcome
        )
        results.append(
            Dispatch(
                outcome=outcome or DispatchOutcome.UNSPECIFIED,
                log_path=result.log_path,
                reason=result.reason,
            )
        )
    if out:
        raise InvalidArgument("invalid dispatch reply", violations=out)
    return DispatchReply(msg.worker_epoch, results)


def _outcome(value: DispatchOutcome) -> str:
    return f"DISPATCH_OUTCOME_{value.value}"
