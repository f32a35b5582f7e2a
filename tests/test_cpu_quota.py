"""CPU quotas for replica processes: a real cgroup where this machine has a writable cpu
controller (root, as here and in CI), the affinity fallback everywhere."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from knative.local.cpu_quota import AffinityQuota, CgroupQuota, detect, quota_for

SPIN = "import time\nend = time.time() + 30\nwhile time.time() < end: pass\n"


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_detect_finds_nothing_in_an_empty_tree(tmp_path: Path) -> None:
    assert detect(tmp_path) is None
    assert isinstance(quota_for("x", base=tmp_path), AffinityQuota)


def test_detect_reads_a_v1_tree(tmp_path: Path) -> None:
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    assert detect(tmp_path) == (tmp_path / "cpu" / "slackwise", 1)


def test_quotas_are_written_in_the_kernels_format(tmp_path: Path) -> None:
    v2 = CgroupQuota(tmp_path / "v2", "fn", version=2)
    v2.set_cores(0.5)
    assert (v2.path / "cpu.max").read_text() == "50000 100000\n"
    assert v2.read_cores() == 0.5
    v2.set_cores(None)
    assert v2.read_cores() is None
    v1 = CgroupQuota(tmp_path / "v1", "fn", version=1)
    v1.set_cores(1.25)
    assert (v1.path / "cpu.cfs_quota_us").read_text() == "125000\n"
    assert v1.read_cores() == 1.25
    with pytest.raises(ValueError, match="cores must be > 0"):
        v1.set_cores(0.0)
    short = CgroupQuota(tmp_path / "v2", "short", version=2, period_us=10_000)
    short.set_cores(0.5)  # the same share of shorter periods
    assert (short.path / "cpu.max").read_text() == "5000 10000\n"
    assert short.read_cores() == 0.5
    with pytest.raises(ValueError, match="period_us"):
        CgroupQuota(tmp_path / "v2", "bad", version=2, period_us=500)


@pytest.mark.slow
@pytest.mark.skipif(detect() is None, reason="no writable cgroup cpu controller here")
def test_a_real_quota_holds_a_spinning_process_to_its_cores() -> None:
    quota = quota_for(f"test-{uuid.uuid4().hex[:8]}")
    assert isinstance(quota, CgroupQuota)
    spinner = subprocess.Popen([sys.executable, "-c", SPIN])
    try:
        quota.add(spinner.pid)
        assert spinner.pid in quota.pids()
        quota.set_cores(0.25)
        assert quota.read_cores() == 0.25
        time.sleep(0.3)
        start, t0 = _cpu_seconds(spinner.pid), time.monotonic()
        time.sleep(2.0)
        share = (_cpu_seconds(spinner.pid) - start) / (time.monotonic() - t0)
        assert 0.1 < share < 0.4  # a quarter of a core, not the whole one it wants
    finally:
        spinner.kill()
        spinner.wait()
        quota.remove()
    assert not quota.path.exists()


@pytest.mark.slow
def test_the_affinity_fallback_pins_whole_cores() -> None:
    quota = AffinityQuota()
    spinner = subprocess.Popen([sys.executable, "-c", SPIN])
    try:
        quota.add(spinner.pid)
        quota.set_cores(0.5)
        assert len(os.sched_getaffinity(spinner.pid)) == 1
        quota.set_cores(None)
        assert os.sched_getaffinity(spinner.pid) == os.sched_getaffinity(0)
    finally:
        spinner.kill()
        spinner.wait()
