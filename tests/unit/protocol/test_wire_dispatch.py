"""Dispatch answers on the wire: every answer a worker gives survives both round trips; a reply a
master cannot match to the batch it sent is INVALID_ARGUMENT, never another exception; an outcome
the master does not know counts as not accepted."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsched.errors import InvalidArgument
from dsched.v1 import worker_service_pb2
from dsched_server.protocol.attempt import AttemptKey
from dsched_server.protocol.dispatch import Dispatch, DispatchOutcome, DispatchReply
from dsched_server.protocol.wire.dispatch import (
    dispatch_to_proto,
    reply_from_proto,
    reply_to_proto,
)
from tests.unit.protocol.hostile import ATTEMPT_KEYS, EPOCHS, hostile

DISPATCHES = st.builds(
    Dispatch,
    outcome=st.sampled_from(DispatchOutcome),
    log_path=st.text(max_size=40),
    reason=st.text(max_size=40),
)
KEYS = ATTEMPT_KEYS.map(lambda k: AttemptKey(*k))
# A batch sent (its attempt keys) and the worker's reply to it.
BATCHES = st.lists(st.tuples(KEYS, DISPATCHES), max_size=4).flatmap(
    lambda pairs: st.tuples(
        st.just([k for k, _ in pairs]),
        st.builds(DispatchReply, EPOCHS, st.just([d for _, d in pairs])),
    )
)


@given(BATCHES)
def test_value_to_pb_to_value(batch: tuple[list[AttemptKey], DispatchReply]) -> None:
    sent, reply = batch
    assert reply_from_proto(reply_to_proto(reply, sent), sent) == reply


@given(BATCHES)
def test_pb_to_value_to_pb(batch: tuple[list[AttemptKey], DispatchReply]) -> None:
    sent, reply = batch
    msg = reply_to_proto(reply, sent)
    assert reply_to_proto(reply_from_proto(msg, sent), sent) == msg


@given(DISPATCHES, EPOCHS)
def test_a_single_answer_says_what_its_batch_entry_says(dispatch: Dispatch, epoch: int) -> None:
    one = dispatch_to_proto(dispatch, epoch)
    batch = reply_to_proto(DispatchReply(epoch, [dispatch]), [AttemptKey(1, 1)])
    assert (one.worker_epoch, one.outcome, one.log_path, one.reason) == (
        batch.worker_epoch,
        batch.results[0].outcome,
        batch.results[0].log_path,
        batch.results[0].reason,
    )


@given(hostile(worker_service_pb2.DispatchTasksResponse), st.lists(KEYS, max_size=3))
def test_any_reply_is_an_answer_to_the_batch_or_invalid_argument(
    msg: worker_service_pb2.DispatchTasksResponse, keys: list[AttemptKey]
) -> None:
    try:
        reply = reply_from_proto(msg, keys)
    except InvalidArgument as err:
        assert err.violations
    else:
        assert len(reply.results) == len(keys)
        assert all(isinstance(d.outcome, DispatchOutcome) for d in reply.results)


def test_a_reply_for_other_attempts_or_another_count_is_refused() -> None:
    reply = reply_to_proto(
        DispatchReply(4, [Dispatch(outcome=DispatchOutcome.ACCEPTED)]), [AttemptKey(1, 1)]
    )
    with pytest.raises(InvalidArgument) as err:
        reply_from_proto(reply, [AttemptKey(1, 2)])
    assert [v.field for v in err.value.violations] == ["results[0]"]
    with pytest.raises(InvalidArgument) as err:
        reply_from_proto(reply, [AttemptKey(1, 1), AttemptKey(2, 1)])
    assert [v.field for v in err.value.violations] == ["results"]


def test_an_unknown_outcome_is_not_accepted() -> None:
    msg = worker_service_pb2.DispatchTasksResponse(
        worker_epoch=2,
        results=[worker_service_pb2.DispatchResult(task_instance_id=1, attempt=1, outcome=42)],  # type: ignore[arg-type]
    )
    (dispatch,) = reply_from_proto(msg, [AttemptKey(1, 1)]).results
    assert dispatch.outcome is DispatchOutcome.UNSPECIFIED
    assert not dispatch.accepted
