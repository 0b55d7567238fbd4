"""The master's gRPC servicers: each parses its request (validation, protobuf -> domain values),
calls the application layer (:mod:`dsched_server.app`) or reads the store, and renders the answer;
idempotency, paging and error mapping are the wire's and stay here (ARCHITECTURE.md §10)."""
