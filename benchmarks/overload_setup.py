"""The overload benchmark's setup: the workloads, the CPU layout and the adapter under test.

Every load comes from ``benchmarks/loadgen.py`` in its own process, pinned to the load
generator's CPU (``benchmarks/overload.py`` pins itself there too: it polls the status routes and
samples the adapter), while ``slackwise serve`` and the replica processes it starts (they
inherit its affinity) have the other CPUs, so the adapter's share of the machine does not
shrink as the offered load grows.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NoReturn

import httpx
import psutil

from slackwise_config import load_config

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
LOADGEN = str(ROOT / "benchmarks" / "loadgen.py")
CLIENT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Workload:
    """One adapter configuration and what the load generator sends it."""

    name: str
    config: str  # relative to the repository root
    predict_path: str
    sample_model: str  # the model kind whose sample inputs the bodies carry
    status_function: str  # polled at GET /v1/models/{it} on both ports
    bound: Literal["model", "adapter"]  # what limits its capacity (which targets apply)
    startup_s: float  # about how long the adapter takes to answer its first predict
    typical_rps: float  # about its capacity on the two-core VM: only for the time estimate

    def settings(self) -> tuple[float, int, int]:
        """(SLO ms, adapter port, probe port), read from the config."""
        return _settings(self.config)

    @property
    def slo_ms(self) -> float:
        return self.settings()[0]

    def base(self) -> str:
        return f"http://127.0.0.1:{self.settings()[1]}"

    def predict_url(self) -> str:
        return self.base() + self.predict_path

    def functions(self) -> list[str]:
        """The functions its config fronts."""
        return sorted(load_config(str(ROOT / self.config)).functions)

    def status_urls(self) -> tuple[str, str]:
        """The status route on the adapter's port and on its probe port."""
        _, port, probe = self.settings()
        path = f"/v1/models/{self.status_function}"
        return f"http://127.0.0.1:{port}{path}", f"http://127.0.0.1:{probe}{path}"


@functools.cache
def _settings(path: str) -> tuple[float, int, int]:
    config = load_config(str(ROOT / path))
    if config.apps:
        slo = next(iter(config.apps.values())).slo_ms
    else:
        slo = next(iter(config.functions.values())).slo_ms or 0.0
    if config.adapter.probe_port is None:
        raise SystemExit(f"overload: {path} has no adapter.probe_port")
    return float(slo), config.adapter.port, config.adapter.probe_port


WORKLOADS = {
    w.name: w
    for w in (
        Workload(
            name="digits",
            config="experiments/overload/digits.yaml",
            predict_path="/v1/models/digits:predict",
            sample_model="digits",
            status_function="digits",
            bound="adapter",
            startup_s=5.0,
            typical_rps=1500.0,
        ),
        Workload(
            name="embed",
            config="experiments/overload/embed.yaml",
            predict_path="/v1/models/embed:predict",
            sample_model="embed",
            status_function="embed",
            bound="model",
            startup_s=20.0,
            typical_rps=130.0,
        ),
        Workload(
            name="img-query",
            config="experiments/overload/img-query.yaml",
            predict_path="/v1/apps/img-query:predict",
            sample_model="imagenet",  # the chain's first stage (classify)
            status_function="classify",
            bound="model",
            startup_s=25.0,
            typical_rps=15.0,
        ),
    )
}


@dataclass(frozen=True)
class Layout:
    """Which CPUs the load generator (and this process) and the adapter run on."""

    generator: tuple[int, ...]
    adapter: tuple[int, ...]

    @staticmethod
    def split() -> Layout:
        """The last CPU this process may use for the generator, the others for the adapter."""
        cpus = tuple(sorted(os.sched_getaffinity(0)))
        if len(cpus) < 2:
            return Layout(cpus, cpus)  # nothing to split: both share the one CPU
        return Layout(cpus[-1:], cpus[:-1])

    def pin_self(self) -> None:
        os.sched_setaffinity(0, self.generator)

    def as_json(self) -> dict[str, Any]:
        return {
            "load_generator": list(self.generator),
            "benchmark_process": list(self.generator),
            "adapter_and_replicas": list(self.adapter),
            "shared": self.generator == self.adapter,
            "pinned_with": "taskset -c (replicas inherit the adapter's affinity)",
        }


def taskset(cpus: tuple[int, ...]) -> list[str]:
    tool = shutil.which("taskset")
    if tool is None:
        raise SystemExit("overload: taskset (util-linux) is needed to pin the processes")
    return [tool, "-c", ",".join(str(c) for c in cpus)]


def _listeners(port: int) -> set[int]:
    """The processes listening on TCP ``port`` on this machine (those this user may see)."""
    found: set[int] = set()
    with contextlib.suppress(psutil.Error):
        for conn in psutil.net_connections(kind="tcp"):
            listening = conn.status == psutil.CONN_LISTEN and conn.pid is not None
            if listening and conn.laddr and conn.laddr.port == port:
                found.add(conn.pid)
    return found


def _listener(port: int) -> str | None:
    """Who holds ``port``, in words; None when it is free."""
    with socket.socket() as probe:
        if probe.connect_ex(("127.0.0.1", port)) != 0:
            return None
    for pid in _listeners(port):
        with contextlib.suppress(psutil.Error):
            return f"pid {pid} ({' '.join(psutil.Process(pid).cmdline())})"
    return "another process"


def config_with_records(tree: Path, workload: Workload, records: Path) -> Path:
    """A copy of the workload's config (``tree``'s) that writes the adapter's request records
    to ``records`` (``adapter.records``, which every revision reads), beside them: what
    ``benchmarks/late_admitted.py`` reads. Each record costs the adapter a little CPU."""
    import yaml

    doc = yaml.safe_load((tree / workload.config).read_text(encoding="utf-8"))
    doc.setdefault("adapter", {})["records"] = str(records.resolve())
    config = records.with_suffix(".yaml")
    config.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return config


class Adapter:
    """``slackwise serve -c CONFIG`` pinned to the adapter's CPUs, up until :meth:`stop`
    (with ``records``, its request records written there)."""

    def __init__(self, workload: Workload, layout: Layout, records: Path | None = None) -> None:
        self.workload = workload
        _, port, probe = workload.settings()
        for taken in (port, probe):
            holder = _listener(taken)
            if holder is not None:
                raise SystemExit(f"overload: port {taken} is taken by {holder}")
        fd, log = tempfile.mkstemp(prefix=f"overload-{workload.name}-", suffix=".log")
        self.log = Path(log)
        slackwise = str(Path(PY).parent / "slackwise")
        config = workload.config
        if records is not None:
            records.unlink(missing_ok=True)
            config = str(config_with_records(ROOT, workload, records))
        command = [*taskset(layout.adapter), slackwise, "serve", "-c", config]
        self.proc = subprocess.Popen(command, cwd=ROOT, stdout=fd, stderr=subprocess.STDOUT)
        os.close(fd)
        self.process = psutil.Process(self.proc.pid)
        began = time.monotonic()
        try:
            self._wait_ready(began + max(120.0, 5 * workload.startup_s))
            for listened in (port, probe):
                if self.proc.pid not in _listeners(listened):
                    self.fail(f"another process answers on port {listened}")
        except BaseException:
            self.stop()
            raise
        self.startup_s = round(time.monotonic() - began, 1)

    def fail(self, why: str) -> NoReturn:
        """Stops the run with ``why`` and the end of the adapter's log."""
        tail = self.log.read_text(encoding="utf-8", errors="replace")[-3000:]
        raise SystemExit(f"overload: the {self.workload.name} adapter: {why}; its log:\n{tail}")

    def check(self) -> None:
        """Stops the run if the adapter is gone (exit code 0 is a SIGTERM it took gracefully:
        something else on the machine ended it)."""
        code = self.proc.poll()
        if code is not None:
            self.fail(f"exited with code {code} during the run")

    def _wait_ready(self, deadline: float) -> None:
        from functions.samples import sample_request

        body = sample_request(self.workload.sample_model, 1)
        base = self.workload.base()
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.fail(f"exited with code {self.proc.returncode} while starting")
            try:
                with httpx.Client(timeout=30, trust_env=False) as client:
                    if client.get(f"{base}/healthz").status_code == 200:
                        answer = client.post(self.workload.predict_url(), json=body)
                        if answer.status_code == 200:
                            return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        self.fail("did not answer a predict in time")

    def cpu_s(self) -> float:
        """The adapter process's own CPU seconds (not its replicas')."""
        times = self.process.cpu_times()
        return float(times.user + times.system)

    def replicas_cpu_s(self) -> dict[int, float]:
        """The CPU seconds of each process the adapter started (its replicas), by pid."""
        out: dict[int, float] = {}
        with contextlib.suppress(psutil.Error):
            for child in self.process.children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    times = child.cpu_times()
                    out[child.pid] = float(times.user + times.system)
        return out

    def rss_mb(self) -> float:
        return float(self.process.memory_info().rss) / 2**20

    def affinity(self) -> dict[str, list[int]]:
        """The CPUs the adapter and each process it started may run on."""
        out = {"adapter": sorted(self.process.cpu_affinity() or [])}
        for child in self.process.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                out[f"child {child.pid}"] = sorted(child.cpu_affinity() or [])
        return out

    def stop(self) -> None:
        """Ends the adapter, then whatever it started that outlived it."""
        children: list[psutil.Process] = []
        with contextlib.suppress(psutil.Error):
            children = self.process.children(recursive=True)
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        _, alive = psutil.wait_procs(children, timeout=10)
        for child in alive:
            with contextlib.suppress(psutil.Error):
                child.kill()
        self.log.unlink(missing_ok=True)
