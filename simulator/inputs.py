"""Input sizes: requests that cost their functions more or less than the profile's inputs.

GrandSLAM (seed 000, §3.2) finds a request's execution time at a stage to depend on its input
size (an image of 256×256 against 64×64) as much as on the batch size, and keeps a latency model
per (microservice, input size), trained offline at powers-of-two batch sizes; a request's ETC at a
stage is read from the model of its own size. Here an app's requests carry an input-size class
drawn from the app's mix (``apps.X.inputs``), and a function's ``input_cost`` says what one
instance of each class costs against the inputs its profile was measured with (unlisted: 1).

* **Service**: a batch takes its size's sampled time × the mean cost of its members (a large
  image costs its share of the batch that many times over).
* **ETC per input size** (``adapter.etc_by_input``): a request's stage estimates, which the
  policy splits its SLO by, are each stage's estimate × its class's cost relative to the mean
  cost of the instances that stage serves (the latency model learns that mix; the class's
  model is that, scaled as its offline profile says). Without it every request is priced as the
  mix, as before.

Pure given its random stream (seeded apart from the arrivals' and the services').
"""

from __future__ import annotations

import bisect
import itertools
import random
from collections.abc import Sequence

from simulator.config import SimConfig
from simulator.request import SimRequest

__all__ = ["InputSizes"]


class InputSizes:
    """The input-size classes of a config's apps and what they cost its functions."""

    def __init__(self, config: SimConfig, seed: int) -> None:
        self._rng = random.Random(seed + 3_000_003)
        apps = list(config.apps.values())
        self._mixes: list[tuple[tuple[str, ...], list[float]]] = []
        for app in apps:
            total = sum(app.inputs.values())
            cumulative = list(itertools.accumulate(w / total for w in app.inputs.values()))
            self._mixes.append((tuple(app.inputs), cumulative))
        self._cost = {n: dict(fn.input_cost) for n, fn in config.functions.items() if fn.input_cost}
        #: each function's mean cost of one instance over the requests it serves
        self.mean_cost = self._mean_costs(config)
        mean = self.mean_cost
        #: per app, per class: each stage's estimate multiplier (empty: ETC ignores sizes)
        self._scale: list[dict[str, list[float]]] = [
            {c: [self.cost_of(s, c) / mean[s] for s in app.stages] for c in app.inputs}
            if config.etc_by_input
            else {}
            for app in apps
        ]

    def cost_of(self, function: str, input_class: str) -> float:
        costs = self._cost.get(function)
        return 1.0 if costs is None else costs.get(input_class, 1.0)

    def _mean_costs(self, config: SimConfig) -> dict[str, float]:
        """Each function's mean cost of one instance over the requests it serves (every app that
        has it as a stage, by the app's weight and input mix)."""
        out = {}
        for name in config.functions:
            weighted = total = 0.0
            for app in config.apps.values():
                if name not in app.stages:
                    continue
                mix = app.inputs or {"": 1.0}
                share = sum(mix.values())
                for cls, w in mix.items():
                    weighted += app.weight * w / share * self.cost_of(name, cls)
                    total += app.weight * w / share
            out[name] = weighted / total if total > 0 else 1.0
        return out

    def pick(self, app: int) -> str:
        """The input-size class of a new request of app ``app`` ("" when it has no mix)."""
        classes, cumulative = self._mixes[app]
        if not classes:
            return ""
        return classes[min(bisect.bisect_left(cumulative, self._rng.random()), len(classes) - 1)]

    def estimates(self, req: SimRequest, estimates: list[float]) -> list[float]:
        """The stage estimates ``req`` is priced by: its class's, with ETC per input size."""
        scale = self._scale[req.app].get(req.input_class) if self._scale[req.app] else None
        return (
            estimates if scale is None else [e * k for e, k in zip(estimates, scale, strict=True)]
        )

    def batch_cost(self, function: str, batch: Sequence[SimRequest], n: int) -> float:
        """The mean cost of the first ``n`` members of ``batch`` at ``function``."""
        costs = self._cost.get(function)
        if costs is None:
            return 1.0
        return sum(costs.get(r.input_class, 1.0) for r in batch[:n]) / n
