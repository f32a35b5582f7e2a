"""What every connection of one listening HTTP server shares: the app's predict endpoint, the
limits of the target last looked up, the read budget of each loop turn and the refusals made
before a request is parsed (:mod:`adapter.serving.http_connection` is one connection)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Protocol

import httptools

from adapter.serving.http_answers import Unparsed
from adapter.serving.input_limits import InputLimits
from adapter.serving.predict_endpoint import PredictEndpoint
from adapter.serving.read_budget import ReadBudget

if TYPE_CHECKING:
    from starlette.applications import Starlette

__all__ = ["Open", "Server"]


class Open(Protocol):
    """An open connection, as the server closes it when it stops."""

    @property
    def transport(self) -> asyncio.BaseTransport | None: ...


class Server:
    """What every connection of one listening server shares."""

    def __init__(self, app: Starlette, loop: asyncio.AbstractEventLoop) -> None:
        self.app = app
        self.loop = loop
        self.endpoint: PredictEndpoint = app.state.predict_endpoint
        #: the limits of the last target looked up (requests on a connection repeat it)
        self._limits: tuple[bytes, bytes, InputLimits] | None = None
        self.connections: set[Open] = set()
        #: stopping: every new request is answered 503 + Retry-After + Connection: close
        self.draining = False
        self.state = self.endpoint.state
        #: what is answered before it is parsed: shed for the loop's lag, held refusals
        tightest_s = min(self.endpoint.slos.values(), default=1000.0) / 1000.0
        self.unparsed = Unparsed(self.state, loop, shed_after_s=0.5 * tightest_s)
        #: the wait in the kernel's accept queue past which its oldest connections are refused
        #: at the socket (:mod:`adapter.serving.accept_trim`): a tenth of the tightest SLO, at
        #: most 10 ms (what is kept has nearly all of its SLO left, and a refusal comes soon)
        self.trim_after_s = min(0.1 * tightest_s, 0.01)
        #: client reads within a bounded share of each loop turn (the rest wait, paused), and
        #: the refusals of a congested line within 2 % of the tightest SLO a turn
        self.reads = ReadBudget(loop, refuse_s=0.02 * tightest_s, turn_s=self.state.lag.recent_s)

    def limits_of(self, method: bytes, url: bytes) -> InputLimits:
        """The limits of a request ``method url`` (:mod:`adapter.serving.input_limits`)."""
        last = self._limits
        if last is not None and last[0] == method and last[1] == url:
            return last[2]
        try:
            path = httptools.parse_url(url).path.decode("latin-1")
        except httptools.HttpParserInvalidURLError:
            return self.endpoint.limits_of("", "")  # the parse of the whole request says why
        limits = self.endpoint.limits_of(method.decode("latin-1"), path)
        self._limits = (method, url, limits)
        return limits
