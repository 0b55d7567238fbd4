"""A TCP proxy on 127.0.0.1 that can cut the line: a network partition without root or iptables.

Clients connect to ``proxy.port``; each connection is relayed to ``127.0.0.1:<target_port>``.
``block()`` starts a partition: nothing is relayed any more in either direction (bytes are read
and dropped, like packets lost on the way), and new connections are accepted but never reach the
target, so a client sees silence rather than a refusal. ``heal()`` ends it and closes the
connections that lived through it (their streams have holes); new ones are relayed again.

``cut()`` is the other kind of outage, a server that went down: the listening port closes (new
connections are refused) and every open connection is reset (RST). ``heal()`` listens on the same
port again.

One selector thread does all the work; it is test tooling for a handful of connections.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import struct
import threading
from types import TracebackType

_CHUNK = 65536


class TcpProxy:
    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.setblocking(False)
        self.port: int = self._listener.getsockname()[1]
        self.connect_string = f"127.0.0.1:{self.port}"
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._lock = threading.Lock()
        self._peers: dict[socket.socket, socket.socket | None] = {}  # None: held in a partition
        self._blocked = False
        self._heal_pending = False
        self._cut = False  # wanted: listener closed, connections reset
        self._listening = True  # applied by the selector thread
        self._applied = threading.Event()
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="tcp-proxy", daemon=True)

    def start(self) -> None:
        self._selector.register(self._listener, selectors.EVENT_READ, "accept")
        self._selector.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._thread.start()

    def block(self) -> None:
        """Starts a partition: from now on nothing gets through, in either direction."""
        with self._lock:
            self._blocked = True

    def heal(self) -> None:
        """Ends the partition (the connections that saw it are closed) or the cut (the port
        listens again); returns once new connections are relayed."""
        with self._lock:
            self._blocked = False
            self._heal_pending = True
            self._cut = False
        self._apply()

    def cut(self) -> None:
        """The server goes down: from the return on, new connections are refused and every open
        one has been reset."""
        with self._lock:
            self._cut = True
        self._apply()

    def _apply(self) -> None:
        self._applied.clear()
        self._wake_w.send(b"h")
        if not self._applied.wait(10):
            raise RuntimeError("the proxy thread did not apply the change")

    def close(self) -> None:
        """Stops the proxy and closes every connection; idempotent."""
        if self._closing:
            return
        self._closing = True
        if self._thread.is_alive():
            self._wake_w.send(b"x")
            self._thread.join(10)
        for sock in list(self._peers):
            self._drop(sock)
        self._selector.close()
        for sock in (self._listener, self._wake_r, self._wake_w):
            sock.close()

    def __enter__(self) -> TcpProxy:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- the selector thread ---------------------------------------------------------------------

    def _run(self) -> None:
        while not self._closing:
            for key, _ in self._selector.select():
                if key.data == "wake":
                    self._wake_r.recv(64)
                    self._after_wake()
                elif key.data == "accept":
                    self._accept()
                else:
                    self._relay(key.fileobj)  # type: ignore[arg-type]

    def _after_wake(self) -> None:
        with self._lock:
            heal, self._heal_pending = self._heal_pending, False
            cut = self._cut
        if heal or cut:
            for sock in list(self._peers):
                self._drop(sock, reset=cut)
        if cut and self._listening:
            self._selector.unregister(self._listener)
            self._listener.close()
            self._listening = False
        elif not cut and not self._listening:
            self._listener = socket.create_server(("127.0.0.1", self.port))
            self._listener.setblocking(False)
            self._selector.register(self._listener, selectors.EVENT_READ, "accept")
            self._listening = True
        self._applied.set()

    def _accept(self) -> None:
        with contextlib.suppress(BlockingIOError):
            client, _ = self._listener.accept()
            with self._lock:
                blocked = self._blocked
            upstream: socket.socket | None = None
            if not blocked:
                try:
                    upstream = socket.create_connection(("127.0.0.1", self.target_port), 2.0)
                except OSError:
                    client.close()  # the target is down: refuse, as it would
                    return
                self._add(upstream, client)
            self._add(client, upstream)

    def _add(self, sock: socket.socket, peer: socket.socket | None) -> None:
        sock.setblocking(True)
        self._peers[sock] = peer
        self._selector.register(sock, selectors.EVENT_READ, "relay")

    def _relay(self, sock: socket.socket) -> None:
        try:
            data = sock.recv(_CHUNK)
        except OSError:
            data = b""
        if not data:
            self._drop(sock)
            return
        with self._lock:
            blocked = self._blocked
        peer = self._peers.get(sock)
        if blocked or peer is None:
            return  # lost on the way
        try:
            peer.sendall(data)
        except OSError:
            self._drop(sock)

    def _drop(self, sock: socket.socket, *, reset: bool = False) -> None:
        peer = self._peers.pop(sock, None)
        for s in (sock, peer):
            if s is None:
                continue
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(s)
            self._peers.pop(s, None)
            if reset:  # linger 0: close() sends RST instead of FIN
                with contextlib.suppress(OSError):
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()
