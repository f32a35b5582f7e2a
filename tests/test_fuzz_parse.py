"""Property-based fuzzing of every request parse path (Hypothesis): whatever bytes arrive, the
answer is a status below 500 (or a closed connection), never a crash, a 5xx or a hang.

- the adapter's own HTTP server, on a real socket (virtual clock: its read timeouts cost no
  wall time): request lines, headers and bodies, well-formed or not;
- the predict body parse shared by the adapter and the function runtime (V1 and V2);
- the gateway's and the function runtime's ASGI front (limits, token, Host)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapter.serving.app import create_app
from adapter.serving.http_server import serve
from functions.limits import BearerRequired, RequestLimits
from functions.model import InvalidInput
from functions.runtime import v1_instances
from functions.v2 import v2_instances
from knative.local.guard import Guard
from slackwise_core.clock import VirtualClock
from tests.test_adapter import FakeView, config, echo
from tests.test_server_limits import APP, call
from tests.upstreams import HandlerUpstream

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=30,
)
token = st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), min_size=1,
                max_size=12)  # fmt: skip
header_lines = st.lists(
    st.tuples(token, st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126),
                             max_size=20)), max_size=6,
)  # fmt: skip
methods = st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "BREW", ""])
paths = st.sampled_from([
    "/v1/models/echo:predict", "/v1/models/echo", "/v1/models/nope:predict", "/healthz",
    "/metrics", "/v2/models/echo/infer", "/v1/apps/x:predict", "/%%", "/" + "a" * 300,
])  # fmt: skip


def _request(method: str, path: str, headers: list[tuple[str, str]], body: bytes,
             length: str | None) -> bytes:  # fmt: skip
    lines = [f"{method} {path} HTTP/1.1", "Host: x"]
    lines += [f"{k}: {v}" for k, v in headers]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace") + body


@FUZZ
@given(
    st.lists(
        st.one_of(
            st.binary(max_size=200),  # anything at all
            st.builds(
                _request,
                methods,
                paths,
                header_lines,
                st.one_of(
                    st.binary(max_size=100),
                    json_values.map(lambda v: json.dumps({"instances": v}).encode()),
                ),
                st.one_of(st.none(), st.sampled_from(["0", "5", "100", "-1", "abc", "99999999"])),
            ),
        ),
        min_size=1,
        max_size=3,
    )
)
def test_the_adapter_server_answers_anything_below_500_and_never_hangs(
    payloads: list[bytes],
) -> None:
    clock = VirtualClock()

    async def main() -> None:
        app = create_app(config(), view=FakeView(1), upstream=HandlerUpstream(echo),
                         clock=clock)  # fmt: skip
        stop = asyncio.Event()
        bound: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        server = asyncio.create_task(serve(app, "127.0.0.1", 0, ready=bound.set_result, stop=stop))
        port = await asyncio.wait_for(bound, 10)
        try:
            for data in payloads:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(data)
                await writer.drain()
                # the server answers, or closes: its read timeouts bound every case
                answer = await asyncio.wait_for(reader.read(1 << 16), 120)
                writer.close()
                for line in answer.split(b"\r\n"):
                    if line.startswith(b"HTTP/1.1 "):
                        status = int(line.split(b" ")[1])
                        assert status < 500, answer[:300]
        finally:
            stop.set()
            await asyncio.wait_for(server, 30)

    clock.run(main())


@FUZZ
@given(st.one_of(st.binary(max_size=300), json_values.map(lambda v: json.dumps(v).encode()),
                 json_values.map(lambda v: json.dumps({"instances": v}).encode()),
                 json_values.map(lambda v: json.dumps({"inputs": v}).encode())))  # fmt: skip
def test_the_shared_body_parse_says_invalid_input_or_returns_instances(body: bytes) -> None:
    for parse in (v1_instances, v2_instances):
        try:
            instances = parse(body)
        except InvalidInput as exc:
            assert str(exc)
        else:
            assert isinstance(instances, list) and instances


@FUZZ
@given(
    methods.filter(bool),
    paths,
    st.lists(
        st.tuples(token.map(lambda t: t.lower().encode()), st.binary(max_size=40)), max_size=8
    ),
    st.one_of(st.none(), st.binary(max_size=64)),
)
def test_the_gateway_and_runtime_fronts_answer_below_500(
    method: str, path: str, headers: list[tuple[bytes, bytes]], body: bytes | None
) -> None:
    fronts: list[Any] = [
        RequestLimits(APP, max_body_bytes=1000, body_timeout_s=0.01),
        Guard(RequestLimits(APP, max_body_bytes=1000, body_timeout_s=0.01), "tok"),
        RequestLimits(BearerRequired(APP, "tok"), max_body_bytes=1000, body_timeout_s=0.01),
    ]
    for front in fronts:
        status, _ = call(front, method, path, headers, body)
        assert status < 500


@FUZZ
@given(data=st.binary(max_size=400))
def test_the_unparsed_framing_check_never_raises_on_any_bytes(data: bytes) -> None:
    from adapter.serving.http_limits import whole_request

    found = whole_request(data)
    assert found is None or isinstance(found, bytes)


@FUZZ
@given(
    body=st.binary(max_size=200),
    cut=st.integers(min_value=0, max_value=400),
    extra=st.sampled_from([b"", b"x-a: 1\r\n", b"Connection: close\r\n",
                           b"Transfer-Encoding: chunked\r\n", b"Expect: 100-continue\r\n"]),
    then=st.sampled_from([b"", b"POST /v1/models/echo:predict HTTP/1.1\r\n"]),
)  # fmt: skip
def test_a_request_is_whole_only_when_its_body_is_all_there_and_nothing_follows(
    body: bytes, cut: int, extra: bytes, then: bytes
) -> None:
    """An answer written unparsed keeps the connection only at a request boundary: a request is
    'whole' exactly when its Content-Length body is complete, nothing follows it, and it asks
    nothing that needs the parser (close, chunked, Expect)."""
    from adapter.serving.http_limits import whole_request

    head = (b"POST /v1/models/echo:predict HTTP/1.1\r\nHost: x\r\n" + extra
            + b"Content-Length: %d\r\n\r\n" % len(body))  # fmt: skip
    sent = (head + body)[: len(head) + min(cut, len(body))] + then
    complete = len(sent) == len(head) + len(body)  # exactly one request's bytes, as framed
    plain = extra in (b"", b"x-a: 1\r\n")
    assert (whole_request(sent) == b"/v1/models/echo:predict") == (complete and plain)
