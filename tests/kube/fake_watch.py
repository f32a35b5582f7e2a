"""The in-memory API server's watches (a test double's, see :mod:`tests.kube.fake_api`).

Every write bumps an object's ``resourceVersion`` through :meth:`WatchLog._bump`, which also
logs the change; a ``GET`` of a collection with ``watch=true`` streams the log as Kubernetes
does, one JSON event per line (``ADDED``, ``MODIFIED``, ``DELETED``): the objects as they are
now when no ``resourceVersion`` is given, then every change after it, until ``timeoutSeconds``
(or the server stops).
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import json
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import StreamingResponse

Obj = dict[str, Any]

#: the plural each kind is stored under
PLURALS = {"Service": "services", "Revision": "revisions", "PodAutoscaler": "podautoscalers"}


class WatchLog:
    """The change log and the ``watch=true`` stream (mixed into the fake API server)."""

    _objects: dict[tuple[str, str, str], Obj]
    _versions: itertools.count[int]
    _lock: threading.Lock
    _settle: Callable[[], None]

    def _init_watches(self) -> None:
        self._events: list[tuple[int, str, str, Obj]] = []  # (version, type, plural, object)
        self._stopping = threading.Event()

    def _bump(self, obj: Obj) -> None:
        metadata = obj["metadata"]
        change = "MODIFIED" if "resourceVersion" in metadata else "ADDED"
        version = next(self._versions)
        metadata["resourceVersion"] = str(version)
        plural = PLURALS.get(str(obj.get("kind", "")), "")
        if plural:
            self._events.append((version, change, plural, obj))

    def _deleted(self, plural: str, obj: Obj) -> None:
        gone = copy.deepcopy(obj)
        version = next(self._versions)
        gone["metadata"]["resourceVersion"] = str(version)
        self._events.append((version, "DELETED", plural, gone))

    def _list_version(self) -> str:
        return str(self._events[-1][0]) if self._events else "0"

    def _watch(
        self, request: Request, plural: str, namespace: str, wanted: Callable[[Obj], bool]
    ) -> StreamingResponse:
        timeout = float(request.query_params.get("timeoutSeconds", "1800") or 1800)
        since = int(request.query_params.get("resourceVersion", "0") or 0)

        def line(change: str, obj: Obj) -> bytes:
            return json.dumps({"type": change, "object": obj}).encode() + b"\n"

        def belongs(obj: Obj) -> bool:
            return obj["metadata"].get("namespace") == namespace and wanted(obj)

        async def events() -> AsyncIterator[bytes]:
            deadline = time.monotonic() + timeout
            with self._lock:
                self._settle()
                if since:  # resume: the changes after that version
                    position = next((i for i, e in enumerate(self._events) if e[0] > since),
                                    len(self._events))  # fmt: skip
                    first: list[bytes] = []
                else:  # from now: what there is, as ADDED
                    position = len(self._events)
                    first = [line("ADDED", copy.deepcopy(obj))
                             for (p, _, _), obj in sorted(self._objects.items())
                             if p == plural and belongs(obj)]  # fmt: skip
            for chunk in first:
                yield chunk
            while time.monotonic() < deadline and not self._stopping.is_set():
                with self._lock:
                    self._settle()
                    fresh = self._events[position:]
                    position = len(self._events)
                    chunks = [line(change, copy.deepcopy(obj)) for _, change, p, obj in fresh
                              if p == plural and belongs(obj)]  # fmt: skip
                for chunk in chunks:
                    yield chunk
                await asyncio.sleep(0.01)

        return StreamingResponse(events(), media_type="application/json")
