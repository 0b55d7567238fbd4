"""Every gRPC failure reaches SDK users as the dsched error class the server meant."""

from __future__ import annotations

import socket

import grpc
import pytest

import dsched
from dsched import Client
from tests.integration.sdk.conftest import Fake
from tests.integration.sdk.fake_state import rich_status


def test_not_found_carries_reason_and_metadata(fake: Fake, client: Client) -> None:
    fake.master.fail(
        "GetWorkflowInstance",
        rich_status(
            grpc.StatusCode.NOT_FOUND,
            "instance 42 not found",
            reason="INSTANCE_NOT_FOUND",
            metadata={"instance": "42"},
        ),
    )
    with pytest.raises(dsched.NotFound) as caught:
        client.get_instance(42)
    err = caught.value
    assert err.reason == "INSTANCE_NOT_FOUND"
    assert err.metadata == {"instance": "42"}
    assert err.message == "instance 42 not found"
    assert err.violations == ()


def test_invalid_workflow_has_field_violations_once(fake: Fake, client: Client) -> None:
    # The server's message already ends with the violations (str(DschedError)); the SDK strips
    # that suffix so that str(err) does not repeat them.
    message = "workflow 'etl' is invalid (workflow.tasks[0].name: must not be empty)"
    fake.master.fail(
        "CreateWorkflow",
        rich_status(
            grpc.StatusCode.INVALID_ARGUMENT,
            message,
            reason="INVALID_WORKFLOW",
            metadata={"workflow": "etl"},
            violations=[("workflow.tasks[0].name", "must not be empty")],
        ),
    )
    spec = dsched.WorkflowSpec(
        project="p",
        name="etl",
        tasks=(dsched.TaskSpec(name="a", kind=dsched.ShellSpec(script="x")),),
    )
    with pytest.raises(dsched.InvalidWorkflow) as caught:
        client.create_workflow(spec)
    err = caught.value
    assert isinstance(err, dsched.InvalidArgument)
    assert err.reason == "INVALID_WORKFLOW"
    assert err.violations == (dsched.FieldViolation("workflow.tasks[0].name", "must not be empty"),)
    assert str(err) == message


@pytest.mark.parametrize(
    ("code", "reason", "expected"),
    [
        (grpc.StatusCode.FAILED_PRECONDITION, "ILLEGAL_TRANSITION", dsched.IllegalTransition),
        (grpc.StatusCode.FAILED_PRECONDITION, "WORKFLOW_NOT_ONLINE", dsched.FailedPrecondition),
        (grpc.StatusCode.ABORTED, "OWNERSHIP_LOST", dsched.OwnershipLost),
        (grpc.StatusCode.ALREADY_EXISTS, "PROJECT_EXISTS", dsched.AlreadyExists),
        (grpc.StatusCode.PERMISSION_DENIED, "NO", dsched.PermissionDenied),
        (grpc.StatusCode.UNAUTHENTICATED, "TOKEN_EXPIRED", dsched.Unauthenticated),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, "BUSY", dsched.ResourceExhausted),
        (grpc.StatusCode.OUT_OF_RANGE, "CURSOR_COMPACTED", dsched.OutOfRange),
        (grpc.StatusCode.INTERNAL, "INTERNAL", dsched.Internal),
        # A reason whose class has another code does not win over the code.
        (grpc.StatusCode.NOT_FOUND, "ILLEGAL_TRANSITION", dsched.NotFound),
    ],
)
def test_code_and_reason_pick_the_class(
    fake: Fake, client: Client, code: grpc.StatusCode, reason: str, expected: type
) -> None:
    fake.master.fail("PauseWorkflowInstance", rich_status(code, "nope", reason=reason))
    with pytest.raises(dsched.DschedError) as caught:
        client.pause_instance(1)
    assert type(caught.value) is expected
    assert caught.value.reason == reason


class BareStatus(grpc.Status):
    """A status without details, as a proxy or grpc itself sends it."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        self.code = code
        self.details = details
        self.trailing_metadata = ()


def test_status_without_details_maps_by_code(fake: Fake, client: Client) -> None:
    fake.master.fail("GetProject", BareStatus(grpc.StatusCode.FAILED_PRECONDITION, "plain"))
    with pytest.raises(dsched.FailedPrecondition) as caught:
        client.get_project("x")
    assert caught.value.reason == "FAILED_PRECONDITION"
    assert caught.value.message == "plain"
    assert caught.value.metadata == {}
    assert caught.value.violations == ()


def test_codes_without_a_class_keep_their_name_as_reason(fake: Fake, client: Client) -> None:
    fake.master.fail("GetServerInfo", rich_status(grpc.StatusCode.DEADLINE_EXCEEDED, "slow"))
    with pytest.raises(dsched.DschedError) as caught:
        client.server_info()
    assert type(caught.value) is dsched.DschedError
    assert caught.value.reason == "DEADLINE_EXCEEDED"


def test_error_info_of_another_domain_is_ignored(fake: Fake, client: Client) -> None:
    fake.master.fail(
        "GetProject",
        rich_status(
            grpc.StatusCode.NOT_FOUND, "gone", reason="ILLEGAL_TRANSITION", domain="example.com"
        ),
    )
    with pytest.raises(dsched.NotFound) as caught:
        client.get_project("x")
    assert caught.value.reason == "NOT_FOUND"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_connection_failure_is_unavailable() -> None:
    target = f"127.0.0.1:{_closed_port()}"
    with Client.connect(target, timeout=5) as client, pytest.raises(dsched.Unavailable) as caught:
        client.server_info()
    assert target in caught.value.message
    assert caught.value.reason == "UNAVAILABLE"


def test_mutations_send_a_request_id(fake: Fake, client: Client) -> None:
    client.create_project("demo")
    client.create_project("other", request_id="fixed-id")
    first, second = fake.master.seen("CreateProject")
    assert len(first.request_id) == 36  # a UUID4
    assert second.request_id == "fixed-id"
