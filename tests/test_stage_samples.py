"""Per-stage samples read back from a chain run's replayer records (the live model-error and
calibration scripts share this)."""

from __future__ import annotations

import json
from pathlib import Path

from slackwise_cli.results import stage_samples


def test_each_answered_request_gives_each_stage_its_batch_and_round_trip(tmp_path: Path) -> None:
    records = [
        {"status": 200, "headers": {"x-batch-size": "2,1",
                                    "server-timing": "a-upstream;dur=12.5, b-upstream;dur=4"}},
        {"status": 503, "headers": {"x-batch-size": "1,1",
                                    "server-timing": "a-upstream;dur=99, b-upstream;dur=99"}},
        {"status": 200, "headers": {"x-batch-size": "3", "server-timing": "a-upstream;dur=7"}},
        {"status": 200, "headers": {"x-batch-size": "1,4", "server-timing": "b-upstream;dur=9"}},
    ]  # fmt: skip
    path = tmp_path / "GS.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    # the failed answer and the one with a stage missing are left out; a stage without its
    # timing is skipped on its own
    assert stage_samples([path], ["a", "b"]) == {"a": [(2, 12.5)], "b": [(1, 4.0), (4, 9.0)]}
