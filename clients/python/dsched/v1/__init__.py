"""Generated wire code for the dsched.v1 API (do not edit; regenerate with `make proto`)."""
