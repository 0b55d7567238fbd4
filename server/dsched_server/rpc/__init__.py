"""gRPC plumbing shared by masters and workers: serving, rich errors, channels."""
