"""A step change of input size in a replay (``--larger-inputs START_S:DURATION_S:FACTOR``).

The requests sent from ``START_S`` for ``DURATION_S`` seconds of the replay carry the model's own
larger instances (``Model.larger_instances``: about ``FACTOR`` times the usual size), the rest its
usual samples; so a function's service time steps up for the window as the model makes it (a
client that starts sending whole paragraphs where it sent sentences), not by a factor we assume.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["InputStep", "body_picker", "larger_bodies", "parse_input_step", "pick_bodies"]


@dataclass(frozen=True)
class InputStep:
    """Inputs ``factor`` times the usual size for requests sent in ``[start_s, end_s)``."""

    start_s: float
    duration_s: float
    factor: int

    @property
    def end_s(self) -> float:
        return self.start_s + self.duration_s

    def inside(self, t: float) -> bool:
        return self.start_s <= t < self.end_s


def parse_input_step(text: str) -> InputStep:
    """``START_S:DURATION_S:FACTOR``; ValueError with the reason otherwise."""
    parts = text.split(":")
    if len(parts) != 3:
        raise ValueError(f"{text!r}: expected START_S:DURATION_S:FACTOR, e.g. 20:20:8")
    try:
        start, length, factor = float(parts[0]), float(parts[1]), float(parts[2])
    except ValueError:
        raise ValueError(f"{text!r}: numbers expected") from None
    if start < 0 or length <= 0:
        raise ValueError(f"{text!r}: START_S >= 0 and DURATION_S > 0")
    if factor < 2 or factor != int(factor):
        raise ValueError(f"{text!r}: FACTOR must be a whole number >= 2")
    return InputStep(start_s=start, duration_s=length, factor=int(factor))


def larger_bodies(kind: str, count: int, factor: int) -> list[bytes]:
    """Bodies ``{'instances': [x]}`` of the ``kind`` model's larger instances; ValueError when
    the model has none."""
    from functions.registry import create_model

    instances = create_model(kind).larger_instances(count, factor)
    if instances is None:
        raise ValueError(f"model {kind!r} has no larger inputs to send")
    return [json.dumps({"instances": [x]}, separators=(",", ":")).encode() for x in instances]


def pick_bodies(
    schedule: Sequence[float],
    bodies: Sequence[bytes],
    larger: Sequence[bytes] = (),
    step: InputStep | None = None,
) -> Callable[[int], bytes]:
    """Request ``i``'s body: a larger one when it is sent inside ``step``, else a usual one
    (each set cycled)."""
    if not bodies:
        raise ValueError("no bodies to send")
    if step is None or not larger:
        return lambda i: bodies[i % len(bodies)]

    def pick(i: int) -> bytes:
        chosen = larger if step.inside(schedule[i]) else bodies
        return chosen[i % len(chosen)]

    return pick


def body_picker(
    schedule: Sequence[float],
    bodies: Sequence[bytes],
    model: str | None,
    larger_inputs: str | None,
    distinct: int,
) -> Callable[[int], bytes]:
    """The replayer's bodies, with ``--larger-inputs`` (``larger_inputs``, of the ``model``'s
    instances, ``distinct`` of them) applied; ValueError naming what is wrong."""
    if larger_inputs is None:
        return pick_bodies(schedule, bodies)
    if model is None:
        raise ValueError(f"{larger_inputs!r}: needs --model (the model's own larger inputs)")
    step = parse_input_step(larger_inputs)
    larger = larger_bodies(model, max(1, min(distinct, len(schedule))), step.factor)
    return pick_bodies(schedule, bodies, larger, step)
