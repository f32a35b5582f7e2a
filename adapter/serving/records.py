"""Per-request records as JSON lines, written off the request path.

Records are appended to a list in memory and a background task flushes them to the file once a
second (and at shutdown), so the hot path does one ``list.append``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any


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
        with self.path.open("a", encoding="utf-8") as out:
            out.write("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in batch))
        self.written += len(batch)

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.flush_s)
            self.flush()

    def start(self) -> None:
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._task = asyncio.create_task(self._loop(), name="records")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.flush()


def read_records(path: Path) -> list[dict[str, Any]]:
    """All records of a JSON-lines file."""
    with path.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]
