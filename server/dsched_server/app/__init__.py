"""The application layer: what a caller can ask of dsched (start a run, restart it, control it,
watch it, force a task to success), in domain values, without protobuf or gRPC
(ARCHITECTURE.md §10).

The gRPC handlers in :mod:`dsched_server.api` parse a request into these values, call here and
render the answer; a scheduler, a backfill or a sub-workflow call here directly.
"""
