"""Who may use the local platform: a bearer token, and a Host allow-list against DNS rebinding.

The gateway starts replicas, pins and sets their count and cores, and relays predicts straight to
replicas, skipping the adapter's queue and SLO. On loopback any local process could do all that,
and so could a web page through DNS rebinding (its own name resolved to 127.0.0.1, its requests
carrying ``Host: evil.example``). So every route but ``GET /healthz`` needs
``Authorization: Bearer <token>`` (401 without, 403 with a wrong one), and a request whose
``Host`` is not the platform's own address (``127.0.0.1``, ``localhost``, ``[::1]`` or the
configured host, any port) is refused with 403 before anything else, as is one whose ``Origin``
is another site's.

The token is ``SLACKWISE_PLATFORM_TOKEN`` when set, else generated at start. ``slackwise up``
writes it to a file only its user can read (:func:`token_file`, mode 0600), where
``slackwise serve --platform-url`` finds it by the platform's port; an embedded platform hands it
to the processes it starts (the adapter of an experiment, the replayer's ``direct`` mode).
"""

from __future__ import annotations

import hmac
import os
import secrets
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from functions.limits import answer

__all__ = [
    "ENV_VAR",
    "LOOPBACK_HOSTS",
    "Guard",
    "host_name",
    "new_token",
    "read_token",
    "token_file",
    "write_token",
]

ENV_VAR = "SLACKWISE_PLATFORM_TOKEN"
#: routes open without a token (a liveness probe carries none)
OPEN_PATHS = frozenset({"/healthz"})
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def new_token(environ: MutableMapping[str, str] | None = None) -> str:
    """``SLACKWISE_PLATFORM_TOKEN`` when set, else a fresh random one."""
    env = os.environ if environ is None else environ
    return env.get(ENV_VAR) or secrets.token_urlsafe(32)


def token_file(port: int, environ: MutableMapping[str, str] | None = None) -> Path:
    """Where ``slackwise up`` on ``port`` keeps its token: ``$XDG_RUNTIME_DIR/slackwise`` (else
    ``~/.cache/slackwise``), ``platform-PORT.token``."""
    env = os.environ if environ is None else environ
    base = Path(env["XDG_RUNTIME_DIR"]) if env.get("XDG_RUNTIME_DIR") else Path.home() / ".cache"
    return base / "slackwise" / f"platform-{port}.token"


def write_token(token: str, port: int) -> Path:
    """Write ``token`` where :func:`read_token` finds it, readable by this user alone."""
    path = token_file(port)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(token + "\n")
    os.chmod(path, 0o600)
    return path


def read_token(url: str, environ: MutableMapping[str, str] | None = None) -> str | None:
    """The token for the platform at ``url``: ``SLACKWISE_PLATFORM_TOKEN``, else the file
    ``slackwise up`` wrote for its port; None when neither exists."""
    env = os.environ if environ is None else environ
    if env.get(ENV_VAR):
        return env[ENV_VAR]
    port = urlsplit(url).port
    if port is None:
        return None
    try:
        return token_file(port, env).read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def host_name(value: str) -> str:
    """``host[:port]`` or ``[v6]:port`` -> the host alone, lower case."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class Guard:
    """ASGI middleware in front of the gateway (see the module docstring)."""

    def __init__(self, app: ASGIApp, token: str, hosts: Iterable[str] = ()) -> None:
        self.app = app
        self._token = token.encode("latin-1")
        self.hosts = LOOPBACK_HOSTS | {h.lower() for h in hosts}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        host = headers.get(b"host", b"").decode("latin-1")
        if host_name(host) not in self.hosts:
            await _refuse(send, 403, f"Host {host!r} is not this platform's address")
            return
        origin = headers.get(b"origin")
        if origin is not None and host_name(urlsplit(origin.decode("latin-1")).netloc) not in (
            self.hosts
        ):
            await _refuse(send, 403, "cross-origin requests are refused")
            return
        if scope["path"] in OPEN_PATHS and scope["method"] == "GET":
            await self.app(scope, receive, send)
            return
        auth = headers.get(b"authorization", b"")
        if not auth.lower().startswith(b"bearer "):
            reason = (
                f"Authorization: Bearer <token> required (the platform's token: "
                f"{ENV_VAR}, or the file slackwise up wrote)"
            )
            await _refuse(send, 401, reason, bearer=True)
            return
        if not hmac.compare_digest(auth[7:].strip(), self._token):
            await _refuse(send, 403, "wrong token")
            return
        await self.app(scope, receive, send)


async def _refuse(send: Send, status: int, reason: str, *, bearer: bool = False) -> None:
    challenge = [(b"www-authenticate", b'Bearer realm="slackwise-platform"')] if bearer else []
    await answer(send, status, reason, challenge)
