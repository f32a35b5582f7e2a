"""Independent simulation jobs in up to ``jobs`` processes (spawned: no state shared with the
caller), or in this process when one would do."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

__all__ = ["map_jobs"]

R = TypeVar("R")


def map_jobs(job: Callable[..., R], args: Sequence[tuple[Any, ...]], jobs: int = 1) -> list[R]:
    """``[job(*a) for a in args]``, in order; with ``jobs`` > 1 and more than one job, in a
    pool of that many spawned processes (``job`` and its arguments must pickle)."""
    if jobs <= 1 or len(args) <= 1:
        return [job(*a) for a in args]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(jobs, len(args)), mp_context=ctx) as pool:
        return list(pool.map(job, *zip(*args, strict=True)))
