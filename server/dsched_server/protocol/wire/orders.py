""":class:`Kill` and :class:`TakeOver`, the orders about an attempt a worker already has."""

from __future__ import annotations

from dsched.errors import FieldViolation, InvalidArgument
from dsched.spec import MAX_DESCRIPTION_LENGTH, text_violation
from dsched.v1 import worker_service_pb2
from dsched_server.protocol.attempt import AttemptKey
from dsched_server.protocol.orders import Kill, TakeOver
from dsched_server.protocol.wire import checks


def kill_to_proto(kill: Kill) -> worker_service_pb2.KillTaskRequest:
    return worker_service_pb2.KillTaskRequest(
        task_instance_id=kill.key.task_instance_id, attempt=kill.key.attempt, reason=kill.reason
    )


def kill_from_proto(msg: worker_service_pb2.KillTaskRequest) -> Kill:
    out: list[FieldViolation] = []
    key = _attempt_key(msg.task_instance_id, msg.attempt, out)
    found = text_violation("reason", msg.reason, MAX_DESCRIPTION_LENGTH)
    if found is not None:
        out.append(found)
    if out:
        raise InvalidArgument("invalid kill request", violations=out)
    return Kill(key, msg.reason)


def take_over_to_proto(order: TakeOver) -> worker_service_pb2.TakeOverTaskRequest:
    return worker_service_pb2.TakeOverTaskRequest(
        task_instance_id=order.key.task_instance_id,
        attempt=order.key.attempt,
        owner_address=order.owner_address,
        owner_epoch=order.owner_epoch,
    )


def take_over_from_proto(msg: worker_service_pb2.TakeOverTaskRequest) -> TakeOver:
    out: list[FieldViolation] = []
    key = _attempt_key(msg.task_instance_id, msg.attempt, out)
    checks.address("owner_address", msg.owner_address, out)
    checks.not_negative("owner_epoch", msg.owner_epoch, out)
    if out:
        raise InvalidArgument("invalid take-over request", violations=out)
    return TakeOver(key, msg.owner_address, msg.owner_epoch)


def _attempt_key(task_instance_id: int, attempt: int, out: list[FieldViolation]) -> AttemptKey:
    checks.positive("task_instance_id", task_instance_id, out)
    checks.positive("attempt", attempt, out)
    return AttemptKey(task_instance_id, attempt)
