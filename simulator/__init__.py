"""A discrete-event simulator that drives the live adapter's own policy objects at scale.

:mod:`simulator.engine` runs app requests (chains of functions) through shared function queues
in virtual time; every scheduling decision comes from ``adapter`` (``scheduling.next_batch``,
``slack.StagePolicy``, ``queue.RequestQueue``, ``latency.LatencyModel``, ``aimd.AIMD``,
``chain``) and every scaling decision from a :class:`simulator.scalers.Scaler` (fixed nodes or
``knative.kpa.KPA``). :mod:`simulator.runner` sweeps the policies and searches each one's
highest rate within the SLA; :mod:`slackwise_cli.simulate` is ``slackwise simulate``.
See docs/simulator.md.
"""
