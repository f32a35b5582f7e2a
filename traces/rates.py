"""Files with one value per line: AutoScale rate traces and per-second count files.

* **AutoScale** (``trace_t2.txt``, ``trace_t4.txt``, ``trace_t5.txt``, ``trace_wc.txt``): one
  non-negative rate per line, possibly fractional (the files MLProxy replayed).
* **counts** (``*.rps.txt`` or ``*.rps.txt.gz``): one non-negative integer per line, the requests
  that arrived in that second.

Either may be gzipped (recognised by its magic bytes, whatever the name). Blank lines and lines
starting with ``#`` are ignored; every other line is one step. A window (``start``, ``count`` in
steps) is read by streaming, so a window of a multi-million-line file costs only the lines up to
its end, and lines before the window are skipped without being parsed.
"""

from __future__ import annotations

import gzip
import io
import logging
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from traces.errors import BadTraceLine, TraceError

logger = logging.getLogger(__name__)

_GZIP_MAGIC = b"\x1f\x8b"
_BLOCK_BYTES = 1 << 20


def is_gzip(path: Path) -> bool:
    """Whether ``path`` starts with the gzip magic bytes."""
    with path.open("rb") as f:
        return f.read(2) == _GZIP_MAGIC


def open_text(path: Path) -> IO[str]:
    """``path`` opened for reading text, decompressing gzip transparently."""
    if is_gzip(path):
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8")
    return path.open(encoding="utf-8")


def numbered_values(f: IO[str]) -> Iterator[tuple[int, str]]:
    """(1-based line number, stripped text) for each line that is neither blank nor a comment."""
    for number, raw in enumerate(f, start=1):
        text = raw.strip()
        if text and not text.startswith("#"):
            yield number, text


def parse_rate(text: str) -> float | str:
    """A non-negative finite float, or the reason ``text`` is not one."""
    try:
        value = float(text)
    except ValueError:
        return "not a number"
    if not math.isfinite(value):
        return "not a finite number"
    if value < 0:
        return "negative rate"
    return value


def parse_count(text: str) -> float | str:
    """A non-negative integer (as float), or the reason ``text`` is not one."""
    try:
        value = int(text)
    except ValueError:
        return "not an integer count"
    if value < 0:
        return "negative count"
    return float(value)


def _plain(part: bytes) -> bool:
    """Whether every line of ``part`` is a single value (no blanks, comments or spaces)."""
    return (
        not part.startswith(b"\n")
        and b"\n\n" not in part
        and all(mark not in part for mark in (b"#", b" ", b"\t", b"\r"))
    )


def _blocks(path: Path) -> Iterator[bytes]:
    """The decompressed bytes of ``path`` in pieces that each end at a line end."""
    opener = gzip.open if is_gzip(path) else open
    tail = b""
    with opener(path, "rb") as f:
        while block := f.read(_BLOCK_BYTES):
            data = tail + block
            cut = data.rfind(b"\n") + 1
            if cut:
                yield data[:cut]
            tail = data[cut:]
    if tail:
        yield tail


def read_values(
    path: Path,
    parse: Callable[[str], float | str],
    *,
    start: int = 0,
    count: int | None = None,
) -> list[float]:
    """Values ``start`` to ``start + count`` (all to the end when ``count`` is None) of ``path``.

    Raises ``BadTraceLine`` naming the file, the line and the value for the first bad line within
    the window, and ``TraceError`` when the window starts past the end of the file.
    """
    if start < 0:
        raise TraceError(f"{path}: window start must be non-negative, got {start}")
    if count is not None and count < 0:
        raise TraceError(f"{path}: window length must be non-negative, got {count}")
    values: list[float] = []
    seen = 0  # value lines passed, skipped or read
    line = 0
    for part in _blocks(path):
        if seen < start and _plain(part):
            lines = part.count(b"\n") + (not part.endswith(b"\n"))
            if seen + lines <= start:
                seen += lines
                line += lines
                continue
        for raw in part.removesuffix(b"\n").split(b"\n"):
            line += 1
            text = raw.strip()
            if not text or text.startswith(b"#"):
                continue
            if seen < start:
                seen += 1
                continue
            if count is not None and len(values) >= count:
                return values
            value = text.decode("utf-8", errors="replace")
            parsed = parse(value)
            if isinstance(parsed, str):
                raise BadTraceLine(path, line, value, parsed)
            values.append(parsed)
            seen += 1
    if seen <= start and (count is None or count > 0):
        raise TraceError(f"{path}: no values at or after step {start} (the file has {seen})")
    if count is not None and len(values) < count:
        logger.info("%s: window of %d steps cut to %d at the end of the file", path, count, seen)
    return values
