"""What each ``slackwise report --run GROUP`` re-runs: the simulated experiments of a group
(``slackwise simulate``: config, JSON written, extra flags) and the live ones (``slackwise
experiment``, one at a time, each needing both cores)."""

from __future__ import annotations

__all__ = ["GROUPS", "INPUT", "INTERFERENCE", "INTERFERENCE_MORE", "LIVE", "SLOW", "STALL"]

_GPU_POLICIES = (
    "--policies",
    "ED-30,ED-50,ED-DYN,EDF-30,EDF-50,EDF-DYN,ED-30-paper,"
    "ED-50-paper,ED-DYN-paper,EDF-30-paper,EDF-50-paper,EDF-DYN-paper,GS,GS-paper,GS-T",
)
#: Table 4 on CPU: the paper's policies (the default set) and the throughput-aware split
_CPU_POLICIES = (
    "--policies",
    "FIFO-NB,ED-NB,ED-30,ED-50,ED-DYN,EDF-NB,EDF-30,EDF-50,EDF-DYN,ED-NB-paper,ED-30-paper,"
    "ED-50-paper,ED-DYN-paper,EDF-NB-paper,EDF-30-paper,EDF-50-paper,EDF-DYN-paper,GS,GS-T",
)
#: GS-T, its two parts apart (its split alone, its batching alone) and the batching for
#: throughput under the baselines' own stage deadlines
_THROUGHPUT = "GS-T,GS-T-split,GS-TB,ED-DYN-TB,EDF-DYN-TB"

#: the simulated experiments each ``--run`` group re-runs: (config, JSON written, extra flags of
#: ``slackwise simulate``); a text summary goes beside each JSON (``.txt``)
GROUPS: dict[str, tuple[tuple[str, str, tuple[str, ...]], ...]] = {
    "fig9": tuple(
        (
            f"experiments/sim/autoscale-{name}.yaml",
            f"experiments/sim/results/autoscale-{name}.json",
            (),
        )
        for name in (
            "nasa",
            "twitter",
            "big-spike",
            "steep-tri-phase",
            "nasa-quiet",
            "azure-llm-code",
            "azure-llm-conv",
        )
    ),
    "grandslam": tuple(  # Fig. 13 and 14; per function type (--per-type) at the paper's scale
        (
            f"experiments/sim/{name}.yaml",
            f"experiments/sim/results/{name}.json",
            (
                *(_GPU_POLICIES if "gpu" in name or "1000" in name else _CPU_POLICIES),
                *(() if "1000" in name else ("--per-type",)),
            ),
        )
        for name in ("wl1-cpu", "wl2-cpu", "wl1-gpu", "wl2-gpu", "wl1-cpu-1000", "wl2-cpu-1000")
    )
    + tuple(  # the ablation of the paper's Fig. 9: which part of GS buys what
        (
            f"experiments/sim/{name}.yaml",
            f"experiments/sim/results/{name}-ablation.json",
            ("--policies", "FIFO-NB,EDF-NB,FIFO-DYN,GS-NB,GS,GS-paper"),
        )
        for name in ("wl1-cpu", "wl2-cpu")
    )
    + tuple(  # GS's variants beyond the paper (GS-Q, GS-M), against GS and the best two
        (
            f"experiments/sim/{name}.yaml",
            f"experiments/sim/results/{name}-variants.json",
            ("--policies", "GS,GS-T,GS-TB,GS-Q,GS-M,ED-DYN,EDF-DYN"),
        )
        for name in ("wl1-cpu", "wl2-cpu")
    )
    + tuple(  # a mix other than ours: DNN stages on GPU nodes, classic stages on CPU nodes
        (
            f"experiments/sim/{name}.yaml",
            f"experiments/sim/results/{name}.json",
            ("--policies", f"GS,{_THROUGHPUT},GS-Q,GS-M,ED-DYN,EDF-DYN,ED-30,EDF-30,FIFO-NB"),
        )
        for name in ("wl1-mixed", "wl2-mixed", "wl1-mixed-late")
    )
    + tuple(  # requests of two input sizes; GS priced per input size (ETC per size) or not
        (
            f"experiments/sim/{name}.yaml",
            f"experiments/sim/results/{name}.json",
            (
                "--policies",
                f"GS,GS-paper,GS-Q,GS-M,ED-DYN,EDF-DYN,ED-DYN-paper,EDF-DYN-paper,{_THROUGHPUT}",
            ),
        )
        for name in ("wl1-cpu-inputs",)
    )
    + tuple(
        (f"experiments/sim/{name}.yaml", f"experiments/sim/results/{name}.json", ())
        for name in ("wl1-cpu-inputs-etc",)
    ),
    "roma": tuple(
        (f"experiments/sim/roma-{name}.yaml", f"experiments/sim/results/roma-{name}.json", ())
        for name in ("allapps", "allapps-alpha08", "2apps-a", "2apps-b")
    ),
}

#: the live experiments ``--run live`` re-runs (``slackwise experiment``, one at a time: each
#: needs both cores): (config, JSON written, extra flags); ``make-run`` is ``make run``'s window
LIVE: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "experiments/embed-twitter.yaml",
        "experiments/results/make-run.json",
        ("--duration-s", "60", "--repeat", "3"),
    ),
    ("experiments/embed-twitter.yaml", "experiments/results/embed-twitter.json", ("--repeat", "3")),
    ("experiments/embed-nasa.yaml", "experiments/results/embed-nasa.json", ("--repeat", "3")),
    (
        "experiments/digits-twitter.yaml",
        "experiments/results/digits-twitter.json",
        ("--repeat", "3"),
    ),
    ("experiments/roma-2apps.yaml", "experiments/results/roma-2apps.json", ()),
    ("experiments/roma-2apps-t1.yaml", "experiments/results/roma-2apps-t1.json", ()),
    (
        "experiments/roma-2apps-t1.yaml",
        "experiments/results/roma-2apps-adapter.json",
        ("--modes", "adapter_ct,adapter_ff,adapter_max"),
    ),
    *(
        (
            "experiments/img-query-twitter.yaml",
            f"experiments/results/img-query{load}-seed{seed}.json",
            ("--modes", "ED-DYN,EDF-DYN,GS", "--seed", str(seed), *flags),
        )
        for load, flags in (("", ()), ("-120", ("--max-rps", "120")))
        for seed in (1, 2, 3)
    ),
)
#: one core kept busy by a neighbour for the middle third of make run's window, three repeats
INTERFERENCE = (
    "experiments/embed-twitter.yaml",
    "experiments/results/interference.json",
    (
        "--duration-s",
        "60",
        "--modes",
        "mlproxy,slackwise,slackwise-kpa",
        "--disturbance",
        "cpu:20:20:1",
        "--repeat",
        "3",
    ),
)
#: the function's replicas stopped for five seconds (a stalled node), three repeats
STALL = (
    "experiments/embed-twitter.yaml",
    "experiments/results/stall.json",
    (
        "--duration-s",
        "60",
        "--modes",
        "mlproxy,slackwise,slackwise-kpa",
        "--disturbance",
        "pause:20:5",
        "--repeat",
        "3",
    ),
)
#: the function's ready replicas throttled to a quarter of their CPU for the middle third
SLOW = (
    "experiments/embed-twitter.yaml",
    "experiments/results/slow.json",
    (
        "--duration-s",
        "60",
        "--modes",
        "mlproxy,slackwise,slackwise-kpa",
        "--disturbance",
        "slow:20:20:4",
        "--repeat",
        "3",
    ),
)
#: inputs eight and four times the usual size (the model's own larger inputs) for the middle
#: third
INPUT = tuple(
    (
        "experiments/embed-twitter.yaml",
        out,
        (
            "--duration-s",
            "60",
            "--modes",
            "mlproxy,slackwise,slackwise-kpa",
            "--disturbance",
            f"input:20:20:{n}",
            "--repeat",
            "3",
        ),
    )
    for n, out in ((8, "experiments/results/input.json"), (4, "experiments/results/input-4.json"))
)
#: the three other live experiments with the same neighbour, for the middle third of their window
INTERFERENCE_MORE = tuple(
    (
        f"experiments/{name}.yaml",
        f"experiments/results/interference-{name}.json",
        (
            "--modes",
            "mlproxy,slackwise,slackwise-kpa",
            "--disturbance",
            "cpu:40:40:1",
            "--repeat",
            "3",
        ),
    )
    for name in ("embed-twitter", "embed-nasa", "digits-twitter")
)
GROUPS["live"] = (*LIVE, INTERFERENCE, *INTERFERENCE_MORE, STALL, SLOW, *INPUT)
