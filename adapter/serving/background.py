"""Stopping the adapter's background loops (loop lag, memory trim, core controllers, the
advisor, records, dispatchers): one way to cancel a task and wait until it has stopped."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

__all__ = ["cancel_and_wait"]


async def cancel_and_wait(task: asyncio.Task[Any] | None) -> None:
    """Cancel ``task`` (nothing when None) and return once it has stopped; its cancellation is
    not raised here."""
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
