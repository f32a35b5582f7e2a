"""CPU cores for a group of processes, enforced by the kernel: a cgroup CPU quota.

ROMA (seed 003) sets each model executable's cores every second. On the local platform a
function's replica processes share one cgroup and its quota is the function's cores: cgroup v2
``cpu.max`` (``"<quota> <period>"``) where the unified hierarchy has the cpu controller, else
cgroup v1 ``cpu.cfs_quota_us`` over ``cpu.cfs_period_us``. :func:`detect` finds which one is
writable here; where neither is (no root, a read-only ``/sys/fs/cgroup``), :class:`AffinityQuota`
falls back to pinning the processes to ``ceil(cores)`` CPUs, which bounds whole cores only, and
says so once in the log.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
from pathlib import Path
from typing import Protocol

__all__ = ["AffinityQuota", "CgroupQuota", "CpuQuota", "detect"]

logger = logging.getLogger(__name__)

#: the CFS period the quotas are written against, µs (the kernel's default)
PERIOD_US = 100_000
#: the smallest quota the kernel takes, µs
MIN_QUOTA_US = 1_000


class CpuQuota(Protocol):
    """Cores for one group of processes."""

    #: the cores last set (None: no limit)
    cores: float | None

    def add(self, pid: int) -> None: ...

    def set_cores(self, cores: float | None) -> None: ...

    def remove(self) -> None: ...


class CgroupQuota:
    """One cgroup (v1 ``cpu`` or v2) named ``name`` under ``root``."""

    def __init__(self, root: Path, name: str, *, version: int, period_us: int = PERIOD_US) -> None:
        if not MIN_QUOTA_US <= period_us <= 1_000_000:
            raise ValueError(f"period_us must be within 1000..1000000, got {period_us!r}")
        self.path = root / name
        self.version = version
        self.period_us = period_us
        root.mkdir(parents=True, exist_ok=True)
        if version == 2:  # a child's cpu.max exists only where its parent delegates cpu
            for parent in (root.parent, root):
                with contextlib.suppress(OSError):
                    (parent / "cgroup.subtree_control").write_text("+cpu\n")
        self.path.mkdir(exist_ok=True)
        self.cores: float | None = None

    def add(self, pid: int) -> None:
        (self.path / "cgroup.procs").write_text(f"{pid}\n")

    def set_cores(self, cores: float | None) -> None:
        """``cores`` of CPU time per period (None: no limit)."""
        if cores is not None and not (math.isfinite(cores) and cores > 0):
            raise ValueError(f"cores must be > 0, got {cores!r}")
        quota = None if cores is None else max(MIN_QUOTA_US, round(cores * self.period_us))
        if self.version == 2:
            (self.path / "cpu.max").write_text(f"{quota or 'max'} {self.period_us}\n")
        else:
            (self.path / "cpu.cfs_period_us").write_text(f"{self.period_us}\n")
            (self.path / "cpu.cfs_quota_us").write_text(f"{quota or -1}\n")
        self.cores = cores

    def read_cores(self) -> float | None:
        """The quota the kernel holds now, in cores (None: unlimited)."""
        if self.version == 2:
            quota, period = (self.path / "cpu.max").read_text().split()
            return None if quota == "max" else int(quota) / int(period)
        quota_us = int((self.path / "cpu.cfs_quota_us").read_text())
        period_us = int((self.path / "cpu.cfs_period_us").read_text())
        return None if quota_us < 0 else quota_us / period_us

    def pids(self) -> list[int]:
        return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]

    def remove(self) -> None:
        """Move what is left to the parent and delete the group."""
        parent = self.path.parent / "cgroup.procs"
        with contextlib.suppress(OSError):
            for pid in self.pids():
                with contextlib.suppress(OSError):
                    parent.write_text(f"{pid}\n")
        with contextlib.suppress(OSError):
            self.path.rmdir()


class AffinityQuota:
    """The fallback: the processes pinned to ``ceil(cores)`` CPUs (whole cores only)."""

    def __init__(self) -> None:
        self._pids: list[int] = []
        self.cores: float | None = None

    def add(self, pid: int) -> None:
        self._pids.append(pid)
        self._apply()

    def set_cores(self, cores: float | None) -> None:
        self.cores = cores
        self._apply()

    def _apply(self) -> None:
        every = sorted(os.sched_getaffinity(0))
        count = len(every) if self.cores is None else max(1, math.ceil(self.cores))
        for pid in list(self._pids):
            try:
                os.sched_setaffinity(pid, every[:count])
            except ProcessLookupError:
                self._pids.remove(pid)

    def remove(self) -> None:
        self._pids.clear()


def _writable(path: Path) -> bool:
    return path.is_dir() and os.access(path, os.W_OK)


def detect(base: Path = Path("/sys/fs/cgroup")) -> tuple[Path, int] | None:
    """Where a slackwise cgroup with a CPU quota can be made here, and the cgroup version;
    None when nowhere (then :class:`AffinityQuota`)."""
    controllers = base / "cgroup.controllers"
    if controllers.is_file() and "cpu" in controllers.read_text().split() and _writable(base):
        return base / "slackwise", 2
    unified = base / "unified"
    listed = unified / "cgroup.controllers"
    if listed.is_file() and _writable(unified) and "cpu" in listed.read_text().split():
        return unified / "slackwise", 2
    v1 = base / "cpu"
    if (v1 / "cpu.cfs_quota_us").is_file() and _writable(v1):
        return v1 / "slackwise", 1
    return None


def quota_for(
    name: str, *, base: Path = Path("/sys/fs/cgroup"), period_us: int = PERIOD_US
) -> CpuQuota:
    """A quota for the group ``name`` over CFS periods of ``period_us``: a cgroup where one can
    be made, else CPU affinity (with a warning naming what is missing)."""
    found = detect(base)
    if found is not None:
        root, version = found
        try:
            return CgroupQuota(root, name, version=version, period_us=period_us)
        except OSError as exc:
            logger.warning("cannot make cgroup %s (%s): CPU affinity instead", root / name, exc)
    else:
        logger.warning(
            "no writable cgroup cpu controller under %s: cores are bounded by CPU "
            "affinity (whole cores) instead of a quota",
            base,
        )
    return AffinityQuota()
