"""Two ways for a test to stand in for the functions' replicas, both through the app's one seam
for batches (``create_app(upstream=...)``):

* :class:`HandlerUpstream`: a fake :class:`adapter.serving.upstream.Upstream` that hands each
  batch to an httpx-style handler (``request -> response``, sync or async), in process; for tests
  of the adapter's own logic (batching, chains, admission).
* :func:`serve_handler`: the same handler behind a real socket, for tests that need the path
  users run (the lean HTTP/1.1 client, the request's URL): point a function's ``upstream.url``
  at the address it yields.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager

import httpx

from adapter.serving.upstream import SendFailed, SendTimeout
from slackwise_core.http1 import Http1Response

Handler = Callable[[httpx.Request], httpx.Response | Awaitable[httpx.Response]]


async def _answer(handler: Handler, request: httpx.Request) -> httpx.Response:
    result = handler(request)
    response = await result if inspect.isawaitable(result) else result
    await response.aread()
    return response


class HandlerUpstream:
    """Each batch to ``handler`` as ``POST http://upstream.test/v1/models/{function}:predict``
    with the headers the adapter sends (the platform's ``host`` among them); its answer comes
    back as the lean client's would (names lower-cased); past the function's timeout, or when
    the handler raises an httpx timeout, :class:`SendTimeout`; any other httpx error it raises
    (a refused or broken connection) is :class:`SendFailed`, as from the real clients."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler

    async def post(
        self, function: str, body: bytes, headers: Mapping[str, str], timeout_s: float
    ) -> Http1Response:
        url = f"http://upstream.test/v1/models/{function}:predict"
        request = httpx.Request("POST", url, headers=dict(headers), content=body)
        try:
            response = await asyncio.wait_for(_answer(self.handler, request), timeout_s)
        except (TimeoutError, httpx.TimeoutException):
            raise SendTimeout(f"no answer within {timeout_s} s") from None
        except httpx.HTTPError as exc:  # a handler's way to say the connection broke
            raise SendFailed(f"{type(exc).__name__}: {exc}") from None
        answer = {k.lower(): v for k, v in response.headers.items()}
        return Http1Response(response.status_code, answer, response.content)

    async def aclose(self) -> None:
        return None


@contextmanager
def serve_handler(handler: Handler) -> Iterator[str]:
    """``handler`` answering HTTP/1.1 on a real socket (keep-alive, ``Content-Length``
    bodies), in a thread of its own; yields its ``http://127.0.0.1:PORT``."""
    loop = asyncio.new_event_loop()
    started = threading.Event()
    address: list[str] = []

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                line, *fields = head.decode("latin-1").split("\r\n")
                method, target, _ = line.split(" ", 2)
                pairs = [f.split(":", 1) for f in fields if ":" in f]
                headers = {k.strip().lower(): v.strip() for k, v in pairs}
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                url = f"{address[0]}{target}"
                response = await _answer(
                    handler, httpx.Request(method, url, headers=headers, content=body)
                )
                out = [f"HTTP/1.1 {response.status_code} {response.reason_phrase}"]
                out += [f"{k}: {v}" for k, v in response.headers.items() if k != "content-length"]
                out.append(f"content-length: {len(response.content)}")
                writer.write(("\r\n".join(out) + "\r\n\r\n").encode("latin-1") + response.content)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(connection, "127.0.0.1", 0)
        address.append(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}")
        started.set()
        async with server:
            await server.serve_forever()

    def run() -> None:
        with contextlib.suppress(asyncio.CancelledError):  # how it stops: cancelled
            loop.run_until_complete(main())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    started.wait(10)
    try:
        yield address[0]
    finally:
        for task in asyncio.all_tasks(loop):
            loop.call_soon_threadsafe(task.cancel)
        thread.join(10)
        loop.close()
