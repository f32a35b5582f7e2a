"""``slackwise report``: the docs' result tables cannot drift from the JSON they came from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slackwise_cli.main import main
from slackwise_cli.report import find_blocks, update_docs

ROOT = Path(__file__).resolve().parents[1]


def test_every_report_table_in_the_docs_matches_its_results() -> None:
    stale = update_docs(ROOT, check=True)
    assert [f"{b.doc.name}:{b.start + 1} {b.kind} {b.sources}" for b in stale] == []
    assert sum(len(find_blocks(doc)) for doc in (ROOT / "docs").glob("*.md")) >= 2


def _fig9_doc(replica_seconds: float) -> dict[str, object]:
    row = {
        "replica_seconds": replica_seconds,
        "vs_clair_a1": 1.0,
        "vs_clair_a2": None,
        "compliance_pct": 100.0,
        "violation_pct": 0.0,
        "cold_start_hits": 0,
        "p99_ms": 41.2,
    }
    return {"trace": "nasa", "autoscalers": {"clair_a1": row}}  # fmt: skip


def _project(tmp_path: Path, replica_seconds: float) -> Path:
    (tmp_path / "docs").mkdir()
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "a.json").write_text(json.dumps(_fig9_doc(replica_seconds)))
    (tmp_path / "docs" / "x.md").write_text(
        "# Results\n\n<!-- report: fig9 results/a.json -->\n| old |\n<!-- /report -->\n\nafter\n"
    )
    return tmp_path


def test_a_changed_result_makes_the_check_fail_until_the_report_is_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _project(tmp_path, 1234.4)
    assert main(["report", "--check", "--root", str(root)]) == 1
    assert "x.md:3: fig9 table differs from results/a.json" in capsys.readouterr().out
    assert main(["report", "--root", str(root)]) == 0
    text = (root / "docs" / "x.md").read_text()
    assert "| NASA | clair_a1 | 1 234 | 1.00 | - | - | 100.0 | 0.00 | 0 | 41 |" in text
    assert text.endswith("<!-- /report -->\n\nafter\n")
    assert main(["report", "--check", "--root", str(root)]) == 0
    # a new number in the JSON: the table is stale again
    (root / "results" / "a.json").write_text(json.dumps(_fig9_doc(999.0)))
    assert main(["report", "--check", "--root", str(root)]) == 1


def test_a_broken_block_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _project(tmp_path, 1.0)
    doc = root / "docs" / "x.md"
    doc.write_text("<!-- report: nonsense results/a.json -->\n<!-- /report -->\n")
    assert main(["report", "--check", "--root", str(root)]) == 2
    assert "unknown report kind 'nonsense'" in capsys.readouterr().err
    doc.write_text("<!-- report: fig9 results/missing.json -->\n<!-- /report -->\n")
    assert main(["report", "--root", str(root)]) == 2
    assert "no results file results/missing.json" in capsys.readouterr().err
    doc.write_text("<!-- report: fig9 results/a.json -->\n| never closed |\n")
    assert main(["report", "--root", str(root)]) == 2
    assert "has no closing" in capsys.readouterr().err
