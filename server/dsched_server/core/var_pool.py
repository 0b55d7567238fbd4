"""An instance's var pool: the OUT parameters of its succeeded tasks, merged in the order the tasks
finish (a later value for a name wins), within the size limits that keep every answer carrying the
instance small and every task's environment under ARG_MAX (``dsched.spec``: at most
``MAX_VAR_POOL_PARAMS`` names, ``MAX_PARAMS_BYTES`` of names and values; one task's OUT parameters
at most ``MAX_PARAMS`` and ``MAX_PARAMS_BYTES``)."""

from __future__ import annotations

from collections.abc import Mapping

from dsched.spec import MAX_PARAMS, MAX_PARAMS_BYTES, MAX_VAR_POOL_PARAMS, params_bytes


def merge_violation(pool: Mapping[str, str], out: Mapping[str, str]) -> str | None:
    """Why the OUT parameters ``out`` of a succeeded task cannot join ``pool``, or None.

    A task whose parameters do not fit fails with this reason: silently dropping them would leave
    its downstream tasks without values they expect.
    """
    if len(out) > MAX_PARAMS or params_bytes(out) > MAX_PARAMS_BYTES:
        return (
            f"its OUT parameters ({len(out)}, {params_bytes(out)} bytes) exceed {MAX_PARAMS} "
            f"parameters or {MAX_PARAMS_BYTES} bytes"
        )
    merged = {**pool, **out}
    size = params_bytes(merged)
    if len(merged) > MAX_VAR_POOL_PARAMS or size > MAX_PARAMS_BYTES:
        return (
            f"its OUT parameters would grow the instance's var pool to {len(merged)} parameters "
            f"and {size} bytes; at most {MAX_VAR_POOL_PARAMS} and {MAX_PARAMS_BYTES}"
        )
    return None
