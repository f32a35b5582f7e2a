"""One client connection of the adapter's own HTTP/1.1 server: parsed by ``httptools`` in an
``asyncio.Protocol``, predicts admitted from the parser's callbacks and answered from their
futures' done-callbacks, everything else through the ASGI bridge; answers leave in request
order (keep-alive and pipelining). Its limits and timeouts are
:mod:`adapter.serving.http_limits`; a read that comes after the turn's budget for clients waits in
line (:mod:`adapter.serving.read_budget`). :mod:`adapter.serving.http_server` runs it; what its
connections share is :mod:`adapter.serving.http_shared`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import deque
from typing import TYPE_CHECKING, Any

import httptools
import orjson

from adapter.serving.asgi_bridge import AsgiRequest, run_asgi
from adapter.serving.errors import AdapterError
from adapter.serving.http_answers import error_answer, response_head, status_answer
from adapter.serving.http_limits import (
    BODY_STALL_S,
    BODY_TIMEOUT_S,
    DRAIN_RETRY_S,
    HEAD_TIMEOUT_S,
    IDLE_TIMEOUT_S,
    MAX_HEADER_BYTES,
    MAX_HEADERS,
    MAX_URL_BYTES,
    PREDICTS,
    STATUS_READS,
    Refuse,
)
from adapter.serving.input_limits import InputLimits
from adapter.serving.predict_endpoint import PredictEndpoint, Target
from adapter.serving.read_budget import MAX_HELD_BYTES

if TYPE_CHECKING:
    from adapter.serving.http_shared import Server
    from adapter.serving.pending import Pending

logger = logging.getLogger(__name__)

__all__ = ["Connection"]

#: the headers a predict reads (the last: the JSON's length in a body with binary tensor data)
_READ = (b"x-slo-ms", b"traceparent", b"inference-header-content-length")
_JSON = (b"content-type", b"application/json")
_STALLED = f"request body stalled: no bytes for {BODY_STALL_S:g} s"


#: the parser of a connection that has parsed nothing yet, or has closed: made when the first
#: request is parsed (a connection refused unparsed never makes one: it cost a tenth of the
#: adapter's loop under a flood of new connections, for callbacks looked up by name), and let
#: go when the connection closes (see ``connection_lost``)
_NO_PARSER = httptools.HttpRequestParser(None)


class _Exchange:
    """One request's place in its connection's answer order."""

    __slots__ = ("close", "data", "item", "task")

    def __init__(self, close: bool) -> None:
        self.close = close
        self.data: bytes | None = None
        self.item: Pending | None = None
        self.task: asyncio.Task[None] | None = None


class Connection(asyncio.Protocol):
    """One client connection of the adapter's server (see the module docstring)."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.parser = _NO_PARSER
        self.transport: asyncio.Transport | None = None
        self.exchanges: deque[_Exchange] = deque()
        self.closing = False
        #: resolved when the client goes; made only for a request the app answers (a task)
        self._gone: asyncio.Future[None] | None = None
        self._url = b""
        self._headers: list[tuple[bytes, bytes]] = []
        self._header_bytes = 0
        self._body: list[bytes] = []
        self._size = 0
        self._declared = -1
        self._limits: InputLimits | None = None
        self._body_by = 0.0  # when the whole body must have come (BODY_TIMEOUT_S)
        self._too_large = False
        self._refusal: Refuse | None = None
        self._in_message = False
        self._timer: asyncio.TimerHandle | None = None
        self._due: float | None = None
        self._due_status: int | None = None
        self._due_reason = ""
        #: bytes read while waiting in line for a turn's budget (:mod:`.read_budget`)
        self._held: list[bytes] | None = None
        self._held_bytes = 0
        self._paused = False
        #: how long the bytes being handled waited in that line (they count toward the SLO)
        self._waited_s = 0.0
        #: how long this connection waited in the kernel's accept queue (set when accepted):
        #: its first request was sent that long before the adapter could read it
        self._accept_wait_s = 0.0

    def _arm(self, seconds: float, status: int | None, reason: str) -> None:
        """One deadline per connection: past it, answer ``status`` (408) and close, or (None)
        just close an idle keep-alive connection. Setting it is three assignments; a single
        timer wakes at the earliest and looks again (no timer object per request)."""
        self._due = self.server.loop.time() + seconds
        self._due_status = status
        self._due_reason = reason
        if self._timer is None:
            self._timer = self.server.loop.call_at(self._due, self._expired)

    def _sooner(self) -> None:
        """After a read that left a request unfinished: a deadline sooner than the timer (a
        body's stall, 3 s, under the head's 10 s) gets a timer of its own. Only here, so a
        request that comes whole in one read makes no timer."""
        timer, due = self._timer, self._due
        if timer is not None and due is not None and due < timer.when():
            timer.cancel()
            self._timer = self.server.loop.call_at(due, self._expired)

    def _disarm(self) -> None:
        self._due = None

    def _expired(self) -> None:
        self._timer = None
        if self._due is None or self.closing or self.transport is None:
            return
        loop = self.server.loop
        if loop.time() < self._due:  # moved on since: wake again at the new deadline
            self._timer = loop.call_at(self._due, self._expired)
            return
        if self._due_status is None:
            self.closing = True
            self.transport.close()
        else:
            self._fail(self._due_status, self._due_reason)

    # -- asyncio.Protocol ----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # (TCP_NODELAY: both uvloop and asyncio set it on every TCP connection they make;
        # tests/test_nodelay.py reads it off the live sockets)
        self.transport = transport  # type: ignore[assignment]
        self.server.connections.add(self)
        backlog = self.server.unparsed.backlog
        backlog.accepted += 1
        self._accept_wait_s = backlog.wait_s(self.server.loop.time())
        self._arm(HEAD_TIMEOUT_S, None, "")  # a connection that never sends is closed

    def data_received(self, data: bytes) -> None:
        if self.closing:
            return
        held = self._held
        if held is not None:  # waiting in line already: keep the bytes in order
            held.append(data)
            self._held_bytes += len(data)
            if self._held_bytes > MAX_HELD_BYTES and self.transport is not None:
                self.transport.pause_reading()
                self._paused = True
            return
        reads = self.server.reads
        if reads.over() and not self._status_read(data):
            # this turn's share for clients is spent: the replicas' answers first
            self._held, self._held_bytes = [data], len(data)
            reads.defer(self)
            return
        self._receive(data)

    def _status_read(self, data: bytes) -> bool:
        """Does ``data`` start a status or health read at a request boundary?"""
        return not self._in_message and not self.exchanges and data.startswith(STATUS_READS)

    def refuse(self, waited_s: float) -> None:
        """Refuse the predict held while this connection waited ``waited_s`` in a congested
        line: the canned 503, unparsed, when the bytes are one whole predict at a request
        boundary; anything else is handled as usual."""
        held = self._held
        if held is not None and len(held) == 1 and self.transport is not None:
            data = held[0]
            if not self._in_message and not self.exchanges and data.startswith(PREDICTS):
                answer = self.server.unparsed.shed(data, waited_s)
                if answer is not None:
                    self._held = None
                    if self._paused:
                        self._paused = False
                        self.transport.resume_reading()
                    self.transport.write(answer)
                    return
        self.resume(waited_s)

    def resume(self, waited_s: float) -> None:
        """Handle the bytes held while this connection waited ``waited_s`` in line."""
        held, self._held = self._held, None
        if self.closing or self.transport is None or held is None:
            return
        if self._paused:
            self._paused = False
            self.transport.resume_reading()
        self._waited_s = waited_s
        try:
            self._receive(held[0] if len(held) == 1 else b"".join(held))
        finally:
            self._waited_s = 0.0

    def _receive(self, data: bytes) -> None:
        if not self._in_message and not self.exchanges and data.startswith(PREDICTS):
            # a refusal decided before parsing: it costs a write, not a parse (under overload
            # the parses of refused requests would otherwise keep the loop late)
            answer = self.server.unparsed.answer(
                data, draining=self.server.draining, waited_s=self._waited_s
            )
            if answer is not None:
                assert self.transport is not None
                self.transport.write(answer[0])
                if answer[1]:
                    self.closing = True
                    self.transport.close()
                return
        if self.parser is _NO_PARSER:
            if self.closing:
                return
            self.parser = httptools.HttpRequestParser(self)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(400, "protocol upgrades (WebSocket, h2c) are not supported")
        except httptools.HttpParserCallbackError:
            refusal, self._refusal = self._refusal, None
            if refusal is None:
                raise
            self._fail(refusal.status, refusal.reason)
        except httptools.HttpParserError as exc:
            self._fail(400, f"malformed HTTP request: {exc}")
        else:
            if self._in_message:
                self._sooner()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closing = True
        self._disarm()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.server.connections.discard(self)
        if self._gone is not None and not self._gone.done():
            self._gone.set_result(None)
        for exchange in self.exchanges:
            if exchange.item is not None:
                self.server.endpoint.withdraw(exchange.item)
        self.exchanges.clear()
        # the parser holds this connection for its callbacks, the transport does too, and a
        # refusal raised from a callback holds the frames that hold it: cycles that only the
        # garbage collector frees. Under a flood of connections they piled up by the ten
        # thousand, and each full collection stopped the loop for 120-190 ms (every refusal and
        # answer waited behind it); broken here, a connection is freed when it closes
        self.parser = _NO_PARSER
        self.transport = None
        self._refusal = None

    # -- httptools callbacks -------------------------------------------------------------------

    def on_message_begin(self) -> None:
        self._in_message = True
        self._url = b""
        self._headers = []
        self._body = []
        self._size = 0
        self._declared = -1
        self._limits = None
        self._too_large = False
        self._header_bytes = 0
        self._arm(HEAD_TIMEOUT_S, 408, f"request head not received within {HEAD_TIMEOUT_S:g} s")

    def _refuse(self, status: int, reason: str) -> None:
        self._refusal = Refuse(status, reason)
        raise self._refusal

    def on_url(self, url: bytes) -> None:
        self._url += url
        if len(self._url) > MAX_URL_BYTES:
            self._refuse(414, f"URL longer than {MAX_URL_BYTES} bytes")

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        self._headers.append((name, value))
        self._header_bytes += len(name) + len(value) + 4
        if len(self._headers) > MAX_HEADERS:
            self._refuse(431, f"more than {MAX_HEADERS} header fields")
        if self._header_bytes > MAX_HEADER_BYTES:
            self._refuse(431, f"header fields larger than {MAX_HEADER_BYTES} bytes")
        if name == b"content-length" and value.isdigit():
            self._declared = int(value)

    def on_headers_complete(self) -> None:
        if self.parser.should_upgrade():
            self._refuse(400, "protocol upgrades (WebSocket, h2c) are not supported")
        limits = self._limits = self.server.limits_of(self.parser.get_method(), self._url)
        if self._declared > limits.max_body_bytes:  # from Content-Length, before the body
            self._refuse(413, limits.too_large(self._declared).reason)
        self._body_by = self.server.loop.time() + BODY_TIMEOUT_S
        self._arm(BODY_STALL_S, 408, _STALLED)

    def on_body(self, body: bytes) -> None:
        # each piece of the body moves the stall deadline on, up to the body's whole allowance
        left = self._body_by - self.server.loop.time()
        if left < BODY_STALL_S:
            self._arm(left, 408, f"request body not received within {BODY_TIMEOUT_S:g} s")
        else:
            self._arm(BODY_STALL_S, 408, _STALLED)
        if self._too_large:
            return
        self._size += len(body)
        assert self._limits is not None
        if self._size > self._limits.max_body_bytes:  # while it streams: refused at once
            self._too_large = True
            self._body = []
            self._refuse(413, self._limits.too_large().reason)
        else:
            self._body.append(body)

    def on_message_complete(self) -> None:
        self._in_message = False
        self._disarm()
        keep_alive = self.parser.should_keep_alive()
        exchange = _Exchange(close=not keep_alive)
        self.exchanges.append(exchange)
        if self.server.draining:  # on its way out: refused politely, and the connection closes
            exchange.close = True
            headers = [
                (b"content-type", b"application/json"),
                (b"retry-after", b"%d" % DRAIN_RETRY_S),
            ]
            self._answer(exchange, 503, headers, b'{"error":"the adapter is shutting down"}')
            return
        if self._too_large:  # (refused as it streamed; kept for a parser that completes first)
            exchange.close = True
            assert self._limits is not None
            self._answer(exchange, *error_answer(self._limits.too_large()))
            return
        method = self.parser.get_method().decode("latin-1")
        url = httptools.parse_url(self._url)
        path = url.path.decode("latin-1")
        body = self._body[0] if len(self._body) == 1 else b"".join(self._body)
        name = self.server.endpoint.target_of(method, path)
        if name is not None:
            self._predict(exchange, name, body)
        elif (status := status_answer(self.server.state, method, path)) is not None:
            self._answer(exchange, status[0], [_JSON], status[1])
        else:
            query = url.query or b""
            assert self.transport is not None
            request = AsgiRequest(method, path, query, self._headers, body, self.transport)
            exchange.task = self.server.loop.create_task(
                run_asgi(
                    self.server.app,
                    request,
                    self._until_gone,
                    functools.partial(self._answer, exchange),
                )
            )

    # -- predicts, from callbacks --------------------------------------------------------------

    def _predict(self, exchange: _Exchange, name: Target, body: bytes) -> None:
        endpoint = self.server.endpoint
        found = {k.decode(): v.decode("latin-1") for k, v in self._headers if k in _READ}
        try:
            now = endpoint.state.clock.now()
            slo, trace = found.get("x-slo-ms"), found.get("traceparent")
            binary = found.get("inference-header-content-length")
            # the first request of a connection also waited to be accepted (a client that
            # opens a connection per request loses that from its SLO too)
            waited, self._accept_wait_s = self._waited_s + self._accept_wait_s, 0.0
            item = endpoint.admit(
                name, body, slo, now, trace, waited_s=waited, header_length=binary
            )
        except AdapterError as exc:
            self._answer(exchange, *error_answer(exc))
            return
        exchange.item = item
        item.future.add_done_callback(lambda f: self._predicted(exchange, f))

    def _predicted(self, exchange: _Exchange, future: asyncio.Future[Any]) -> None:
        item, exchange.item = exchange.item, None
        if future.cancelled() or item is None or self.closing:
            return  # the client went away and withdrew it
        exc = future.exception()
        if isinstance(exc, AdapterError):
            self._answer(exchange, *PredictEndpoint.failure(item, exc))
        elif exc is not None:
            logger.error("predict failed in the adapter: %r", exc)
            self._answer(exchange, 500, [], orjson.dumps({"error": f"adapter error: {exc!r}"}))
        else:
            status, headers, payload = self.server.endpoint.answer(item, future.result())
            self._answer(exchange, status, headers, payload)

    def _until_gone(self) -> asyncio.Future[None]:
        if self._gone is None:
            self._gone = self.server.loop.create_future()
            if self.transport is None or self.closing:
                self._gone.set_result(None)
        return self._gone

    # -- answers, in request order -------------------------------------------------------------

    def _answer(
        self, exchange: _Exchange, status: int, headers: list[tuple[bytes, bytes]], body: bytes
    ) -> None:
        if exchange.data is not None:
            return
        exchange.data = response_head(status, headers, len(body), exchange.close) + body
        transport = self.transport
        if transport is None or self.closing:
            return
        while self.exchanges and self.exchanges[0].data is not None:
            done = self.exchanges.popleft()
            assert done.data is not None
            transport.write(done.data)
            if done.close:
                self.closing = True
                self._disarm()
                transport.close()
                return
        if not self.exchanges and self._due is None:
            self._arm(IDLE_TIMEOUT_S, None, "")  # idle keep-alive: closed after a while

    def _fail(self, status: int, reason: str) -> None:
        exchange = _Exchange(close=True)
        self.exchanges.append(exchange)
        self._answer(exchange, status, [], orjson.dumps({"error": reason}))
