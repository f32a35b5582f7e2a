"""One exception root per package: every exception class of ours descends from its package's
root (``FunctionsError``, ``PlatformError``, ``ServingError``...), keeping the built-in class
callers catch it by. Read from the source (no imports), so it costs nothing and cannot miss a
module that imports something heavy."""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: each package (or sub-package with a layer of its own) and its exceptions' one root
ROOTS = {
    "functions": "FunctionsError",
    "traces": "TraceError",
    "slackwise_core": "CoreError",
    "slackwise_policies": "SettingsError",
    "slackwise_config": "CoreError",
    "adapter": "ServingError",
    "knative": "PlatformError",
    "loadtests": "LoadError",
    "simulator": "ProfileSetError",
    "slackwise_cli": "ExperimentFailed",
}
_BUILTIN = {
    name
    for name in dir(builtins)
    if isinstance(getattr(builtins, name), type)
    and issubclass(getattr(builtins, name), BaseException)
}


def _classes() -> dict[str, tuple[str, list[str]]]:
    """Every class of ours: its package folder and the names of its bases."""
    out: dict[str, tuple[str, list[str]]] = {}
    for package in ROOTS:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ClassDef):
                    bases = [
                        b.id if isinstance(b, ast.Name) else getattr(b, "attr", "")
                        for b in node.bases
                    ]
                    out[node.name] = (package, bases)
    return out


def test_every_exception_descends_from_its_packages_root() -> None:
    classes = _classes()

    def is_exception(name: str, seen: frozenset[str] = frozenset()) -> bool:
        if name in _BUILTIN:
            return True
        if name not in classes or name in seen:
            return False
        return any(is_exception(b, seen | {name}) for b in classes[name][1])

    def root(name: str) -> str:
        ours = [b for b in classes[name][1] if b in classes and is_exception(b)]
        return root(ours[0]) if ours else name

    exceptions = [n for n in classes if is_exception(n) and n not in _BUILTIN]
    assert len(exceptions) > 40  # the walk found them (no silent pass on a wrong path)
    wrong = {n: (classes[n][0], root(n)) for n in exceptions if root(n) != ROOTS[classes[n][0]]}
    assert wrong == {}, wrong


def test_the_command_line_answers_an_uncaught_package_error_with_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import argparse

    from knative.cluster.kn_rules import KnLineError
    from slackwise_cli import main as cli

    def failing(_: argparse.Namespace) -> int:
        raise KnLineError("kn service create: --scale-window 'x' is not a duration")

    def broken(_: argparse.Namespace) -> int:
        raise ZeroDivisionError("a bug, not a user's mistake")

    for func, expected in ((failing, SystemExit), (broken, ZeroDivisionError)):
        parser = argparse.ArgumentParser()
        parser.set_defaults(func=func, verbose=0, command="x")
        monkeypatch.setattr(cli, "build_parser", lambda parser=parser: parser)
        monkeypatch.setattr(cli, "_check_positive", lambda args, parser: None)
        with pytest.raises(expected) as raised:
            cli.main([])
        if expected is SystemExit:
            assert str(raised.value.code) == (
                "slackwise: kn service create: --scale-window 'x' is not a duration"
            )
