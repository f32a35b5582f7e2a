"""Per-request records as JSON lines, written off the request path.

Records are appended to a list in memory and a background task flushes them to the file once a
second (and at shutdown), so the hot path does one ``list.append``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adapter.serving.background import cancel_and_wait
from adapter.serving.errors import ServingError

if TYPE_CHECKING:
    from adapter.serving.pending import Pending

#: the records path that means standard output (a container's log)
STDOUT = "-"


class RecordsUnwritable(ServingError, RuntimeError):
    """The records file cannot be created or appended to: the adapter cannot start."""


class RecordWriter:
    """Buffers request records and writes them as JSON lines to ``path``."""

    def __init__(self, path: Path | None, *, flush_s: float = 1.0) -> None:
        self.path = path
        self.flush_s = flush_s
        self._buffer: list[dict[str, Any]] = []
        self._task: asyncio.Task[None] | None = None
        self.written = 0

    def add(self, record: dict[str, Any]) -> None:
        if self.path is not None:
            self._buffer.append(record)

    def flush(self) -> None:
        if self.path is None or not self._buffer:
            return
        batch, self._buffer = self._buffer, []
        text = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in batch)
        if str(self.path) == STDOUT:
            sys.stdout.write(text)
            sys.stdout.flush()
        else:
            with self.path.open("a", encoding="utf-8") as out:
                out.write(text)
        self.written += len(batch)

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.flush_s)
            self.flush()

    def start(self) -> None:
        """Check that the records can be written (``-``: standard output), then flush every
        ``flush_s``; an unwritable path is :class:`RecordsUnwritable`, before any request."""
        if self.path is not None:
            if str(self.path) != STDOUT:
                try:
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                    with self.path.open("a", encoding="utf-8"):
                        pass
                except OSError as exc:
                    raise RecordsUnwritable(
                        f"adapter.records: cannot write {self.path}: {exc.strerror or exc}"
                    ) from None
            self._task = asyncio.create_task(self._loop(), name="records")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self.flush()


def read_records(path: Path) -> list[dict[str, Any]]:
    """All records of a JSON-lines file."""
    with path.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def request_record(
    item: Pending,
    epoch: float,
    done: float,
    status: int,
    batch_size: int,
    cold: bool,
    missed: bool,
) -> dict[str, Any]:
    """One answered (or refused) function request as a record; times from ``epoch``."""
    return {
        "id": item.id,
        "function": item.function,
        "app": item.app,
        "stage": item.stage,
        "arrival": round(item.arrival - epoch, 6),
        "dispatch": round(item.dispatched - epoch, 6) if item.dispatched else None,
        "done": round(done - epoch, 6),
        "deadline": round(item.deadline - epoch, 6),
        "size": item.size,
        "batch_size": batch_size,
        "status": status,
        "cold": cold,
        "missed": missed,
    }
