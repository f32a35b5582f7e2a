"""The module map in docs/architecture.md: every module of the project with the first sentence of
its docstring, made from the tree (``slackwise report`` renders it like a results table, and
``--check`` fails when a module was added, moved or removed without it)."""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from pathlib import Path

__all__ = ["first_sentence", "module_map"]

#: a full stop ends a sentence when a capital follows and the word before is no abbreviation
_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`*(])")
_ABBREVIATIONS = ("Fig.", "Figs.", "Alg.", "Eq.", "Sec.", "e.g.", "i.e.", "vs.", "cf.", "al.")


def first_sentence(doc: str | None) -> str:
    """The docstring's first sentence (its first paragraph up to the first full stop), on one
    line, with table pipes escaped; ``-`` when there is none."""
    if not doc:
        return "-"
    paragraph = " ".join(doc.strip().split("\n\n", 1)[0].split())
    sentence = paragraph
    for match in _END.finditer(paragraph):
        if not paragraph[: match.start()].endswith(_ABBREVIATIONS):
            sentence = paragraph[: match.start()]
            break
    return sentence.rstrip(":;").replace("|", "\\|")


def module_map(root: Path, packages: Sequence[str]) -> str:
    """One table row per module under each of ``packages`` (directories under ``root``), in
    path order; a package's ``__init__`` only when it has a docstring of its own."""
    lines = ["| module | what it is |", "|---|---|"]
    for package in packages:
        directory = root / package
        if not directory.is_dir():
            raise ValueError(f"no package directory {package}")
        for path in sorted(directory.rglob("*.py")):
            doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
            if path.name == "__init__.py" and not doc:
                continue
            lines.append(f"| `{path.relative_to(root).as_posix()}` | {first_sentence(doc)} |")
    return "\n".join(lines)
