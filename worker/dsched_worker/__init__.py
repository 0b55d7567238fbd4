"""dsched worker: runs task attempts for masters and serves their logs.

Composition root: :mod:`~dsched_worker.app` (:class:`~dsched_worker.app.Worker`,
:class:`~dsched_worker.app.WorkerOptions`). The parts, each one noun:

- ``servicer`` / ``log_service`` — the gRPC ``WorkerService`` and ``LogService`` adapters;
- ``convert`` — the only seam between ``dsched.v1`` messages and the records in ``execution``;
- ``runner`` (with ``attempt``) — admission, slots, kill, timeout and fencing of attempts;
- ``tasks`` — task types by kind (``shell``, ``python``, ``http``, ..., with ``out_params``);
  ``programs`` — dsched's own code run as a task's child process; ``process`` — process groups;
- ``logs`` — log files, their index and live followers;
- ``reporter`` (with ``stream`` and ``outbox``) — events to owner masters until acknowledged;
- ``agent`` — epoch, registry node and heartbeat, self-fencing on a lost session;
- ``orphans`` — the process groups of running tasks, recorded on disk; ``reaper`` — the process
  that kills them the moment the worker dies.

The worker never touches the metadata database (an import-linter contract checks it).
"""
