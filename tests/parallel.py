"""Parallel test runs (``scripts/test``: pytest-xdist, ``-n N --dist loadgroup``): which tests
must share a process, one after the other.

- :data:`SERIAL` (``tests/cluster``): the fault-injection scenarios judge timings against the
  liveness settings (session timeout, failover delay) on a cluster of processes; they run one at a
  time, never two clusters at once.
- every module of ``tests/e2e`` is a group of its own: its tests share costly module fixtures
  (a built wheel, a compiled client, a Spark cluster, a ZooKeeper), made once instead of once per
  process.
- anything else (unit and integration tests) goes to whichever process is free, test by test.

xdist's own ``loadgroup`` reads ``xdist_group`` marks by rewriting each test's node id in the
worker, which pytest 9.2's structured node ids silently ignore (pytest-xdist issue 1386): the
groups would all be lost. So the controller derives them from the node ids itself, with
:class:`GroupScheduling` (``tests/conftest.py`` installs it for ``--dist loadgroup``). Groups are
handed out largest first (xdist's ``loadscope`` order), so the long serial group starts at once.
"""

from __future__ import annotations

from xdist.scheduler import LoadScopeScheduling

SERIAL = "serial"
_SERIAL_DIRS = ("tests/cluster/",)
_MODULE_DIRS = ("tests/e2e/",)


def group_of(nodeid: str) -> str:
    """The scheduling unit of a test: :data:`SERIAL`, its module, or the test alone."""
    path = nodeid.split("::", 1)[0]
    if path.startswith(_SERIAL_DIRS):
        return SERIAL
    if path.startswith(_MODULE_DIRS):
        return path
    return nodeid


class GroupScheduling(LoadScopeScheduling):  # type: ignore[misc]  # (xdist is untyped)
    """xdist's ``loadscope`` distribution with :func:`group_of` as the scope."""

    def _split_scope(self, nodeid: str) -> str:
        return group_of(nodeid)
