"""Swayam's RAND frontend against real sockets: backends that serve, bounce or fail."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import pytest

from loadtests.rand_dispatch import DispatchError, GaveUp, RandDispatcher


@asynccontextmanager
async def _backend(status: int, hits: list[int]) -> AsyncIterator[str]:
    """An HTTP/1.1 server on loopback answering every request ``status``; counts them in
    ``hits``."""

    writers: list[asyncio.StreamWriter] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                await reader.readexactly(length)
                hits.append(status)
                body = b'{"predictions": [1]}' if status == 200 else b'{"error": "busy"}'
                writer.write(b"HTTP/1.1 %d X\r\ncontent-length: %d\r\n\r\n%s"
                             % (status, len(body), body))  # fmt: skip
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1/models/m:predict"
    finally:
        server.close()
        for writer in writers:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
        await server.wait_closed()


def _run(test: Callable[[], object]) -> None:
    asyncio.run(test())  # type: ignore[arg-type]


def test_a_bounced_request_is_retried_at_random_until_a_backend_serves_it() -> None:
    async def test() -> None:
        busy: list[int] = []
        idle: list[int] = []
        async with _backend(429, busy) as bouncer, _backend(200, idle) as server:
            rand = RandDispatcher([bouncer, server], delta_s=0.002, seed=3)
            served = [await rand.send(b'{"instances": [1]}') for _ in range(40)]
            rand.close()
        assert len(idle) == 40  # every request served once, by the only idle backend
        assert sum(s.bounces for s in served) == len(busy) > 0  # each bounce was a real try
        assert any(s.bounces == 0 for s in served)  # the choice is random, not round robin
        for s in served:
            assert len(s.gap_s) == s.bounces
            assert all(gap >= 0.002 for gap in s.gap_s)
            assert s.response_s >= s.serve_s + sum(s.bounce_s) + sum(s.gap_s) - 1e-6

    _run(test)


def test_an_answer_other_than_200_or_a_bounce_is_an_error_not_a_retry() -> None:
    async def test() -> None:
        hits: list[int] = []
        async with _backend(500, hits) as failing:
            rand = RandDispatcher([failing], delta_s=0.0)
            with pytest.raises(DispatchError, match="backend 0 answered 500"):
                await rand.send(b"{}")
            rand.close()
        assert hits == [500]

    _run(test)


def test_when_every_backend_bounces_it_gives_up_after_max_tries() -> None:
    async def test() -> None:
        hits: list[int] = []
        async with _backend(429, hits) as bouncer:
            rand = RandDispatcher([bouncer, bouncer], delta_s=0.0, max_tries=5)
            with pytest.raises(DispatchError, match="in 5 tries"):
                await rand.send(b"{}")
            rand.close()
        assert len(hits) == 5

    _run(test)


def test_a_request_bounced_past_give_up_s_is_given_up() -> None:
    async def test() -> None:
        hits: list[int] = []
        async with _backend(429, hits) as bouncer:
            rand = RandDispatcher([bouncer], delta_s=0.005, give_up_s=0.05)
            with pytest.raises(GaveUp, match=r"in 0\.05 s"):
                await rand.send(b"{}")
            rand.close()
        assert 2 <= len(hits) <= 11  # tries 5 ms apart for 50 ms, then no more

    _run(test)


@pytest.mark.parametrize(
    ("urls", "kwargs", "message"),
    [
        ([], {"delta_s": 0.0}, "at least one backend"),
        (["http://127.0.0.1:1/x"], {"delta_s": -1.0}, "delta_s must be >= 0"),
        (["http://127.0.0.1:1/x"], {"delta_s": 0.0, "max_tries": 0}, "max_tries must be >= 1"),
        (["http://127.0.0.1:1/x"], {"delta_s": 0.0, "give_up_s": 0.0}, "give_up_s must be > 0"),
    ],
)
def test_bad_settings_are_refused(urls: list[str], kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RandDispatcher(urls, **kwargs)  # type: ignore[arg-type]
