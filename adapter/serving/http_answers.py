"""The bytes the adapter's own server writes: a response head, an error's answer, and the answers
it decides before parsing a predict (:class:`Unparsed`: shed for the loop's lag, or a refusal of
the door that still holds). :mod:`adapter.serving.http_server` uses them."""

from __future__ import annotations

import http
from typing import TYPE_CHECKING

import orjson

from adapter.serving.http_limits import AcceptQueue, shed_answer, whole_request
from adapter.serving.predict_endpoint import PredictEndpoint
from adapter.serving.routes import function_status, health

if TYPE_CHECKING:
    import asyncio

    from adapter.serving.errors import AdapterError
    from adapter.serving.state import AdapterState

__all__ = ["Unparsed", "error_answer", "response_head", "status_answer"]

_REASONS = {s.value: s.phrase.encode("latin-1") for s in http.HTTPStatus}
_REASONS[499] = b"Client Closed Request"


def response_head(
    status: int, headers: list[tuple[bytes, bytes]], length: int, close: bool
) -> bytes:
    """An HTTP/1.1 response head (its own ``content-length`` and ``connection`` headers)."""
    lines = [b"HTTP/1.1 %d %s\r\n" % (status, _REASONS.get(status, b""))]
    for name, value in headers:
        if name.lower() not in (b"content-length", b"connection"):
            lines.append(b"%s: %s\r\n" % (name, value))
    lines.append(b"content-length: %d\r\n" % length)
    if close:
        lines.append(b"connection: close\r\n")
    lines.append(b"\r\n")
    return b"".join(lines)


def error_answer(exc: AdapterError) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """Status, headers and JSON body of an :class:`AdapterError`."""
    return exc.status, exc.headers(), orjson.dumps({"error": exc.reason})


def status_answer(state: AdapterState, method: str, path: str) -> tuple[int, bytes] | None:
    """The status and JSON body of a health or function status request (``GET /healthz``,
    ``/v2/health/ready``, ``/v1/models/{fn}``), computed at once; None for any other request.
    The server answers these from the parser's callback rather than in a task: under a flood a
    task waits a whole turn of the loop (thousands of sockets read), and a probe that waits
    behind the predicts it should be reporting on is no probe."""
    if method != "GET":
        return None
    if path in ("/healthz", "/v2/health/ready"):
        return 200, orjson.dumps(health(state))
    if path.startswith("/v1/models/"):
        name = path[len("/v1/models/") :]
        if name and "/" not in name and not name.endswith(":predict"):
            status, doc = function_status(state, name)
            return status, orjson.dumps(doc)
    return None


class Unparsed:
    """The answers to new predicts decided before they are parsed (see :meth:`answer`)."""

    def __init__(
        self, state: AdapterState, loop: asyncio.AbstractEventLoop, shed_after_s: float
    ) -> None:
        self.state = state
        self.loop = loop
        #: the adapter's own delay past which a new predict is shed: half the tightest SLO
        self.shed_after_s = shed_after_s
        #: the kernel's accept queue (set once listening): its wait counts as lateness
        self.backlog = AcceptQueue()
        #: predicts refused because reads waited too long in line (:meth:`shed`)
        self.shed_count = 0
        #: each function's held refusal, as the bytes written for it
        self._canned: dict[str, tuple[AdapterError, bytes]] = {}

    def status_bytes(self, data: bytes) -> bytes | None:
        """The whole answer (closing the connection) to the status or health read ``data``
        starts, or None when it is not one (:func:`status_answer`)."""
        line = data[: data.find(b"\r\n")].split(b" ")
        if len(line) != 3:
            return None
        path = line[1].split(b"?", 1)[0].decode("latin-1")
        found = status_answer(self.state, line[0].decode("latin-1"), path)
        if found is None:
            return None
        status, body = found
        head = response_head(status, [(b"content-type", b"application/json")], len(body), True)
        return head + body

    def shed(self, data: bytes, waited_s: float) -> bytes | None:
        """The canned 503 for the one whole predict ``data`` is, refused because reads wait
        ``waited_s`` in line (the connection stays open); None when ``data`` is not one whole
        request (it must be parsed to find where it ends)."""
        if whole_request(data) is None:
            return None
        self.shed_count += 1
        return shed_answer(waited_s, close=False)

    def answer(
        self, data: bytes, *, draining: bool, waited_s: float = 0.0
    ) -> tuple[bytes, bool] | None:
        """The answer to the new predict that ``data`` starts, and whether the connection closes
        after it; None: parse it as usual.

        * the loop's lag, the accept queue's wait and the time ``data`` waited in line for a
          turn's budget (``waited_s``) pass ``shed_after_s``: 503, nothing admitted now would
          make its deadline (status routes are never shed);
        * its function's last refusal still holds (:meth:`adapter.serving.door.Door.held`): the
          same answer again, without asking the rule.

        The connection stays open when ``data`` is one whole request (the answer leaves it at a
        request boundary), else it closes after the shed answer (and a held refusal is left to
        the parser)."""
        late = self.state.lag.lag_s() + self.backlog.wait_s(self.loop.time()) + waited_s
        if late > self.shed_after_s:
            whole = whole_request(data) is not None
            return shed_answer(late, close=not whole), not whole
        if draining:
            return None
        now = self.state.clock.now()
        if not any(d.door.holding(now) for d in self.state.dispatchers.values()):
            return None  # the usual case: no bytes looked at before the parser
        target = whole_request(data)
        if target is None:
            return None
        found = PredictEndpoint.function_of("POST", target.decode("latin-1"))
        dispatcher = None if found is None else self.state.dispatchers.get(found.name)
        if dispatcher is None:
            return None
        error = dispatcher.door.held(now)
        if error is None:
            return None
        canned = self._canned.get(dispatcher.name)
        if canned is None or canned[0] is not error:
            status, headers, body = error_answer(error)
            canned = (error, response_head(status, headers, len(body), False) + body)
            self._canned[dispatcher.name] = canned
        return canned[1], False
