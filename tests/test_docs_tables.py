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
    results = {
        "when": "then",
        "machine": "here",
        "warmup_s": 1,
        "duration_s": 2,
        "models": {
            "digits": {
                "kserve": {"slo_ms": 50.0, "at_max": None, "p50_ms_at_50": 3.0},
            }
        },
    }
    doc = tmp_path / "doc.md"
    doc.write_text(f"before\n{peers.BEGIN}\nold\n{peers.END}\nafter\n", encoding="utf-8")
    peers.render_into(doc, results)
    text = doc.read_text(encoding="utf-8")
    assert text.startswith("before\n") and text.endswith(f"{peers.END}\nafter\n")
    assert "old" not in text and "| digits (50 ms) | kserve | none |" in text
