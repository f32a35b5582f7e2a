"""ROMA's evaluation (seed 003, §5, Tables 1–2) simulated on our models: workers with CPU cores
and GPUs, one CPU executable per model per worker with a core allocation, one GPU executable per
GPU holding every model, and five systems deciding which model a free GPU serves and how many
cores each CPU executable gets:

============  =============================  ====================================================
system        GPU                            CPU cores per executable
============  =============================  ====================================================
``roma``      Algorithm 1 (most deficient)   CT controllers (PI, every 1 s) under Algorithm 2
``rr_ct``     round robin                    CT controllers under Algorithm 2
``rr_rules``  round robin                    ±1 core at ≥ 0.8 / ≤ 0.2 × SLA, every 15 s
``rr_max``    round robin                    every core, split evenly
``rr_min``    round robin                    one core per worker, split evenly
============  =============================  ====================================================

``roma_batched`` adds what the paper does not do: a GPU serves a batch of the chosen model's
queue sized by its head's slack (:func:`slackwise_policies.roma.gpu_batch`), not one request.
``roma_ff`` is ``roma`` with a feed-forward floor under each CT controller's demand: the cores
the last second's arrivals call for at ``ff_utilization``, counting the CPUs' share of them as
the GPUs and the CPUs split that second's starts
(:func:`slackwise_policies.roma.load_floor`).

Where: :mod:`simulator.roma.config` reads the ``roma:`` section, :mod:`simulator.roma.system`
steps one system, :mod:`simulator.roma.run` runs them all.

How a CPU executable serves (modelled; ``benchmarks/cores_profile.py`` measures it against real
quotas, see docs/roma.md): our functions run one request per
thread, so an executable with ``u`` cores runs up to ``ceil(u)`` requests at once and shares the
``u`` cores among them (a CFS quota: each progresses at ``min(1, u / running)`` of a core); a
request needs the profile's batch-1 in-process time of one core (``functions/profiles/cpu``,
measured at one thread). The CPU scheduler takes the oldest request of a random non-empty queue
for a random executable of that model with a free thread, as ROMA's does. A GPU batch takes the
H100 profile's time (``functions/profiles/gpu``). Time advances in steps of ``step_ms``.

Counted as the paper counts: ``violations`` are (app, second) pairs whose completed requests'
mean response time exceeds the app's SLA; ``core_seconds`` the allocation granted, summed over
executables and time (RR+max: every core for the whole run).
"""

from simulator.roma.config import (
    RomaApp,
    RomaConfig,
    is_roma_config,
    load_roma_config,
    parse_roma_config,
)
from simulator.roma.run import cpu_work_s, format_roma, run_roma
from simulator.roma.system import SYSTEMS, arrivals, simulate_system, summary_row

__all__ = [
    "SYSTEMS",
    "RomaApp",
    "RomaConfig",
    "arrivals",
    "cpu_work_s",
    "format_roma",
    "is_roma_config",
    "load_roma_config",
    "parse_roma_config",
    "run_roma",
    "simulate_system",
    "summary_row",
]
