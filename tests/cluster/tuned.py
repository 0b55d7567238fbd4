"""A :class:`~tests.cluster.harness.Cluster` whose members get extra ``DSCHED_*`` settings.

The harness builds each member's environment from the test process's own, minus every ``DSCHED_*``
variable (so a developer's shell cannot leak settings into a test), plus its liveness timeouts.
Tests and benches that need a setting of their own for every member (the host selector, the
warm-up, the log level) pass it here instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from tests.cluster.harness import Cluster, Timeouts


class TunedCluster(Cluster):
    """``settings`` (``DSCHED_*`` name -> value) go into every member's environment, over the
    harness's own."""

    def __init__(
        self,
        run_dir: Path,
        db_url: str,
        settings: Mapping[str, str],
        timeouts: Timeouts | None = None,
    ) -> None:
        super().__init__(run_dir, db_url, timeouts)
        self.settings = dict(settings)

    def _env(self) -> dict[str, str]:
        return {**super()._env(), **self.settings}
