"""The real request-rate traces the project ships, and finding a trace by name.

Four per-second count files travel inside the package (``traces/data``, read with
:mod:`importlib.resources`; where each comes from and how it was counted: its README):
NASA's HTTP server, Jul-Aug 1995, and the archived Twitter stream, Aug 2021 (both counted per
second from the public web-service-datasets repository, commit 7404ad6), and an hour each of
two of Azure's LLM inference services, code completion and conversation, 16 Nov 2023 (counted
per second from the Azure Public Dataset's LLM inference trace 2023, CC-BY 4.0, commit
b469a11). The shortcuts ``nasa``, ``twitter``, ``azure-llm-code`` and ``azure-llm-conv`` name
them; ``SLACKWISE_TRACES_DIR`` names a directory whose files of the same names are read first
(a newer copy, or another window).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from importlib import resources
from pathlib import Path

from traces.errors import TraceNotFound

ENV_VAR = "SLACKWISE_TRACES_DIR"

#: shortcut -> file name, in the package's data and in ``SLACKWISE_TRACES_DIR``
SHORTCUTS: dict[str, str] = {
    "nasa": "nasa-http-1995.rps.txt.gz",
    "twitter": "twitter-stream-2021-08.rps.txt.gz",
    "azure-llm-code": "azure-llm-code-2023-11.rps.txt.gz",
    "azure-llm-conv": "azure-llm-conv-2023-11.rps.txt.gz",
}


def packaged_dir() -> Path:
    """The package's own trace directory (a plain directory: the package is installed unzipped)."""
    return Path(str(resources.files("traces.data")))


def traces_dirs(environ: Mapping[str, str] | None = None) -> list[Path]:
    """Where a shortcut's file is looked for, in order: ``SLACKWISE_TRACES_DIR``, the package."""
    env = os.environ if environ is None else environ
    dirs = [Path(env[ENV_VAR]).expanduser()] if env.get(ENV_VAR) else []
    dirs.append(packaged_dir())
    return dirs


def resolve_trace(name: str, *, environ: Mapping[str, str] | None = None) -> Path:
    """The file for ``name``: a shortcut (:data:`SHORTCUTS`) or a path to an existing file."""
    if name in SHORTCUTS:
        searched = [d / SHORTCUTS[name] for d in traces_dirs(environ)]
        for candidate in searched:
            if candidate.is_file():
                return candidate
        raise TraceNotFound(name, searched, f"set {ENV_VAR} to the directory holding it")
    path = Path(name).expanduser()
    if path.is_file():
        return path
    shortcuts = ", ".join(sorted(SHORTCUTS))
    raise TraceNotFound(name, [path.resolve()], f"give a file or one of: {shortcuts}")
