"""Cluster fault-injection tests: real ZooKeeper, PostgreSQL, masters and workers as processes."""
