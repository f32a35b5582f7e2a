"""``POST /v1/models/{fn}:predict`` and ``POST /v2/models/{fn}/infer`` (the Open Inference
Protocol, as KServe and Triton speak it), ahead of the Starlette router.

It is the adapter's hottest route: every client request passes here once, and at high load the
per-request framework work (Starlette's router, exception middleware, ``Request`` and
``JSONResponse`` objects, a watcher task awaited with ``asyncio.wait``) was a large share of the
adapter's CPU. This endpoint reads the body, admits the request into its function's queue, waits
for the answer (leaving the queue if the client disconnects first) and writes the response with
one ``http.response.start`` and one ``http.response.body`` (:class:`PredictMiddleware`, under
uvicorn and in tests), or from callbacks in the adapter's own server
(:mod:`adapter.serving.http_server`,
``slackwise serve``). Everything else (other routes, a path this does not recognise) goes to the
wrapped app. Behaviour and answers are the same as
the Starlette route had: statuses from :mod:`adapter.serving.errors`, ``Server-Timing``,
``X-Batch-Size``, ``X-Cold-Start``, ``x-arrived-cold``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from typing import TYPE_CHECKING, Any, NamedTuple

import orjson

from adapter.serving.errors import AdapterError, BadRequest, UnknownTarget
from adapter.serving.input_limits import InputLimits
from adapter.serving.pending import Answer, Pending
from functions.headers import ARRIVED_COLD
from functions.model import InvalidInput
from functions.runtime import v1_instances
from functions.signature import Signature
from functions.tensors import TensorSpec
from functions.v2 import V2Request, v2_request
from functions.v2_answer import BINARY_HEADER, v2_answer
from slackwise_core.clock import deadline_for

if TYPE_CHECKING:
    from adapter.serving.state import AdapterState

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_PREFIX = "/v1/models/"
_SUFFIX = ":predict"
_APPS = "/v1/apps/"
_V2_PREFIX = "/v2/models/"
_V2_SUFFIX = "/infer"
_JSON = (b"content-type", b"application/json")
_ARRIVED_COLD = ARRIVED_COLD.encode("latin-1")
_BINARY_HEADER = BINARY_HEADER.encode("latin-1")


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


def check_reachable(slo: float, bare_ms: float, what: str) -> None:
    """Raise the 400 of an SLO (ms) under ``bare_ms``, what one instance alone takes through
    ``what`` with nothing queued: no request can meet it, so none is queued to miss it. (Asked
    where the door judges, ``late: predict``; ``late: serve`` serves whatever comes.)"""
    if slo < bare_ms:
        raise BadRequest(
            f"X-SLO-Ms {slo:g} is below {what}'s bare latency (one instance alone takes about "
            f"{bare_ms:.1f} ms): no request can meet it"
        )


def parse_body(body: bytes) -> list[Any]:
    try:
        return v1_instances(body)
    except InvalidInput as exc:
        raise BadRequest(str(exc)) from None


def parse_v2_body(
    body: bytes, header_length: str | None, known: Signature | None
) -> tuple[list[Any], V2Request]:
    """The instances of a V2 infer body (one input tensor, a row an instance; binary tensor
    data after the JSON when ``header_length`` is given), checked against the model's
    signature where it is ``known``, and what the request asks of its answer."""
    if not body:
        raise BadRequest('empty body: send {"inputs": [{"name", "shape", "datatype", "data"}]}')
    try:
        request = v2_request(body, header_length)
        return (request.instances if known is None else known.instances(request)), request
    except InvalidInput as exc:
        raise BadRequest(str(exc)) from None


class Target(NamedTuple):
    """The function a predict is for, and whether it speaks V2 (else KServe V1)."""

    name: str
    v2: bool = False


def traceparent(raw: str | None) -> str | None:
    """A W3C ``traceparent`` worth forwarding (``00-<32 hex>-<16 hex>-<2 hex>``, ids not all
    zero); None for anything else (the recommendation says to ignore an invalid one)."""
    if raw is None or len(raw) != 55:
        return None
    parts = raw.lower().split("-")
    if [len(p) for p in parts] != [2, 32, 16, 2] or parts[0] == "ff":
        return None
    if any(c not in "0123456789abcdef" for p in parts for c in p):
        return None
    if parts[1] == "0" * 32 or parts[2] == "0" * 16:
        return None
    return "-".join(parts)


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return None


class PredictEndpoint:
    """Admission and answers of function predicts, for the ASGI middleware below and for the
    adapter's own server (:mod:`adapter.serving.http_server`), which calls it from callbacks."""

    def __init__(
        self,
        *,
        state: AdapterState,
        slos: dict[str, float],
        ids: Iterator[int],
        max_body_bytes: int,
        limits: dict[str, InputLimits] | None = None,
        app_limits: dict[str, InputLimits] | None = None,
        signatures: dict[str, Signature] | None = None,
    ) -> None:
        self.state = state
        self.slos = slos
        self.ids = ids
        self.max_body_bytes = max_body_bytes
        #: each function's and each app's limits (:mod:`adapter.serving.input_limits`)
        self.limits = limits or {}
        self.app_limits = app_limits or {}
        #: each function's and each app's V2 signature, where its model is one we know
        self.signatures = signatures or {}
        self._any = InputLimits("the adapter", 2**31, max_body_bytes)

    def limits_of(self, method: str, path: str) -> InputLimits:
        """The limits of the request ``method path`` (the adapter's own body limit for
        anything that is not a predict of a known function or app)."""
        target = self.function_of(method, path)
        if target is not None:
            if target.name not in self.limits and target.name in self.app_limits:
                return self.app_limits[target.name]  # an app over V2
            return self.limits.get(target.name, self._any)
        if method == "POST" and path.startswith(_APPS) and path.endswith(_SUFFIX):
            return self.app_limits.get(path[len(_APPS) : -len(_SUFFIX)], self._any)
        return self._any

    @staticmethod
    def function_of(method: str, path: str) -> Target | None:
        """The function a ``POST /v1/models/{fn}:predict`` or a ``POST /v2/models/{fn}/infer``
        (also ``.../{fn}/versions/{v}/infer``) is for; None for any other request."""
        if method != "POST":
            return None
        if path.startswith(_PREFIX) and path.endswith(_SUFFIX):
            name = path[len(_PREFIX) : -len(_SUFFIX)]
            if name and "/" not in name:
                return Target(name)
        elif path.startswith(_V2_PREFIX) and path.endswith(_V2_SUFFIX):
            parts = path[len(_V2_PREFIX) : -len(_V2_SUFFIX)].split("/")
            if parts[0] and (len(parts) == 1 or (len(parts) == 3 and parts[1] == "versions")):
                return Target(parts[0], v2=True)
        return None

    def target_of(self, method: str, path: str) -> Target | None:
        """The function a request is a predict of (None for anything else, an app's V2 infer
        included: the router answers those, as it does ``/v1/apps/{app}:predict``)."""
        target = self.function_of(method, path)
        state = self.state
        if (
            target is not None
            and target.name not in state.dispatchers
            and target.name in state.chains
        ):
            return None
        return target

    def admit(
        self,
        target: Target | str,
        body: bytes,
        slo_header: str | None,
        now: float,
        trace: str | None = None,
        *,
        waited_s: float = 0.0,
        header_length: str | None = None,
    ) -> Pending:
        """Queue the request (its SLO runs from ``now``, when the adapter took it; ``trace``: its
        ``traceparent`` header; ``header_length``: its ``Inference-Header-Content-Length``);
        raises :class:`adapter.serving.errors.AdapterError` for a
        request that cannot be admitted."""
        name, v2 = (target, False) if isinstance(target, str) else target
        dispatcher = self.state.dispatchers.get(name)
        if dispatcher is None:
            raise UnknownTarget(f"no function named {name!r}")
        slo = slo_ms(slo_header, self.slos[name])
        if slo_header is not None and dispatcher.controller.late == "predict":
            check_reachable(slo, dispatcher.controller.reader.estimate_ms(1), f"function {name}")
        # the SLO runs from when the client sent it: the time it sat unread before the adapter
        # took it (behind the loop's turns, or in line for a turn's budget) is gone already
        due = deadline_for(now, slo) - waited_s - dispatcher.door.lag.recent_s()
        # refused before the body is parsed: a refusal under overload costs next to nothing
        dispatcher.door.check(now, due, hold=slo_header is None and waited_s == 0.0)
        asked = None
        if v2:
            instances, asked = parse_v2_body(body, header_length, self.signatures.get(name))
        else:
            instances = parse_body(body)
        if name in self.limits:  # before it joins a queue: it never shares a good batch
            self.limits[name].check_count(len(instances))
        seq = next(self.ids)
        item = Pending(
            id=f"r{seq}",
            function=name,
            instances=instances,
            arrival=now,
            deadline=due,
            seq=seq,
            future=asyncio.get_running_loop().create_future(),
            v2=asked,
            traceparent=traceparent(trace),
            input_bytes=len(body) / max(1, len(instances)),
        )
        dispatcher.submit(item)
        return item

    def withdraw(self, item: Pending) -> None:
        """The client went away: the request leaves its queue."""
        dispatcher = self.state.dispatchers.get(item.function)
        if dispatcher is not None:
            dispatcher.withdraw(item)

    @staticmethod
    def failure(item: Pending, exc: AdapterError) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """Status, headers and body of an admitted request that failed (pruned late, refused
        by its function, ...): the error, and whether it arrived cold, as an answer says."""
        headers = [*exc.headers(), (_ARRIVED_COLD, b"1" if item.arrived_cold else b"0")]
        return exc.status, headers, orjson.dumps({"error": exc.reason})

    def answer(self, item: Pending, answer: Answer) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """Status, headers and body of a request's answer."""
        total_ms = (self.state.clock.now() - item.arrival) * 1000.0
        # what the path spent outside the queue and the batch's round trip (reading the body,
        # resuming the handler): the margin the next batches keep off their dispatch timeout
        dispatcher = self.state.dispatchers[item.function]
        dispatcher.path_margin.observe(total_ms - answer.queue_ms - answer.round_trip_ms)
        timing = (
            f"queue;dur={answer.queue_ms:.2f}, upstream;dur={answer.round_trip_ms:.2f}, "
            f"compute;dur={answer.compute_ms:.2f}, total;dur={total_ms:.2f}"
        )
        headers = [
            _JSON,
            (b"server-timing", timing.encode("latin-1")),
            (b"x-batch-size", str(answer.batch_size).encode("latin-1")),
            (b"x-cold-start", b"1" if answer.cold else b"0"),
            (_ARRIVED_COLD, b"1" if item.arrived_cold else b"0"),
        ]
        if item.v2 is not None:
            return self.v2_answer(item.function, answer.predictions, item.v2, headers)
        return 200, headers, orjson.dumps({"predictions": answer.predictions})

    def outputs_of(self, name: str) -> tuple[TensorSpec, ...]:
        """What a function or an app answers by V2: its model's declared outputs, or those
        its V2 upstream's last answer carried (empty: read from the predictions)."""
        known = self.signatures.get(name)
        if known is not None:
            return known.outputs
        dispatcher = self.state.dispatchers.get(name)
        return () if dispatcher is None else dispatcher.sender.codec.outputs

    def v2_answer(
        self,
        name: str,
        predictions: list[Any],
        asked: V2Request,
        headers: list[tuple[bytes, bytes]],
        specs: tuple[TensorSpec, ...] | None = None,
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """A V2 answer of ``name``'s predictions as ``asked`` (its declared outputs, or
        ``specs``): JSON, or a JSON header and binary tensor data."""
        if specs is None:
            specs = self.outputs_of(name)
        try:
            body, head = v2_answer(name, predictions, asked, specs)
        except InvalidInput as exc:  # an output another system's model does not answer
            return 400, [_JSON], orjson.dumps({"error": str(exc)})
        except ValueError as exc:
            return 502, [_JSON], orjson.dumps({"error": f"{name}: {exc}"})
        if head is None:
            return 200, headers, body
        binary = [
            (b"content-type", b"application/octet-stream"),
            (_BINARY_HEADER, str(head).encode("latin-1")),
        ]
        return 200, [*binary, *headers[1:]], body


class PredictMiddleware:
    """ASGI middleware answering function predicts through ``endpoint``; ``app`` gets the rest
    (this is the path under uvicorn and in-process tests; ``slackwise serve`` uses
    :mod:`adapter.serving.http_server`)."""

    def __init__(self, app: ASGIApp, *, endpoint: PredictEndpoint) -> None:
        self.app = app
        self.endpoint = endpoint

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            target = self.endpoint.target_of(scope["method"], scope["path"])
            if target is not None:
                await self._predict(target, scope, receive, send)
                return
        await self.app(scope, receive, send)

    async def _predict(self, name: Target, scope: Scope, receive: Receive, send: Send) -> None:
        endpoint = self.endpoint
        now = endpoint.state.clock.now()
        try:
            body = await self._read_body(scope, receive)
            slo, trace = _header(scope, b"x-slo-ms"), _header(scope, b"traceparent")
            item = endpoint.admit(
                name, body, slo, now, trace, header_length=_header(scope, _BINARY_HEADER)
            )
        except AdapterError as exc:
            await _respond(send, exc.status, exc.headers(), orjson.dumps({"error": exc.reason}))
            return
        try:
            answer = await self._await_answer(receive, item)
        except AdapterError as exc:
            await _respond(send, *endpoint.failure(item, exc))
            return
        if answer is None:
            await send({"type": "http.response.start", "status": 499, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        await _respond(send, *endpoint.answer(item, answer))

    async def _read_body(self, scope: Scope, receive: Receive) -> bytes:
        limits = self.endpoint.limits_of(scope["method"], scope["path"])
        limit = limits.max_body_bytes
        declared = _header(scope, b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise limits.too_large(int(declared))
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise BadRequest("the client went away while sending its body")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise limits.too_large()
            chunks.append(chunk)
            if not message.get("more_body", False):
                return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    async def _await_answer(self, receive: Receive, item: Pending) -> Answer | None:
        """The request's answer, or None if the client went away first (it leaves the queue).

        One watcher task waits for the disconnect and withdraws the request; the answer cancels
        the watcher. No ``asyncio.wait`` and its per-call futures and callbacks."""
        future = item.future

        async def watch() -> None:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    self.endpoint.withdraw(item)
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
    send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes
) -> None:
    length = (b"content-length", str(len(body)).encode("latin-1"))
    await send({"type": "http.response.start", "status": status, "headers": [*headers, length]})
    await send({"type": "http.response.body", "body": body})
