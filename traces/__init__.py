"""Request-rate traces: formats, scaling to an experiment, and arrival schedules.

``load_trace`` reads AutoScale, per-second count and timestamp-CSV files into a frozen ``Trace``;
``traces.shaping`` scales it to a peak rate and holds each step; ``poisson_schedule`` turns it into
seeded arrival times; ``resolve_trace`` finds the real traces the package ships (``nasa``,
``twitter``).
"""

from traces.catalog import resolve_trace
from traces.errors import BadTraceLine, TraceError, TraceNotFound
from traces.formats import detect_format, load_arrivals, load_trace
from traces.schedule import exact_schedule, poisson_schedule
from traces.shaping import downsample, hold, scale_to_peak, window
from traces.synthetic import ramp_trace, spike_trace, step_trace
from traces.trace import Trace

__all__ = [
    "BadTraceLine",
    "Trace",
    "TraceError",
    "TraceNotFound",
    "detect_format",
    "downsample",
    "exact_schedule",
    "hold",
    "load_arrivals",
    "load_trace",
    "poisson_schedule",
    "ramp_trace",
    "resolve_trace",
    "scale_to_peak",
    "spike_trace",
    "step_trace",
    "window",
]
