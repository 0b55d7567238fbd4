"""Kill and take-over orders on the wire: both round trips for every valid order; any request a
peer could send is an order or INVALID_ARGUMENT, never another exception."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dsched.errors import InvalidArgument
from dsched.v1 import worker_service_pb2
from dsched_server.protocol.attempt import AttemptKey
from dsched_server.protocol.orders import Kill, TakeOver
from dsched_server.protocol.wire.orders import (
    kill_from_proto,
    kill_to_proto,
    take_over_from_proto,
    take_over_to_proto,
)
from tests.unit.protocol.hostile import ADDRESSES, ATTEMPT_KEYS, EPOCHS, hostile

KEYS = ATTEMPT_KEYS.map(lambda k: AttemptKey(*k))
KILLS = st.builds(Kill, KEYS, st.from_regex(r"[ -~]{0,80}", fullmatch=True))
TAKE_OVERS = st.builds(TakeOver, KEYS, ADDRESSES, EPOCHS)


@given(KILLS)
def test_kill_round_trips(kill: Kill) -> None:
    msg = kill_to_proto(kill)
    assert kill_from_proto(msg) == kill
    assert kill_to_proto(kill_from_proto(msg)) == msg


@given(TAKE_OVERS)
def test_take_over_round_trips(order: TakeOver) -> None:
    msg = take_over_to_proto(order)
    assert take_over_from_proto(msg) == order
    assert take_over_to_proto(take_over_from_proto(msg)) == msg


@given(hostile(worker_service_pb2.KillTaskRequest))
def test_any_kill_request_is_an_order_or_invalid_argument(
    msg: worker_service_pb2.KillTaskRequest,
) -> None:
    try:
        kill = kill_from_proto(msg)
    except InvalidArgument as err:
        assert err.violations
    else:
        assert kill_to_proto(kill) == msg


@given(hostile(worker_service_pb2.TakeOverTaskRequest))
def test_any_take_over_request_is_an_order_or_invalid_argument(
    msg: worker_service_pb2.TakeOverTaskRequest,
) -> None:
    try:
        order = take_over_from_proto(msg)
    except InvalidArgument as err:
        assert err.violations
    else:
        assert take_over_to_proto(order) == msg
