"""The master<->worker protocol: the values both sides exchange, and (in :mod:`.wire`) their one
conversion to and from ``dsched.v1`` messages.

The value modules import no protobuf; both the engine and the worker speak in these values, and
``wire`` is the only place where they meet the generated code (ARCHITECTURE.md §8.2).
"""
