"""The fewest instances of each function type that hold the SLA at a fixed load (GrandSLAM's
Fig. 14, per function type): a search over node counts, given a check of a fleet.

Starting from a fleet that holds (the one-factor fleet of
:func:`simulator.runner.instances_at_load`), each function in turn, largest first, gets the
fewest nodes that still hold with the others as they stand (bisection between one node and its
count, holding assumed monotone in each count); then every function is tried once more with one
node fewer, again and again, until no single node can go. The result is a fleet that holds from
which no one node of any function can be taken (checked by the last pass), not always the global
minimum of the sum.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

__all__ = ["fewest_per_function"]

#: the most check passes after the bisections (each tries every function at one node fewer)
MAX_CHECK_PASSES = 4


def fewest_per_function(
    counts: Mapping[str, int], holds: Callable[[Mapping[str, int]], bool]
) -> dict[str, int]:
    """The search in the module docstring from ``counts`` (which must hold); ``holds`` runs the
    workload on a fleet of those node counts and says whether the SLA held."""
    best = dict(counts)
    for name in sorted(best, key=lambda n: (-best[n], n)):
        fails, held = 0, best[name]  # zero nodes never holds a function that gets traffic
        while held - fails > 1:
            mid = (fails + held) // 2
            if holds({**best, name: mid}):
                held = mid
            else:
                fails = mid
        best[name] = held
    for _ in range(MAX_CHECK_PASSES):
        taken = False
        for name in sorted(best, key=lambda n: (-best[n], n)):
            if best[name] > 1 and holds({**best, name: best[name] - 1}):
                best[name] -= 1
                taken = True
        if not taken:
            break
    return best
