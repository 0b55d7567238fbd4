"""The protocol's one seam to ``dsched.v1``: every value of :mod:`dsched_server.protocol` to and
from its message. Decoders check what they read: they return a valid value or raise
:class:`dsched.errors.InvalidArgument` naming every bad field, whatever the bytes held."""
