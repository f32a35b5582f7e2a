"""The local platform's HTTP face: function routes and a small admin API.

- ``POST /v1/models/{name}:predict``: relayed to a replica of ``name`` (buffered while none is
  ready; 503 with a reason when the buffer is full or the wait times out).
- ``GET /v1/models/{name}``: the function exists and can be served (it scales from zero).
- ``GET /platform/functions`` and ``GET /platform/functions/{name}``: replica counts and usage.
- ``PUT /platform/functions/{name}/min-scale`` with ``{"min_scale": N}`` (or null): pin replicas.
- ``PUT /platform/functions/{name}/cores`` with ``{"cores": C}`` (or null): the CPU cores the
  function's replicas share, a cgroup quota (ROMA's CPU allocation).
- ``GET /platform/events?since=SEQ``: cold starts, scaling decisions, deaths.
- ``GET /healthz``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from functions.head_timeout import HeadTimeoutProtocol
from functions.headers import PASSED_ON
from knative.local.events import PlatformEvent, ReplicaCounts


class Answer(Protocol):
    """A function's answer as the platform relays it."""

    @property
    def status(self) -> int: ...

    @property
    def body(self) -> bytes: ...

    @property
    def headers(self) -> Mapping[str, str]: ...


class Platform(Protocol):
    """What the gateway serves: :class:`knative.local.platform.LocalPlatform`'s public face."""

    @property
    def functions(self) -> list[str]: ...

    def url(self, name: str) -> str: ...

    def replicas(self, name: str) -> ReplicaCounts: ...

    def usage(self, name: str) -> dict[str, float | int]: ...

    def events(self, since: int = 0, function: str | None = None) -> list[PlatformEvent]: ...

    async def set_min_scale(self, name: str, replicas: int | None) -> None: ...

    async def set_scale(
        self, name: str, replicas: int | None, *, owner: str = "", lease_s: float | None = None
    ) -> None: ...

    def set_cores(self, name: str, cores: float | None) -> None: ...

    def cores(self, name: str) -> float | None: ...

    async def forward(
        self, name: str, body: bytes, content_type: str, headers: Mapping[str, str] | None = None
    ) -> Answer: ...


def _error(status: int, reason: str) -> JSONResponse:
    return JSONResponse({"error": reason}, status_code=status)


class _Gateway:
    """The gateway's handlers over ``platform``."""

    def __init__(self, platform: Platform) -> None:
        self.platform = platform

    async def predict(self, request: Request) -> Response:
        name = request.path_params["name"]
        body = await request.body()
        content_type = request.headers.get("content-type", "application/json")
        passed = {h: v for h in PASSED_ON if (v := request.headers.get(h)) is not None}
        answer = await self.platform.forward(name, body, content_type, passed)
        return Response(answer.body, status_code=answer.status, headers=answer.headers)

    async def model_status(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in self.platform.functions:
            return _error(404, f"no function named {name!r}")
        counts = self.platform.replicas(name)
        return JSONResponse({"name": name, "ready": True, "replicas": dataclasses.asdict(counts)})

    def _describe(self, name: str) -> dict[str, Any]:
        platform = self.platform
        return {
            "name": name,
            "url": platform.url(name),
            "replicas": dataclasses.asdict(platform.replicas(name)),
            "usage": platform.usage(name),
            "cores": platform.cores(name),
        }

    async def list_functions(self, request: Request) -> Response:
        return JSONResponse({"functions": [self._describe(n) for n in self.platform.functions]})

    async def get_function(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in self.platform.functions:
            return _error(404, f"no function named {name!r}")
        return JSONResponse(self._describe(name))

    async def _setting(
        self, request: Request, key: str, usage: str, *, fractional: bool = False
    ) -> tuple[str, dict[str, Any], Any] | Response:
        """The function named in the path, the JSON body, and its ``key`` (an integer, a number
        with ``fractional``, or null), or the 4xx that says what is wrong."""
        name = request.path_params["name"]
        if name not in self.platform.functions:
            return _error(404, f"no function named {name!r}")
        try:
            payload = json.loads(await request.body())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            return _error(400, f"body is not JSON: {exc}")
        if not isinstance(payload, dict) or key not in payload:
            return _error(400, f"body must be {usage}")
        value = payload[key]
        kinds = (int, float) if fractional else (int,)
        if value is not None and (isinstance(value, bool) or not isinstance(value, kinds)):
            what = "a number" if fractional else "an integer"
            return _error(400, f"{key} must be {what} or null, got {value!r}")
        return name, payload, value

    async def put_min_scale(self, request: Request) -> Response:
        parsed = await self._setting(request, "min_scale", '{"min_scale": N} (or null to unpin)')
        if isinstance(parsed, Response):
            return parsed
        name, _, value = parsed
        try:
            await self.platform.set_min_scale(name, value)
        except ValueError as exc:
            return _error(400, str(exc))
        return JSONResponse(self._describe(name))

    async def put_scale(self, request: Request) -> Response:
        usage = '{"replicas": N} (or null to hand back to the KPA)'
        parsed = await self._setting(request, "replicas", usage)
        if isinstance(parsed, Response):
            return parsed
        name, payload, value = parsed
        owner = payload.get("frontend", "")
        if not isinstance(owner, str):
            return _error(400, f"frontend must be a string, got {owner!r}")
        lease = payload.get("lease_s")
        if lease is not None and (isinstance(lease, bool) or not isinstance(lease, int | float)):
            return _error(400, f"lease_s must be a number of seconds, got {lease!r}")
        try:
            await self.platform.set_scale(name, value, owner=owner, lease_s=lease)
        except ValueError as exc:
            return _error(400, str(exc))
        return JSONResponse(self._describe(name))

    async def put_cores(self, request: Request) -> Response:
        usage = '{"cores": C} (or null to lift the quota)'
        parsed = await self._setting(request, "cores", usage, fractional=True)
        if isinstance(parsed, Response):
            return parsed
        name, _, value = parsed
        try:
            self.platform.set_cores(name, value)
        except ValueError as exc:
            return _error(400, str(exc))
        return JSONResponse(self._describe(name))

    async def events(self, request: Request) -> Response:
        raw = request.query_params.get("since", "0")
        try:
            since = int(raw)
        except ValueError:
            return _error(400, f"since must be an integer, got {raw!r}")
        items = [dataclasses.asdict(e) for e in self.platform.events(since)]
        return JSONResponse({"events": items})

    async def healthz(self, request: Request) -> Response:
        return JSONResponse({"ok": True})


def create_gateway(platform: Platform) -> Starlette:
    """The Starlette app in front of ``platform``."""
    g = _Gateway(platform)
    functions = "/platform/functions/{name}"
    routes = [
        Route("/v1/models/{name}:predict", g.predict, methods=["POST"]),
        Route("/v1/models/{name}", g.model_status, methods=["GET"]),
        Route("/platform/functions", g.list_functions, methods=["GET"]),
        Route(functions, g.get_function, methods=["GET"]),
        Route(f"{functions}/min-scale", g.put_min_scale, methods=["PUT"]),
        Route(f"{functions}/scale", g.put_scale, methods=["PUT"]),
        Route(f"{functions}/cores", g.put_cores, methods=["PUT"]),
        Route("/platform/events", g.events, methods=["GET"]),
        Route("/healthz", g.healthz, methods=["GET"]),
    ]
    return Starlette(routes=routes)


class _Server(uvicorn.Server):
    """A uvicorn server that leaves signal handling to the program that embeds it."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def serve_in_loop(
    app: Any, host: str, port: int
) -> tuple[uvicorn.Server, asyncio.Task[None], int]:
    """Start ``app`` on the running loop; returns the server, its task and the bound port."""
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="on",
        http=HeadTimeoutProtocol,
    )
    server = _Server(config)
    task = asyncio.create_task(server.serve(), name=f"http-{host}:{port}")
    while not server.started:
        if task.done():
            task.result()
            raise RuntimeError(f"server on {host}:{port} stopped before it started")
        await asyncio.sleep(0.01)
    bound = server.servers[0].sockets[0].getsockname()[1]
    return server, task, int(bound)
