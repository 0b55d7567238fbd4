"""dsched child programs: task types that run dsched's own code in a process of the attempt's
(HTTP; SQL and others that follow) rather than a user's script.

Each module here is a program started as ``python -I -u -m dsched_worker.programs.<name>`` by
:mod:`dsched_worker.tasks.child`, in the attempt's own process group, so that its work (a request, a
query, a driver) never runs inside the worker and is killed, timed out and retried like a shell
task. The protocol between the two sides is in :mod:`dsched_worker.programs.runtime`.

Start-up cost matters (a program starts per attempt), so this package imports nothing: not the
worker (``dsched_worker.tasks`` pulls in asyncio and the protocol records), not grpc. A program
imports only the standard library, :mod:`~dsched_worker.programs.runtime` and what its own work
needs.
"""
