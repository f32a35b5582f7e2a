"""One simulated app request as it walks its chain: what the shared function queues order and
batch (an :class:`slackwise_policies.queue.Queued`, as the live adapter's requests are)."""

from __future__ import annotations

__all__ = ["SimRequest"]


class SimRequest:
    """``started`` is when the app request arrived and ``due`` its end-to-end deadline;
    ``arrival``, ``deadline`` and ``seq`` are its current stage's (when it entered this queue,
    the stage deadline the policy gave it, and its place in the entry order), as the live
    adapter gives each stage of a chain a request of its own."""

    __slots__ = (
        "app",
        "arrival",
        "cold",
        "deadline",
        "dispatched",
        "due",
        "hopeless",
        "index",
        "input_class",
        "seq",
        "stage",
        "started",
    )
    #: every simulated request is one instance and is never cancelled by its client
    size = 1
    cancelled = False
    #: priced by its input_class instead (simulator.inputs)
    input_bytes = 0.0

    def __init__(self, app: int, index: int, started: float, due: float) -> None:
        self.app = app
        self.index = index
        self.seq = index
        self.started = started
        self.arrival = started
        self.due = due
        self.deadline = due
        self.stage = 0
        self.dispatched = started
        self.hopeless = False
        #: it waited for a replica to start at some stage (its misses are not evidence)
        self.cold = False
        #: its input-size class ("": the inputs the profiles were measured with)
        self.input_class = ""
