"""Stage slack: how a chain's end-to-end deadline becomes one deadline per stage.

An app is a chain of functions with one end-to-end SLO. Every stage's queue orders its requests by
their *stage* deadline and batches as far as every member's stage deadline allows
(:func:`slackwise_policies.batching.decide`), so how the SLO is split decides how greedily each
stage may batch. A :class:`StagePolicy` names one way of splitting and batching; :data:`POLICIES`
holds GrandSLAM's (seed 000, §4.2–4.4) and the baselines it is compared with in §6 (Figs. 11–13):

* **GS** (GrandSLAM): the budget of stage ``m`` is proportional to its estimated latency ``L_m``
  at the batch sizes in use (Eq. 4): ``slack_m = L_m / (L_a + … + L_m + …) × SLA``. With slack
  forwarding (§4.4), when a stage finishes the time left to the end-to-end deadline is split again,
  in the same proportions, over the stages still to run, so what one stage leaves unused goes to
  the rest instead of being lost.
* **ED-*** (equal division): each of ``k`` stages may spend ``SLA / k`` from when it enters it
  (no forwarding, as in the paper's baseline).
* **EDF-*** (earliest deadline first): every stage's deadline is the end-to-end deadline; the
  slack of a request at a stage is all the time it has left (the greedy policy).
* **FIFO-NB**: arrival order, no batching; deadlines play no part.
* **GS-Q** (beyond the paper): GS with every stage priced by its ETC including the queueing term
  of Eq. 1, ``L_m(n) · (1 + queued_m / (n · slots_m))``: a stage with a queue gets the budget it
  needs to batch its way out, taken from stages that have none.
* **GS-T** (beyond the paper): Eq. 4's split with every stage raised to the least budget with
  which its function carries its share of the highest rate the fleet can carry in the measured
  mix of apps, the time taken from the other stages in Eq. 4's proportions
  (:mod:`slackwise_policies.throughput_split`): the function that binds gets the budget its
  batches need; where none needs more than Eq. 4 gives it, the split is GS's.
* **GS-M** (beyond the paper): every stage gets its estimated latency, and the time beyond their
  sum goes where batching pays, in proportion to ``gain × latency`` (``gain``: how much a
  request's cost falls when that stage's batch doubles; :func:`marginal_budgets`).
* **FIFO-DYN** and **GS-NB** (the ablation of the paper's Fig. 9): batching alone (arrival order,
  dynamic batches under the end-to-end deadline) and GS's slack split alone (no batching); with
  FIFO-NB (neither) and EDF-NB (reordering alone) they show which part of GS buys what.

**As in the paper** (the ``-paper`` policies, ``ED-DYN-paper``, ...): the same stage deadlines and
batch sizes, with none of this project's additions to the batching: no waiting for company only
when it pays, no MLProxy dispatch timeout, no late requests moved behind savable ones, and the
dynamic batch is Algorithm 1 as written (:mod:`slackwise_policies.paper_batching`). The paper's
baselines are these; the plain names are the *strengthened* baselines, which share the project's
additions with GS, so a gain over them is the stage deadlines' alone. ``GS-paper`` is GS without
the additions (how much of GS's gain they buy).

The suffix names the batching: ``NB`` no batching (one request per batch), ``30``/``50`` a static
batch size (whatever is queued, up to that many, leaves when a slot is free: Djinn&Tonic's fixed
batch), ``DYN`` (the paper's ED-DNB/EDF-DNB) the same dynamic, deadline-driven batching GS uses,
only with that policy's stage deadlines. GS, ED-DYN and EDF-DYN therefore differ in one thing,
the stage deadlines, which is what the paper compares.

Everything here is pure: times are seconds on the caller's clock, latencies milliseconds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Literal

__all__ = [
    "PAPER_SUFFIX",
    "POLICIES",
    "STAGE_POLICIES",
    "VARIANTS",
    "Batching",
    "Division",
    "StagePolicy",
    "marginal_budgets",
    "proportional_budgets",
    "stage_deadline",
    "stage_policy",
]

#: how the end-to-end budget is split over stages
Division = Literal["proportional", "equal", "end_to_end", "marginal"]
#: how a stage forms batches: by deadlines (dynamic), one request each, or a fixed size
Batching = Literal["dynamic", "none", "static"]


def proportional_budgets(remaining_s: float, estimates_ms: Sequence[float]) -> list[float]:
    """Split ``remaining_s`` over stages in proportion to their estimated latencies (Eq. 4).

    The budgets sum to ``remaining_s`` (the last one takes the rounding). A stage estimated at
    zero gets nothing; when every estimate is zero the time is split equally. A negative
    remainder (the deadline has passed) is split the same way, so every stage deadline is past.
    """
    if not estimates_ms:
        raise ValueError("a chain has at least one stage")
    if any(not e >= 0.0 for e in estimates_ms):
        raise ValueError(f"latency estimates must be >= 0, got {list(estimates_ms)!r}")
    total = float(sum(estimates_ms))
    count = len(estimates_ms)
    shares = [1.0 / count] * count if total <= 0.0 else [e / total for e in estimates_ms]
    budgets = [remaining_s * s for s in shares[:-1]]
    budgets.append(remaining_s - sum(budgets))
    return budgets


def marginal_budgets(
    remaining_s: float, estimates_ms: Sequence[float], gains: Sequence[float]
) -> list[float]:
    """Each stage its estimated latency, and the time beyond their sum in proportion to what
    batching gains there (``gains[m]`` in [0, 1]: how much a request's cost falls when the batch
    doubles) weighted by the stage's latency. A stage where batching does not pay gets what it
    needs and no more; with no spare time (or no gain anywhere) the split is Eq. 4's."""
    if len(gains) != len(estimates_ms):
        raise ValueError("one gain per stage")
    need_s = sum(estimates_ms) / 1000.0
    weights = [max(0.0, min(1.0, g)) * e for g, e in zip(gains, estimates_ms, strict=True)]
    if remaining_s <= need_s or sum(weights) <= 0.0:
        return proportional_budgets(remaining_s, estimates_ms)
    spare = proportional_budgets(remaining_s - need_s, weights)
    budgets = [e / 1000.0 + s for e, s in zip(estimates_ms, spare, strict=True)]
    budgets[-1] = remaining_s - sum(budgets[:-1])
    return budgets


def stage_deadline(
    division: Division,
    *,
    stage: int,
    now: float,
    arrival: float,
    deadline: float,
    estimates_ms: Sequence[float],
    forward: bool,
    gains: Sequence[float] | None = None,
) -> float:
    """The deadline of ``stage`` (0-based) for a request entering it at ``now``.

    ``estimates_ms`` holds the estimated latency of every stage of the chain, in order, at the
    batch sizes in use; ``arrival`` and ``deadline`` are the request's end-to-end times.

    * Without ``forward`` a stage's slack is what the paper calls it (§4.2): "the maximum amount
      of time a request can spend at a particular stage", its share of the whole SLA counted
      from when it enters the stage. Time an earlier stage left unused is lost.
    * With ``forward`` (§4.4) the time left to the end-to-end deadline is split at ``now`` over
      the stages from ``stage`` on, in the same proportions, so unused time is carried forward
      and a deficit is shared by the stages still to run. The last stage then always gets the
      end-to-end deadline.

    Either way a stage deadline is never later than the end-to-end one, and entering a stage
    later never makes its deadline earlier.
    """
    count = len(estimates_ms)
    if not 0 <= stage < count:
        raise ValueError(f"stage must be in [0, {count}), got {stage!r}")
    if division == "end_to_end":
        return deadline
    if division == "marginal" and gains is None:
        raise ValueError("the marginal division needs each stage's gain from batching")
    if forward:
        rest = count - stage
        if rest == 1:
            return deadline  # exactly: now + (deadline - now) may round off by an ulp
        if division == "equal":
            return min(deadline, now + (deadline - now) / rest)
        if division == "marginal" and gains is not None:
            split = marginal_budgets(deadline - now, estimates_ms[stage:], gains[stage:])
            return min(deadline, now + split[0])
        return min(deadline, now + proportional_budgets(deadline - now, estimates_ms[stage:])[0])
    sla = deadline - arrival
    if division == "marginal" and gains is not None:
        return min(deadline, now + marginal_budgets(sla, estimates_ms, gains)[stage])
    shares = [1.0] * count if division == "equal" else estimates_ms
    return min(deadline, now + proportional_budgets(sla, shares)[stage])


@dataclass(frozen=True, kw_only=True)
class StagePolicy:
    """One way to order, budget and batch the stages of a chain (see the module docstring)."""

    name: str
    order: Literal["deadline", "arrival"]
    division: Division
    forward: bool
    batching: Batching
    static_batch: int = 0
    #: price each stage by its ETC with the queueing term (Eq. 1): its batch latency times the
    #: rounds of batches queued ahead (:func:`slackwise_policies.estimates.stage_estimates`)
    queue_aware: bool = False
    #: split by what binds: each stage raised to the least budget its function needs at the
    #: highest rate the fleet carries in the measured mix
    #: (:mod:`slackwise_policies.throughput_split`)
    throughput_aware: bool = False
    #: batch for throughput under load (:func:`slackwise_policies.scheduling.next_batch`'s
    #: ``sustain_slots``): give up what only a batch too small to keep up could serve, and send
    #: apart what costs as much together
    sustain: bool = False
    #: batch as the paper defines its policies, without this project's additions (Algorithm 1
    #: as written, no waiting, no timeout, no demotion of late requests)
    paper: bool = False

    def __post_init__(self) -> None:
        if self.batching == "static" and self.static_batch < 1:
            raise ValueError(f"{self.name}: a static batch size must be >= 1")

    @property
    def deadline_aware(self) -> bool:
        """Whether batches are formed by the members' stage deadlines."""
        return self.batching == "dynamic"

    def stage_deadline(
        self,
        *,
        stage: int,
        now: float,
        arrival: float,
        deadline: float,
        estimates_ms: Sequence[float],
        gains: Sequence[float] | None = None,
    ) -> float:
        """The deadline this policy gives ``stage`` for a request entering it at ``now``
        (``gains``: each stage's gain from batching, for the marginal division)."""
        return stage_deadline(
            self.division,
            stage=stage,
            now=now,
            arrival=arrival,
            deadline=deadline,
            estimates_ms=estimates_ms,
            forward=self.forward,
            gains=gains,
        )

    def batch_limit(self, dynamic_limit: int) -> int:
        """The batch cap at a stage whose AIMD/configured limit is ``dynamic_limit``."""
        if self.batching == "none":
            return 1
        if self.batching == "static":
            return self.static_batch
        return dynamic_limit


def _family(
    prefix: str, division: Division, order: Literal["deadline", "arrival"], *, paper: bool = False
) -> list[StagePolicy]:
    """One baseline family (ED or EDF): no batching, static batches of 30 and 50, dynamic."""
    tail = PAPER_SUFFIX if paper else ""
    base = StagePolicy(
        name="", order=order, division=division, forward=False, batching="none", paper=paper
    )
    return [
        replace(base, name=f"{prefix}-NB{tail}"),
        replace(base, name=f"{prefix}-30{tail}", batching="static", static_batch=30),
        replace(base, name=f"{prefix}-50{tail}", batching="static", static_batch=50),
        replace(base, name=f"{prefix}-DYN{tail}", batching="dynamic"),
    ]


#: the names of the policies as the paper defines them end with this
PAPER_SUFFIX = "-paper"


GS = StagePolicy(
    name="GS", order="deadline", division="proportional", forward=True, batching="dynamic"
)
FIFO_NB = StagePolicy(
    name="FIFO-NB", order="arrival", division="end_to_end", forward=False, batching="none"
)
_ED_DYN, _EDF_DYN = (
    _family("ED", "equal", "deadline")[3],
    _family("EDF", "end_to_end", "deadline")[3],
)
#: beyond the paper: GS with each stage priced by its ETC including queueing (Eq. 1), so a stage
#: that has fallen behind gets the budget to batch its way out
GS_Q = replace(GS, name="GS-Q", queue_aware=True)
#: beyond the paper: each stage its latency, the spare time by where batching pays
#: (:func:`marginal_budgets`)
GS_M = replace(GS, name="GS-M", division="marginal")
#: the ablation of the paper's Fig. 9: batching without reordering (arrival order, dynamic
#: batches under the end-to-end deadline), and GS's slack split without batching
FIFO_DYN = replace(FIFO_NB, name="FIFO-DYN", batching="dynamic")
GS_NB = replace(GS, name="GS-NB", batching="none")
#: beyond the paper: Eq. 4 with every stage raised to the budget its function needs to carry its
#: share of the highest rate the fleet carries (:mod:`slackwise_policies.throughput_split`)
GS_T = replace(GS, name="GS-T", throughput_aware=True, sustain=True)
#: GS-T's two parts apart (the ablation): its split with GS's batching, and the batching for
#: throughput with each stage policy's own deadlines
GS_T_SPLIT = replace(GS, name="GS-T-split", throughput_aware=True)
GS_TB = replace(GS, name="GS-TB", sustain=True)
ED_DYN_TB = replace(_ED_DYN, name="ED-DYN-TB", sustain=True)
EDF_DYN_TB = replace(_EDF_DYN, name="EDF-DYN-TB", sustain=True)
#: GS without this project's additions to batching: what they buy GS
GS_PAPER = replace(GS, name=f"GS{PAPER_SUFFIX}", paper=True)
#: every policy by name, in the order of the paper's figures
POLICIES: Mapping[str, StagePolicy] = MappingProxyType(
    {
        p.name: p
        for p in (
            FIFO_NB,
            *_family("ED", "equal", "deadline"),
            *_family("EDF", "end_to_end", "deadline"),
            *_family("ED", "equal", "deadline", paper=True),
            *_family("EDF", "end_to_end", "deadline", paper=True),
            GS,
        )
    }
)


#: policies beyond the paper's, run when named (not in the default set of a comparison)
VARIANTS: Mapping[str, StagePolicy] = MappingProxyType(
    {
        p.name: p
        for p in (
            GS_T,
            GS_T_SPLIT,
            GS_TB,
            ED_DYN_TB,
            EDF_DYN_TB,
            GS_Q,
            GS_M,
            GS_PAPER,
            FIFO_DYN,
            GS_NB,
        )
    }
)


#: every stage policy's name (``adapter.stage_policy``, an app experiment's modes)
STAGE_POLICIES: tuple[str, ...] = (*POLICIES, *VARIANTS)


def stage_policy(name: str) -> StagePolicy:
    """The policy called ``name`` (case-insensitive); a ValueError lists the known ones."""
    for key, policy in {**POLICIES, **VARIANTS}.items():
        if key.lower() == name.strip().lower():
            return policy
    known = ", ".join([*POLICIES, *VARIANTS])
    raise ValueError(f"stage policy must be one of {known}, got {name!r}")
