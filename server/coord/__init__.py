"""dsched package."""
