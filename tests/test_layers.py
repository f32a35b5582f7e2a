"""The house rules that keep the layers (docs/architecture.md): no import circles anywhere in
the project, and modules small enough to hold one concept. The import contracts themselves are
``lint-imports`` in ``make lint`` (``[tool.importlinter]`` in pyproject.toml)."""

from __future__ import annotations

import re
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = (
    "slackwise_cli",
    "adapter",
    "slackwise_policies",
    "slackwise_core",
    "slackwise_config",
    "functions",
    "knative",
    "traces",
    "loadtests",
    "simulator",
)
#: the most lines a module may have before it must be split along its concepts
MAX_LINES = 450


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    grandchildren = sorted(graph.find_modules_directly_imported_by(child))
                    work.append((child, iter(grandchildren)))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_circles() -> None:
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    # a package's __init__ re-exporting its modules is not a circle of concepts
    for module in list(graph.modules):
        for imported in list(graph.find_modules_directly_imported_by(module)):
            if imported == module.rpartition(".")[0] or module == imported.rpartition(".")[0]:
                graph.remove_import(importer=module, imported=imported)
    assert _cycles(graph) == []


@pytest.mark.parametrize("package", PACKAGES)
def test_modules_stay_small(package: str) -> None:
    too_big = {
        str(path.relative_to(ROOT)): n
        for path in sorted((ROOT / package).rglob("*.py"))
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert too_big == {}


def test_the_product_never_imports_the_test_doubles_or_the_benchmarks() -> None:
    """The in-memory Kubernetes API and the other doubles live in tests/ and stay there; the
    benchmarks are the floor above everything (they import the product, never the reverse)."""
    importing = [
        str(path.relative_to(ROOT))
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if re.search(
            r"^\s*(from|import)\s+(tests|benchmarks)\b", path.read_text(encoding="utf-8"), re.M
        )
    ]
    assert importing == []


def test_the_module_map_takes_each_docstrings_first_sentence() -> None:
    from slackwise_cli.module_map import first_sentence, module_map

    assert first_sentence("One thing (MLProxy Fig. 3). Then more.\n\nDetails.") == (
        "One thing (MLProxy Fig. 3)."
    )
    assert first_sentence("``slackwise x``: does y,\non two lines. Second.") == (
        "``slackwise x``: does y, on two lines."
    )
    assert first_sentence(None) == "-" and first_sentence("a | b") == "a \\| b"
    table = module_map(ROOT, ["slackwise_core"])
    listed = set(re.findall(r"^\| `([^`]+)` \|", table, re.M))
    assert "slackwise_core/clock.py" in listed and "slackwise_core/autoscaler_config.py" in listed
    assert all((ROOT / path).is_file() for path in listed)


@pytest.mark.parametrize(
    ("pattern", "home"),
    [
        # a batching setting's default value is written in one module, the policy's own
        (r"\b(wait_utilization|target_utilization)\s*:\s*float\s*=\s*\d",
         "slackwise_policies/batching_settings.py"),
        (r"\bpath_margin_ms\s*:\s*float\s*=\s*\d", "slackwise_policies/batching_settings.py"),
        (r"\bestimate_alpha\s*:\s*float\s*=\s*\d", "slackwise_policies/batching_settings.py"),
        # a function's largest batch: the config model's constant, used by both readers
        (r"\"max_batch\",\s*path,\s*\d", None),
        (r"\bmax_batch\s*:\s*int\s*=\s*\d", None),
    ],
)  # fmt: skip
def test_each_policy_default_is_written_in_one_place(pattern: str, home: str | None) -> None:
    found = sorted(
        str(path.relative_to(ROOT))
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if re.search(pattern, path.read_text(encoding="utf-8"))
    )
    assert found == ([home] if home else []), found


def test_what_an_install_puts_at_the_top_level_shadows_no_common_module() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    include = project["tool"]["setuptools"]["packages"]["find"]["include"]
    top = sorted(name.rstrip("*") for name in include)
    assert top == sorted(PACKAGES)
    # names as generic as these would shadow, or be shadowed by, other installed modules
    assert not {"core", "config", "common", "utils", "tests", "test"} & set(top)


#: the most lines a function may have before it must be split
MAX_FUNCTION_LINES = 80
#: functions allowed over it (none now: a new long function fails)
LONG_FUNCTIONS: dict[str, int] = {}


def test_functions_stay_short() -> None:
    import ast

    found = {}
    for package in (*PACKAGES, "benchmarks"):
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    n = (node.end_lineno or node.lineno) - node.lineno + 1
                    if n > MAX_FUNCTION_LINES:
                        found[f"{path.relative_to(ROOT).as_posix()}:{node.name}"] = n
    grown = {k: n for k, n in found.items() if n > LONG_FUNCTIONS.get(k, MAX_FUNCTION_LINES)}
    assert grown == {}, f"split these (or do not grow them): {grown}"
