"""The retry timing of the servers: :class:`dsched.backoff.Backoff`, which the SDK shares (its
``Reconnect`` is one), so that there is one implementation of back-off with jitter."""

from dsched.backoff import Backoff as Backoff
