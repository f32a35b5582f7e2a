"""Tables in docs/ are what their commands make of the results they were made from."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def _peers() -> ModuleType:
    spec = importlib.util.spec_from_file_location("peers", ROOT / "benchmarks" / "peers.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("peers", module)  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_peers_table_in_docs_is_rendered_from_its_json() -> None:
    peers = _peers()
    results = json.loads((ROOT / "docs" / "results" / "peers.json").read_text(encoding="utf-8"))
    doc = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    expected = f"{peers.BEGIN}\n{peers.header(results)}\n\n{peers.table(results)}\n{peers.END}"
    assert expected in doc, (
        "docs/benchmarks.md's peers table differs from docs/results/peers.json: run "
        "`python benchmarks/peers.py --from-json docs/results/peers.json --docs docs/benchmarks.md`"
    )


def test_rendering_replaces_only_the_marked_block(tmp_path: Path) -> None:
    peers = _peers()
    point = {
        "rate": 50.0,
        "passed": True,
        "p50_ms": 2.0,
        "p95_ms": 4.0,
        "p99_ms": 6.0,
        "cpu_ms_per_request": 0.5,
        "front_cpu_ms_per_request": 0.2,
    }
    results = {
        "meta": {
            "when": "then",
            "commit": "abc",
            "machine": "here",
            "warmup_s": 1,
            "duration_s": 2,
            "repeat": 3,
        },
        "models": {
            "digits": {
                "slo_ms": 50.0,
                "fixed_rates": [50.0, 1000.0],
                "systems": {
                    "kserve": {
                        "best": "workers=2",
                        "max_rate": None,
                        "at_median": None,
                        "fixed": [point],
                    },
                    "slackwise": {
                        "best": "replicas=1",
                        "max_rate": {"median": 300.0, "low": 250.0, "high": 320.0},
                        "at_median": point,
                        "fixed": [point, {**point, "rate": 1000.0, "passed": False}],
                    },
                },
            }
        },
    }
    doc = tmp_path / "doc.md"
    doc.write_text(f"before\n{peers.BEGIN}\nold\n{peers.END}\nafter\n", encoding="utf-8")
    peers.render_into(doc, results)
    text = doc.read_text(encoding="utf-8")
    assert text.startswith("before\n") and text.endswith(f"{peers.END}\nafter\n")
    assert "old" not in text
    # a system that never passed shows "none" and no ratio; a fixed rate it failed is marked
    assert "| digits (50 ms) | kserve | workers=2 | none | – |" in text
    assert "| digits (50 ms) | slackwise | replicas=1 | 300 (250-320) | 1.00x |" in text
    assert "0.50 / 0.50 ✗" in text


def _module(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)
    spec.loader.exec_module(module)
    return module


def test_the_adapter_overhead_block_in_docs_is_rendered_from_its_json() -> None:
    bench = _module("adapter_overhead")
    path = ROOT / "docs" / "results" / "adapter_overhead.json"
    result = json.loads(path.read_text(encoding="utf-8"))
    doc = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    assert f"{bench.BEGIN}\n{bench.table(result)}\n{bench.END}" in doc, (
        "docs/benchmarks.md's adapter overhead block differs from its JSON: run `python "
        "benchmarks/adapter_overhead.py --from-json docs/results/adapter_overhead.json "
        "--docs docs/benchmarks.md`"
    )
