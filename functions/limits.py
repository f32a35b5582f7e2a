"""Request limits and access for the servers that run under uvicorn: a function's runtime and the
local platform's gateway (the adapter's own server enforces the same numbers itself).

:class:`RequestLimits` answers, before the app sees the request: 414 for a URL over 8 KiB, 431
for more than 100 header fields or 64 KiB of them, 413 when ``Content-Length`` is over the body
limit (decided from the header, before any of the body is read), 400 for a WebSocket; and 408
when the body does not arrive within ``body_timeout_s`` (a client that declared more than it
sends would otherwise hold a worker for ever). :class:`BearerRequired` lets in the work
(``POST``) only with ``Authorization: Bearer <token>``: the local platform gives its replicas a
token in ``SLACKWISE_FUNCTION_TOKEN``, so nobody but the platform's router, which the adapter
feeds, reaches them; health and metadata ``GET``s stay open for probes.
"""

from __future__ import annotations

import asyncio
import hmac
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

__all__ = ["TOKEN_ENV", "BearerRequired", "RequestLimits", "answer"]

TOKEN_ENV = "SLACKWISE_FUNCTION_TOKEN"
MAX_URL_BYTES = 8 * 1024
MAX_HEADERS = 100
MAX_HEADER_BYTES = 64 * 1024
BODY_TIMEOUT_S = 30.0

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


async def answer(
    send: Send, status: int, reason: str, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    """A JSON ``{"error": reason}`` answer that closes the connection."""
    body = json.dumps({"error": reason}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", b"%d" % len(body)),
        (b"connection", b"close"),
        *(extra or []),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class RequestLimits:
    """ASGI middleware: the limits in the module docstring."""

    def __init__(
        self, app: ASGIApp, *, max_body_bytes: int, body_timeout_s: float = BODY_TIMEOUT_S
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.body_timeout_s = body_timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await send(
                {
                    "type": "websocket.close",
                    "code": 1008,
                    "reason": "WebSocket is not supported here",
                }
            )
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self._refusal(scope)
        if refusal is not None:
            await answer(send, *refusal)
            return
        answered = False

        async def guarded_send(message: Message) -> None:
            if not answered:
                await send(message)

        async def timed_receive() -> Message:
            nonlocal answered
            try:
                return await asyncio.wait_for(receive(), self.body_timeout_s)
            except TimeoutError:
                if not answered:
                    answered = True
                    reason = f"request body not received within {self.body_timeout_s:g} s"
                    await answer(send, 408, reason)
                return {"type": "http.disconnect"}

        try:
            await self.app(scope, timed_receive, guarded_send)
        except Exception:
            if not answered:
                raise
            # the app heard the client gone (408 already sent) and gave up: nothing to add

    def _refusal(self, scope: Scope) -> tuple[int, str] | None:
        if len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"") > (
            MAX_URL_BYTES
        ):
            return 414, f"URL longer than {MAX_URL_BYTES} bytes"
        headers = scope["headers"]
        if len(headers) > MAX_HEADERS:
            return 431, f"more than {MAX_HEADERS} header fields"
        if sum(len(k) + len(v) + 4 for k, v in headers) > MAX_HEADER_BYTES:
            return 431, f"header fields larger than {MAX_HEADER_BYTES} bytes"
        for key, value in headers:
            if key == b"content-length" and value.isdigit() and int(value) > self.max_body_bytes:
                return 413, f"body of {int(value)} bytes exceeds the limit of {self.max_body_bytes}"
            if key == b"upgrade":
                return 400, "protocol upgrades (WebSocket, h2c) are not supported"
        return None


class BearerRequired:
    """ASGI middleware: ``POST`` only with ``Authorization: Bearer <token>`` (401/403)."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._token = token.encode("latin-1")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] not in ("GET", "HEAD"):
            auth = dict(scope["headers"]).get(b"authorization", b"")
            if not auth.lower().startswith(b"bearer "):
                await answer(
                    send,
                    401,
                    "this function takes work only from its platform "
                    "(Authorization: Bearer required)",
                )
                return
            if not hmac.compare_digest(auth[7:].strip(), self._token):
                await answer(send, 403, "wrong token")
                return
        await self.app(scope, receive, send)
