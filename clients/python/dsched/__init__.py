"""dsched: the Python SDK."""
