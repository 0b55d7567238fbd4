"""The ``dsched`` command line (entry point :func:`dsched.cli.main.main`)."""
