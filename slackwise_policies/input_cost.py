"""What a request's input size costs a function, learnt from the function's own batches.

GrandSLAM (seed 000, §3.2) finds a stage's execution time to depend on its input's size (an image
of 256×256 against 64×64) as much as on the batch size, and reads a request's ETC from a latency
model of its own size, profiled offline. Live, the adapter has no offline profile per size and
sees every size mixed in the same batches, so it learns the dependence instead:

* a request's **size** is the bytes per instance of its body as it arrived (an image's encoding,
  a text's length), carried to every stage of its chain, as GrandSLAM's input size is a
  property of the request;
* after each warm batch, the batch's **excess** is its measured round trip over what the
  function's latency model (learnt on the mix) estimates at that batch size, and the batch's
  **size** is its members' mean;
* an exponentially weighted least-squares line of excess on size (a plain mean until
  ``1/alpha`` batches) gives the **cost** of a request of any size: the line at its size over
  the line at the mean size the function serves (so a request of the mean size costs 1, and
  the estimate the model gives stands for it).

Until ``min_batches`` batches were seen, and while the sizes seen do not spread (their standard
deviation under ``min_spread`` of their mean: nothing to learn from) or the line is not rising,
every request costs 1, which is what pricing without sizes does. A cost is clipped to
``bounds``. Pure: no clock, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

__all__ = ["InputCost", "batch_input_bytes"]


def batch_input_bytes(members: Iterable[tuple[float, int]]) -> float:
    """The mean size (bytes per instance) of a batch's members, given as (size, instances);
    members of unknown size (0) are left out; 0 when none is known."""
    weighted = count = 0.0
    for size, instances in members:
        if size > 0 and instances > 0:
            weighted += size * instances
            count += instances
    return weighted / count if count else 0.0


class InputCost:
    """One function's cost per input size (see the module docstring)."""

    def __init__(
        self,
        alpha: float = 0.02,
        *,
        min_batches: int = 30,
        min_spread: float = 0.05,
        bounds: tuple[float, float] = (0.25, 8.0),
    ) -> None:
        if not 0.0 < alpha <= 1.0:
            raise ValueError(f"alpha must be in (0, 1], got {alpha!r}")
        if not 0.0 < bounds[0] <= 1.0 <= bounds[1]:
            raise ValueError(f"bounds must hold 1, got {bounds!r}")
        self.alpha = alpha
        self.min_batches = min_batches
        self.min_spread = min_spread
        self.bounds = bounds
        self.batches = 0
        #: the mean size the function serves (bytes per instance)
        self.mean_bytes = 0.0
        self._x = self._y = self._xx = self._xy = 0.0

    def observe(self, size_bytes: float, excess: float) -> None:
        """A warm batch of mean size ``size_bytes`` took ``excess`` times the model's estimate."""
        if not (
            size_bytes > 0 and math.isfinite(size_bytes) and excess > 0 and math.isfinite(excess)
        ):
            return
        self.batches += 1
        a = max(self.alpha, 1.0 / self.batches)  # a plain mean until 1/alpha batches were seen
        self.mean_bytes += a * (size_bytes - self.mean_bytes)
        x = size_bytes / 1000.0  # in kB: the line is fit on sizes, not on a moving mean's ratio
        self._x += a * (x - self._x)
        self._y += a * (excess - self._y)
        self._xx += a * (x * x - self._xx)
        self._xy += a * (x * excess - self._xy)

    def line(self) -> tuple[float, float] | None:
        """(intercept, slope) of excess on relative size; None while nothing can be learnt."""
        if self.batches < self.min_batches:
            return None
        spread = self._xx - self._x * self._x
        if spread < (self.min_spread * self.mean_bytes / 1000.0) ** 2:
            return None
        slope = (self._xy - self._x * self._y) / spread
        if slope <= 0.0:  # larger inputs measured no dearer: nothing to price
            return None
        return self._y - slope * self._x, slope

    def cost(self, size_bytes: float) -> float:
        """What a request of ``size_bytes`` per instance costs against one of the mean size."""
        fit = self.line()
        if fit is None or not size_bytes > 0:
            return 1.0
        intercept, slope = fit
        at_mean = intercept + slope * self.mean_bytes / 1000.0
        if at_mean <= 0.0:
            return 1.0
        low, high = self.bounds
        return min(high, max(low, (intercept + slope * size_bytes / 1000.0) / at_mean))

    def status(self) -> dict[str, Any]:
        """What the function's status shows: what has been learnt, and what it says of a
        request twice the mean size (1.0 while nothing is learnt)."""
        return {
            "batches": self.batches,
            "mean_bytes": round(self.mean_bytes, 1),
            "learnt": self.line() is not None,
            "cost_at_twice_the_mean": round(self.cost(2.0 * self.mean_bytes), 3),
        }
