"""What a running adapter holds: its config, clock, metrics, dispatchers, records, platform view
and advisor (``app.state.adapter``; the routes and the predict endpoint read it)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

from adapter.serving.advisor_loop import Autoscaling
from adapter.serving.chains import Chain
from adapter.serving.cores import CoreControl
from adapter.serving.dispatcher import Dispatcher
from adapter.serving.gpu_route import GpuRoute
from adapter.serving.loop_lag import LoopLag
from adapter.serving.metrics import AdapterMetrics
from adapter.serving.platform_view import PlatformView
from adapter.serving.probe_port import ProbePort
from adapter.serving.records import RecordWriter
from slackwise_config import Config
from slackwise_core.clock import Clock
from slackwise_policies.modes import ModePreset
from slackwise_policies.slack import StagePolicy

__all__ = ["AdapterState"]


@dataclass
class AdapterState:
    """What the running app holds; tests and experiments read it through ``app.state``."""

    config: Config
    clock: Clock
    #: the serving mode and the stage policy chains run with
    preset: ModePreset
    stage_policy: StagePolicy
    #: each function's SLO (ms), and each app's chain
    slos: dict[str, float]
    chains: dict[str, Chain]
    #: request ids, shared by predicts and chain stages
    ids: Iterator[int]
    metrics: AdapterMetrics = field(default_factory=AdapterMetrics)
    dispatchers: dict[str, Dispatcher] = field(default_factory=dict)
    #: how late the server's loop runs (the adapter's own overload; admission reads it)
    lag: LoopLag = field(default_factory=LoopLag)
    records: RecordWriter | None = None
    view: PlatformView | None = None
    epoch: float = 0.0
    autoscaling: Autoscaling | None = None
    #: ROMA's core controllers over the CPU functions (adapter.cores)
    cores: CoreControl | None = None
    #: ROMA's GPU executable in front of the CPU replicas (adapter.gpu)
    gpu: GpuRoute | None = None
    #: health and status on a port of their own, answered by a thread (adapter.probe_port)
    probes: ProbePort | None = None
    #: this adapter's name in the functions' frontend gossip (Swayam's n_F)
    frontend_id: str = field(default_factory=lambda: uuid.uuid4().hex[:16])
