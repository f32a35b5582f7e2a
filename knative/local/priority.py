"""A starting replica yields the CPU to the ones serving: its own niceness until it is ready.

On a cluster a new pod starts on a node's spare capacity, or on a node of its own; on the local
platform every replica shares the machine's cores, and a replica loading its model (imports,
weights, a warm-up batch: seconds of CPU) takes them from the replicas answering requests, just when
the platform started it because those were short of capacity. So a replica is spawned at a niceness
``starting_nice`` above the platform's own (``platform.starting_nice``: ``auto``, the default,
yields only when the new replica brings no CPU of its own, :func:`auto_step`; 0 is off): the
kernel's scheduler gives a nice-10 task about a tenth of the CPU a nice-0 one gets while both want
it, and all of it while the others are idle, so the start costs the serving replicas little and
takes longer only while they are busy. When it is ready, every thread of it (Linux keeps a niceness
per thread, and the model's thread pools are made during the load) goes back to the platform's
niceness, so it serves as an equal.

Going back needs the right to lower a niceness (root, ``CAP_SYS_NICE`` or an ``RLIMIT_NICE`` that
allows it); without it a replica would serve at the lower priority for its whole life, so the
platform then starts replicas at its own niceness and logs why once (:func:`can_restore`).

**Autogroups.** Where the kernel groups tasks by session
(``/proc/sys/kernel/sched_autogroup_enabled``, on by default in most distributions), the scheduler
first shares a CPU fairly between the sessions and only then by niceness inside each: a replica is
spawned in a session of its own (so that its process group can be stopped whole), and a thread's
niceness alone changes nothing against the replicas serving in theirs (measured on one core: two
busy loops in sessions of their own split it 150/150 ticks with one at nice 10, 271/29 with its
session's niceness at 10; ``tests/test_priority.py``). So the niceness goes on the replica's
session too (``/proc/<pid>/autogroup``, :func:`set_group_nice`): set by the platform as soon as
the replica has exec'd (:func:`lower`), and set back with its threads when it is ready, to the
platform's thread niceness (a process in init's session, such as a container's first process or a
CI runner, is in the kernel's root group and has no session niceness to copy).
"""

from __future__ import annotations

import contextlib
import logging
import os
import resource
from pathlib import Path

__all__ = [
    "AUTO_STEP",
    "auto_step",
    "autogroups",
    "can_restore",
    "group_nice",
    "lower",
    "niceness",
    "restore",
    "set_group_nice",
    "starting",
]

logger = logging.getLogger(__name__)

#: the highest niceness Linux has
_MOST_NICE = 19
#: the step ``starting_nice: auto`` takes when it yields: a tenth of a serving task's weight
AUTO_STEP = 10
#: this process has said once that it may not lower a niceness again
_warned: list[bool] = []


def auto_step(cpus: int, ready_threads: int) -> int:
    """``starting_nice: auto``: the step a replica starts at when the platform may run on
    ``cpus`` CPUs and its ready replicas hold ``ready_threads`` of them (each its batch threads).
    When they hold them all, the new replica brings no CPU of its own: until they idle it can
    only take theirs, and its start relieves nobody (one core: its load halved the answers of
    the replica serving beside it, docs/advisor.md), so it yields (:data:`AUTO_STEP`). With a
    CPU to spare, it loads at full speed there as an equal (0): yielding would only delay the
    relief it brings. With nothing ready there is nobody to yield to. Pure."""
    return AUTO_STEP if ready_threads > 0 and cpus <= ready_threads else 0


def niceness(pid: int = 0) -> int:
    """The niceness of ``pid``'s main thread (0: this process)."""
    return os.getpriority(os.PRIO_PROCESS, pid)


def can_restore(base: int | None = None) -> bool:
    """Whether this process may set a child's niceness back down to ``base`` (its own by
    default) once raised: root, or an ``RLIMIT_NICE`` whose ceiling ``20 - limit`` is at most
    ``base`` (``CAP_SYS_NICE`` without root is not probed: such a platform starts replicas at its
    own niceness)."""
    if base is None:
        base = niceness()
    if os.geteuid() == 0:
        return True
    soft, _ = resource.getrlimit(resource.RLIMIT_NICE)
    return soft == resource.RLIM_INFINITY or 20 - soft <= base


def starting(step: int) -> int:
    """The niceness a replica starts at: ``step`` above this process's own, at most 19; this
    process's own where ``step`` is 0 or it could not go back (:func:`can_restore`)."""
    if not 0 <= step <= _MOST_NICE:
        raise ValueError(f"starting_nice must be within 0..{_MOST_NICE}, got {step!r}")
    base = niceness()
    if step == 0:
        return base
    if not can_restore(base):
        if _warned:
            return base
        _warned.append(True)
        logger.warning(
            "starting replicas at this process's niceness (%d): it may not lower a niceness "
            "again (not root, RLIMIT_NICE %s), and a replica must not serve at the lower priority",
            base,
            resource.getrlimit(resource.RLIMIT_NICE)[0],
        )
        return base
    return min(_MOST_NICE, base + step)


def lower(pid: int, nice: int) -> None:
    """Start ``pid``, a replica that has just exec'd (one thread, the leader of a session of its
    own), at ``nice``: its thread and its session. The parent sets it, not the child before
    ``exec``: the platform's event loop waits for that ``exec``, and a child that already
    yielded would make it wait behind the busy replicas (the threads the replica makes later
    inherit the niceness)."""
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, pid, nice)
    set_group_nice(nice, pid)


def restore(pid: int, base: int | None = None) -> int:
    """Set every thread of ``pid`` (and of the processes in its group that it spawned) and
    ``pid``'s session to ``base`` (this process's niceness by default: what :func:`lower` gives
    a replica that does not yield, so every ready replica serves at the same weight); returns how
    many threads and sessions changed. Threads that end meanwhile, and a process that has gone,
    are skipped. The session is set from ``base``, not from this process's own session: a
    process in init's session (a container's first process, a CI runner) is in the kernel's root
    group, which shows no session niceness at all, while its replicas lead sessions of their own."""
    if base is None:
        base = niceness()
    changed = 0
    if group_nice(pid) not in (None, base):
        changed += set_group_nice(base, pid)
    for tid in _threads(pid):
        with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
            if os.getpriority(os.PRIO_PROCESS, tid) != base:
                os.setpriority(os.PRIO_PROCESS, tid, base)
                changed += 1
    return changed


def _threads(pid: int) -> list[int]:
    """The thread ids of ``pid`` and of its children in its process group (the function's own
    processes), read from ``/proc``; ``[pid]`` where ``/proc`` cannot say."""
    try:
        group = os.getpgid(pid)
    except ProcessLookupError:
        return []
    proc = Path("/proc")
    tids: list[int] = []
    try:
        entries = [p for p in proc.iterdir() if p.name.isdigit()]
    except OSError:
        return [pid]
    for entry in entries:
        other = int(entry.name)
        try:
            if other != pid and os.getpgid(other) != group:
                continue
            tids.extend(int(t.name) for t in (entry / "task").iterdir())
        except (OSError, ValueError):
            continue
    return tids or [pid]


def _autogroup(pid: int) -> Path:
    return Path("/proc/self/autogroup" if pid == 0 else f"/proc/{pid}/autogroup")


def autogroups() -> bool:
    """Whether the kernel shares a CPU between sessions before niceness counts."""
    try:
        return Path("/proc/sys/kernel/sched_autogroup_enabled").read_text().strip() == "1"
    except OSError:
        return False


def group_nice(pid: int = 0) -> int | None:
    """The niceness of ``pid``'s session as the scheduler weighs it against other sessions (0:
    this process); None where the kernel does not group tasks by session, or cannot say (a
    process in init's session is in the root group, whose file is empty)."""
    if not autogroups():
        return None
    try:
        # "/autogroup-<id> nice <n>"
        return int(_autogroup(pid).read_text().split()[-1])
    except (OSError, ValueError, IndexError):
        return None


def set_group_nice(nice: int, pid: int = 0) -> int:
    """Set the niceness of ``pid``'s session (0: this process's; a child calls it once it leads
    a session of its own); 1 when it took, 0 where there are no autogroups or it was refused."""
    if group_nice(pid) is None:
        return 0
    try:
        _autogroup(pid).write_text(f"{nice}\n")
    except OSError:
        return 0
    return 1
