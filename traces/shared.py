"""Finding the project's shared real traces (``../shared/traces`` beside the repository).

The files are read where they lie and never copied into the project. ``SLACKWISE_TRACES_DIR``
points elsewhere; the shortcuts ``nasa`` and ``twitter`` name the two per-second count files.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from traces.errors import TraceNotFound

ENV_VAR = "SLACKWISE_TRACES_DIR"

#: shortcut -> file name in the shared traces directory
SHORTCUTS: dict[str, str] = {
    "nasa": "nasa-http-1995.rps.txt.gz",
    "twitter": "twitter-stream-2021-08.rps.txt.gz",
}


def repo_root() -> Path:
    """The repository this package lives in."""
    return Path(__file__).resolve().parent.parent


def traces_dirs(environ: Mapping[str, str] | None = None) -> list[Path]:
    """Where shared traces are looked for, in order."""
    env = os.environ if environ is None else environ
    dirs = [Path(env[ENV_VAR]).expanduser()] if env.get(ENV_VAR) else []
    dirs.append(repo_root().parent / "shared" / "traces")
    return dirs


def resolve_trace(name: str, *, environ: Mapping[str, str] | None = None) -> Path:
    """The file for ``name``: a shortcut (``nasa``, ``twitter``) or a path to an existing file."""
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
