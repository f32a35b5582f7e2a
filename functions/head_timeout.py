"""A request head that never finishes is answered 408 and the connection closed: uvicorn's own
HTTP protocol (httptools) with a timer from a request's first byte to the end of its headers.

uvicorn times out idle keep-alive connections but not a head sent slowly: a client that drips
one header byte a second holds its connection (and, on a function, a slot of the platform's
concurrency accounting) for as long as it likes. The adapter's own server
(``adapter.serving.http_server``) already answers 408 there; this is the same rule for the
servers that run under uvicorn, a function's runtime and the local platform's gateway
(``uvicorn.Config(app, http=HeadTimeoutProtocol)``). The body has its own timeout
(:class:`functions.limits.RequestLimits`).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = ["HEAD_TIMEOUT_S", "HeadTimeoutProtocol"]

#: the longest a request's head (request line and headers) may take to arrive
HEAD_TIMEOUT_S = 10.0


class HeadTimeoutProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, with :data:`HEAD_TIMEOUT_S` from a request's first byte to
    the end of its headers (see the module docstring)."""

    head_timeout_s = HEAD_TIMEOUT_S

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._cancel_head_timer()
        self._head_timer = self.loop.call_later(self.head_timeout_s, self._head_expired)

    def on_headers_complete(self) -> None:
        self._cancel_head_timer()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        super().connection_lost(exc)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_expired(self) -> None:
        self._head_timer = None
        if self.transport is None or self.transport.is_closing():
            return
        body = json.dumps(
            {"error": f"request head not received within {self.head_timeout_s:g} s"}
        ).encode()
        self.transport.write(
            b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(body), body)
        )
        self.transport.close()
