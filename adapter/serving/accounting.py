"""Where one function's requests are counted as they finish: its metrics, the request records,
the advisor's evidence and the observers (ROMA's controllers), in one place for every answer,
served or failed."""

from __future__ import annotations

from typing import Any

from adapter.serving.advisor_loop import Autoscaling
from adapter.serving.errors import AdapterError
from adapter.serving.metrics import AdapterMetrics
from adapter.serving.observers import Observer
from adapter.serving.pending import Answer, Pending
from adapter.serving.records import RecordWriter, request_record
from slackwise_core.clock import Clock

__all__ = ["Accounting"]


class Accounting:
    """One function's metric series and the reports every finished request makes."""

    def __init__(
        self,
        name: str,
        *,
        metrics: AdapterMetrics,
        records: RecordWriter,
        epoch: float,
        clock: Clock,
        autoscaling: Autoscaling | None,
        observers: list[Observer],
    ) -> None:
        self.name = name
        self.records = records
        self.epoch = epoch
        self.clock = clock
        self.autoscaling = autoscaling
        #: told of every answer that served (the dispatcher's list: observers join later)
        self.observers = observers
        m, fn = metrics, {"function": name}
        self.queue_length = m.queue_length.labels(**fn)
        self.limit = m.aimd_limit.labels(**fn)
        self.inflight = m.inflight_batches.labels(**fn)
        self.batch_size = m.batch_size.labels(**fn)
        self.latency = m.latency.labels(**fn)
        self.misses = m.deadline_misses.labels(**fn)
        self.cold_batches = m.cold_batches.labels(**fn)
        self.timeouts = m.timeout_dispatches.labels(**fn)
        self.queue_delay = m.queue_delay.labels(**fn)
        self._requests = m.requests

    def served(
        self,
        batch: list[Pending],
        predictions: list[Any],
        done: float,
        *,
        instances: int,
        compute_ms: float,
        round_trip_ms: float,
        cold: bool,
    ) -> None:
        """Answer every member of ``batch`` its share of ``predictions`` (in the batch's order)
        at ``done``, and count it (in a batch of ``instances``): in time, or missed."""
        offset = 0
        for item in batch:
            share = predictions[offset : offset + item.size]
            offset += item.size
            answer = Answer(
                predictions=share,
                queue_ms=(item.dispatched - item.arrival) * 1000.0,
                compute_ms=compute_ms,
                round_trip_ms=round_trip_ms,
                batch_size=instances,
                cold=cold,
            )
            missed = done > item.deadline
            if not item.future.done():
                item.future.set_result(answer)
            self.finished(item, done, 200, instances, cold, missed)

    def fail_all(self, batch: list[Pending], error: AdapterError) -> None:
        for item in batch:
            self.fail(item, error)

    def fail(self, item: Pending, error: AdapterError) -> None:
        """Answer ``item`` with ``error`` (unless it was answered already) and count it."""
        if not item.future.done():
            item.future.set_exception(error)
        self.finished(item, self.clock.now(), error.status, 0, False, True)

    def finished(
        self, item: Pending, done: float, status: int, batch_size: int, cold: bool, missed: bool
    ) -> None:
        """``item`` was answered ``status`` at ``done``, in a batch of ``batch_size``."""
        self._requests.labels(function=self.name, status=str(status)).inc()
        self.latency.observe(done - item.arrival)
        if missed:
            self.misses.inc()
            if self.autoscaling is not None:
                self.autoscaling.missed(
                    self.name, done, cold=item.arrived_cold, served=batch_size > 0
                )
        elif self.autoscaling is not None:
            self.autoscaling.outcome(self.name, done)
        for observer in self.observers if status == 200 else ():
            observer.answered(self.name, done - item.arrival)
        self.records.add(request_record(item, self.epoch, done, status, batch_size, cold, missed))
