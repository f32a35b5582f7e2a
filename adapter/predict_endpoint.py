"""``POST /v1/models/{fn}:predict`` as a plain ASGI endpoint, ahead of the Starlette router.

It is the adapter's hottest route: every client request passes here once, and at high load the
per-request framework work (Starlette's router, exception middleware, ``Request`` and
``JSONResponse`` objects, a watcher task awaited with ``asyncio.wait``) was a large share of the
adapter's CPU. This endpoint reads the body, admits the request into its function's queue, waits
for the answer (leaving the queue if the client disconnects first) and writes the response with
one ``http.response.start`` and one ``http.response.body``. Everything else (other routes, a
path this does not recognise) goes to the wrapped app. Behaviour and answers are the same as
the Starlette route had: statuses from :mod:`adapter.errors`, ``Server-Timing``,
``X-Batch-Size``, ``X-Cold-Start``, ``x-arrived-cold``.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

import orjson

from adapter.errors import AdapterError, BadRequest, PayloadTooLarge, UnknownTarget
from adapter.queue import Answer, Pending
from functions.model import InvalidInput
from functions.runtime import v1_instances
from knative.local import ARRIVED_COLD

if TYPE_CHECKING:
    from adapter.app import AdapterState

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

SLO_HEADER = "x-slo-ms"
_PREFIX = "/v1/models/"
_SUFFIX = ":predict"
_JSON = (b"content-type", b"application/json")


def slo_ms(raw: str | None, configured: float) -> float:
    """The request's SLO: the configured one, tightened by an ``X-SLO-Ms`` header."""
    if raw is None:
        return configured
    try:
        value = float(raw)
    except ValueError:
        raise BadRequest(f"X-SLO-Ms must be a number of milliseconds, got {raw!r}") from None
    if not value > 0 or value != value:
        raise BadRequest(f"X-SLO-Ms must be positive, got {raw!r}")
    return min(configured, value)


def parse_body(body: bytes) -> list[Any]:
    try:
        return v1_instances(body)
    except InvalidInput as exc:
        raise BadRequest(str(exc)) from None


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return None


class PredictEndpoint:
    """ASGI middleware answering function predicts itself; ``app`` gets everything else."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        state: AdapterState,
        slos: dict[str, float],
        ids: itertools.count[int],
        max_body_bytes: int,
    ) -> None:
        self.app = app
        self.state = state
        self.slos = slos
        self.ids = ids
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            path: str = scope["path"]
            if path.startswith(_PREFIX) and path.endswith(_SUFFIX):
                name = path[len(_PREFIX) : -len(_SUFFIX)]
                if name and "/" not in name:
                    await self._predict(name, scope, receive, send)
                    return
        await self.app(scope, receive, send)

    async def _predict(self, name: str, scope: Scope, receive: Receive, send: Send) -> None:
        state = self.state
        # the SLO runs from when the adapter took the request, reading its body included
        now = state.clock.now()
        dispatcher = state.dispatchers.get(name)
        try:
            if dispatcher is None:
                raise UnknownTarget(f"no function named {name!r}")
            body = await self._read_body(scope, receive)
            instances = parse_body(body)
            slo = slo_ms(_header(scope, b"x-slo-ms"), self.slos[name])
            seq = next(self.ids)
            item = Pending(
                id=f"r{seq}",
                function=name,
                instances=instances,
                arrival=now,
                deadline=now + slo / 1000.0,
                seq=seq,
                future=asyncio.get_running_loop().create_future(),
            )
            dispatcher.submit(item)
            answer = await self._await_answer(receive, item, dispatcher.withdraw)
        except AdapterError as exc:
            await _respond(send, exc.status, {"error": exc.reason}, ())
            return
        if answer is None:
            await send({"type": "http.response.start", "status": 499, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        total_ms = (state.clock.now() - item.arrival) * 1000.0
        # what the path spent outside the queue and the batch's round trip (reading the body,
        # resuming this handler): the margin the next batches keep off their dispatch timeout
        dispatcher.path_margin.observe(total_ms - answer.queue_ms - answer.round_trip_ms)
        timing = (
            f"queue;dur={answer.queue_ms:.2f}, upstream;dur={answer.round_trip_ms:.2f}, "
            f"compute;dur={answer.compute_ms:.2f}, total;dur={total_ms:.2f}"
        )
        headers = (
            (b"server-timing", timing.encode("latin-1")),
            (b"x-batch-size", str(answer.batch_size).encode("latin-1")),
            (b"x-cold-start", b"1" if answer.cold else b"0"),
            (ARRIVED_COLD.encode("latin-1"), b"1" if item.arrived_cold else b"0"),
        )
        await _respond(send, 200, {"predictions": answer.predictions}, headers)

    async def _read_body(self, scope: Scope, receive: Receive) -> bytes:
        limit = self.max_body_bytes
        declared = _header(scope, b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise PayloadTooLarge(f"body of {declared} bytes exceeds the limit of {limit}")
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise BadRequest("the client went away while sending its body")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise PayloadTooLarge(f"body exceeds the limit of {limit} bytes")
            chunks.append(chunk)
            if not message.get("more_body", False):
                return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    async def _await_answer(
        self, receive: Receive, item: Pending, withdraw: Callable[[Pending], None]
    ) -> Answer | None:
        """The request's answer, or None if the client went away first (it leaves the queue).

        One watcher task waits for the disconnect and cancels the request's future; the answer
        cancels the watcher. No ``asyncio.wait`` and its per-call futures and callbacks."""
        future = item.future

        async def watch() -> None:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    withdraw(item)
                    return

        watcher = asyncio.ensure_future(watch())
        try:
            return await future
        except asyncio.CancelledError:
            if watcher.done() and future.cancelled():
                return None  # the client left; the queue drops the cancelled request
            raise
        finally:
            watcher.cancel()


async def _respond(
    send: Send, status: int, payload: Any, headers: tuple[tuple[bytes, bytes], ...]
) -> None:
    body = orjson.dumps(payload)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [_JSON, (b"content-length", str(len(body)).encode()), *headers],
        }
    )
    await send({"type": "http.response.body", "body": body})
