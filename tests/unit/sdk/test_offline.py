"""What the SDK does without a server: local validation before any RPC, lazy connections."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import grpc
import pytest

import dsched
from dsched import Client, Shell, Workflow


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Watched:
    client: Client
    states: list[grpc.ChannelConnectivity]  # every connectivity state the channel reported
    moved: threading.Event  # set once the channel leaves IDLE, i.e. tries to connect

    def never_connected(self) -> bool:
        return set(self.states) <= {grpc.ChannelConnectivity.IDLE}


@pytest.fixture
def watched() -> Iterator[Watched]:
    """A client on a closed port whose channel reports every connectivity change."""
    target = f"127.0.0.1:{_closed_port()}"
    channel = grpc.insecure_channel(target)
    states: list[grpc.ChannelConnectivity] = []
    first = threading.Event()
    moved = threading.Event()

    def record(state: grpc.ChannelConnectivity) -> None:
        states.append(state)
        first.set()
        if state is not grpc.ChannelConnectivity.IDLE:
            moved.set()

    before = set(threading.enumerate())
    channel.subscribe(record, try_to_connect=False)
    # grpc watches the channel from a thread of its own, which raises (an unhandled thread
    # exception, reported by pytest in whichever test runs then) if the channel is closed while it
    # looks: the channel is closed only once that thread has seen the unsubscription and ended.
    pollers = set(threading.enumerate()) - before
    first.wait(5)  # grpc reports the initial state (IDLE) at once
    client = Client(channel, target=target, timeout=5)
    try:
        yield Watched(client, states, moved)
    finally:
        channel.unsubscribe(record)
        for thread in pollers:
            thread.join(5)  # it looks again every 0.2 s at most
        assert not any(t.is_alive() for t in pollers)
        client.close()


def test_invalid_workflow_is_rejected_without_connecting(watched: Watched) -> None:
    client = watched.client
    with Workflow("etl", project="demo") as wf:
        a, b = Shell("a", "echo a"), Shell("b", "echo b")
        a >> b >> a
    with pytest.raises(dsched.InvalidWorkflow) as caught:
        wf.submit(client)
    assert caught.value.reason == "CYCLE_DETECTED"
    with pytest.raises(dsched.InvalidWorkflow):
        wf.run(client=client)
    assert watched.never_connected()


def test_bad_options_are_rejected_without_connecting(watched: Watched) -> None:
    client = watched.client
    with pytest.raises(dsched.InvalidArgument):
        client.start_workflow("demo", "etl", failure_strategy="explode")
    with pytest.raises(dsched.InvalidArgument):
        client.list_instances(states=["HAPPY"])
    assert watched.never_connected()


def test_a_valid_workflow_does_try_the_server(watched: Watched) -> None:
    client = watched.client
    with Workflow("etl", project="demo") as wf:
        Shell("a", "echo a")
    with pytest.raises(dsched.Unavailable):
        wf.submit(client)
    assert watched.moved.wait(5)


def test_connect_reads_the_environment_only_when_no_target(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DSCHED_SERVER", "10.1.2.3:7000")
    with Client.connect() as from_env, Client.connect("h:1") as explicit:
        assert from_env.target == "10.1.2.3:7000" and explicit.target == "h:1"
    monkeypatch.delenv("DSCHED_SERVER")
    with Client.connect() as default:
        assert default.target == "127.0.0.1:5678"
        assert default.timeout == 30.0


def test_default_client(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSCHED_SERVER", "10.9.9.9:1")
    with Client.connect("h:2") as mine:
        assert mine.as_default() is mine
        assert dsched.default_client() is mine
    lazy = dsched.default_client()  # the closed default was dropped: a new one from the env
    try:
        assert lazy is not mine and lazy.target == "10.9.9.9:1"
        assert dsched.default_client() is lazy
    finally:
        lazy.close()
