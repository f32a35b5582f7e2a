"""What every command shares: loading the config with a one-line error, running a coroutine."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from slackwise_config import Config, ConfigError, load_config

T = TypeVar("T")


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on uvloop when it is installed (it is, with uvicorn[standard])."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    value: T = uvloop.run(coro)
    return value


def load(path: str) -> Config:
    """The config at ``path``, or exit with the loader's one-line reason."""
    try:
        return load_config(path)
    except ConfigError as exc:
        raise SystemExit(f"slackwise: {exc}") from None
