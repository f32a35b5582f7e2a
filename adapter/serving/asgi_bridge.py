"""The bridge from the adapter's own server to the Starlette app, in a task, as uvicorn runs it.

Every request that is not a function predict (apps, status, metrics) goes this way from
:mod:`adapter.serving.http_server`."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, MutableMapping
from typing import TYPE_CHECKING, Any, NamedTuple

import orjson
from starlette.requests import ClientDisconnect

if TYPE_CHECKING:
    from starlette.applications import Starlette

logger = logging.getLogger(__name__)

__all__ = ["AsgiRequest", "run_asgi"]

#: writes one answer: status, headers, body; a second call for the same request does nothing
Answer = Callable[[int, list[tuple[bytes, bytes]], bytes], None]


class AsgiRequest(NamedTuple):
    """One whole request, as the server parsed it."""

    method: str
    path: str
    query: bytes
    headers: list[tuple[bytes, bytes]]
    body: bytes
    transport: asyncio.BaseTransport


async def run_asgi(
    app: Starlette,
    request: AsgiRequest,
    until_gone: Callable[[], asyncio.Future[None]],
    answer: Answer,
) -> None:
    """Run ``request`` through ``app``; ``until_gone`` resolves when the client goes (the
    ``http.disconnect`` a route may wait for), ``answer`` writes the response."""
    method, path, transport = request.method, request.path, request.transport
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode("latin-1"),
        "query_string": request.query,
        "root_path": "",
        "headers": request.headers,
        "client": transport.get_extra_info("peername"),
        "server": transport.get_extra_info("sockname"),
    }
    sent_body = False
    answered = False
    status = 500
    headers: list[tuple[bytes, bytes]] = []
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        nonlocal sent_body
        if not sent_body:
            sent_body = True
            return {"type": "http.request", "body": request.body, "more_body": False}
        # shielded: a route that stops listening cancels its receive(), and cancelling an
        # await on the shared future would cancel the future itself for every later call
        await asyncio.shield(until_gone())
        return {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        nonlocal status, headers, answered
        if message["type"] == "http.response.start":
            status = int(message["status"])
            headers = list(message.get("headers", []))
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                answered = True
                answer(status, headers, b"".join(chunks))

    try:
        await app(scope, receive, send)
    except ClientDisconnect:
        logger.info("%s %s: the client went away before it was answered", method, path)
    except Exception:
        logger.exception("%s %s failed in the adapter", method, path)
        if not answered:
            answer(500, [], orjson.dumps({"error": "adapter error"}))
