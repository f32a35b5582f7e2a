"""The systems ``benchmarks/peers.py`` compares, each in the configurations its docs recommend.

A :class:`Setup` is one system in one configuration; :func:`candidates` lists the ones swept for
a model (the best of each system is kept); :func:`start` runs one until the block ends. Every
peer is installed into its own throwaway venv under ``.bench/`` (never a dependency of this
project) and serves the very model class our functions serve, one model thread per process, on
the same two cores.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import venv
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil

from functions.samples import sample_instances
from functions.server_process import free_port

ROOT = Path(__file__).resolve().parent.parent
#: the model kinds and their SLO (P95, ms): an MLP, a transformer encoder, an image CNN
MODELS = {"digits": 50.0, "embed": 150.0, "imagenet": 200.0}
SYSTEMS = ("function", "kserve", "ray", "bentoml", "slackwise")
#: each peer's package, pinned, into its own venv
PACKAGES = {"kserve": "kserve==0.21.0", "ray": "ray[serve]==2.60.0", "bentoml": "bentoml==1.4.40"}
#: the batching peers' batch cap per model: the largest batch one model thread runs within half the
#: SLO (docs/profiles.md: embed b8 64 ms, b16 108 ms; imagenet b8 99 ms; digits any), as a user
#: sizing ``max_batch_size`` for an SLO would pick; half of it is swept too
MAX_BATCH = {"digits": 64, "embed": 8, "imagenet": 8}


@dataclass(frozen=True)
class Setup:
    """One system in one configuration."""

    system: str
    settings: tuple[tuple[str, Any], ...] = ()

    @property
    def label(self) -> str:
        parts = [f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in self.settings]
        return " ".join([self.system, *parts])

    def get(self, key: str, default: Any = None) -> Any:
        return dict(self.settings).get(key, default)


def candidates(model: str, systems: list[str]) -> list[Setup]:
    """The configurations swept for ``model``: processes 1 and 2 for every system; for the batching
    peers, half the model's batch cap with a short wait (SLO/20, or BentoML's latency target at
    SLO/2) and the whole cap with a long one (SLO/5, or SLO)."""
    slo = MODELS[model]
    cap = MAX_BATCH[model]
    out: list[Setup] = []
    for system in systems:
        for n in (1, 2):
            if system == "function":
                out.append(Setup("function", (("processes", n),)))
            elif system == "kserve":
                out.append(Setup("kserve", (("workers", n),)))
            elif system == "slackwise":
                out.append(Setup("slackwise", (("replicas", n),)))
            elif system == "ray":
                for batch, wait in ((cap // 2, slo / 20), (cap, slo / 5)):
                    out.append(
                        Setup(
                            "ray",
                            (("replicas", n), ("max_batch", batch), ("wait_ms", round(wait, 1))),
                        )
                    )
            elif system == "bentoml":
                for batch, latency in ((cap // 2, slo / 2), (cap, slo)):
                    out.append(
                        Setup(
                            "bentoml",
                            (
                                ("workers", n),
                                ("max_batch", batch),
                                ("max_latency_ms", round(latency)),
                            ),
                        )
                    )
    return out


@dataclass
class Running:
    """A system under test: its predict URL and its root process."""

    setup: Setup
    url: str
    process: subprocess.Popen[bytes]
    log: Path
    extra: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def cpu_s(self, root_only: bool = False) -> float:
        """CPU seconds of the processes (and every child they have now)."""
        total = 0.0
        for top in [self.process, *self.extra]:
            try:
                root = psutil.Process(top.pid)
                procs = [root] if root_only else [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                continue
            for proc in procs:
                with contextlib.suppress(psutil.NoSuchProcess):
                    t = proc.cpu_times()
                    total += t.user + t.system
        return total


def peer_python(system: str, bench_dir: Path) -> Path:
    """The system's throwaway venv's Python, with its package installed and our code importable
    from it (this project's root and venv after the peer's own packages on the path)."""
    venv_dir = bench_dir / f"{system}-venv"
    python = venv_dir / "bin" / "python"
    package = PACKAGES[system]
    stamp = venv_dir / f".installed-{package}"
    if not stamp.exists():
        print(f"installing {package} into {venv_dir} ...", flush=True)
        venv.create(venv_dir, with_pip=True, clear=True)
        pip = subprocess.run(
            [str(python), "-m", "pip", "install", "-q", package], capture_output=True, text=True
        )
        if pip.returncode != 0:
            raise RuntimeError(f"pip install {package} failed: {pip.stderr[-2000:]}")
        site = subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        ours = [p for p in sys.path if p.endswith("site-packages")]
        Path(site, "zz_slackwise_project.pth").write_text(
            "\n".join([str(ROOT), *ours]) + "\n", encoding="utf-8"
        )
        stamp.touch()
    return python


def _slackwise_config(
    model: str, replicas: int, out_dir: Path, max_wait_ms: float | None = None
) -> Path:
    """The shipped peer config, or the same with ``replicas`` warm replicas (and, given
    ``max_wait_ms``, that cap on waiting for company: 0 sends whatever is queued at once)."""
    shipped = ROOT / "experiments" / "peers" / f"{model}.yaml"
    if replicas == 1 and max_wait_ms is None:
        return shipped
    text = shipped.read_text(encoding="utf-8")
    for key in ("initial-scale", "min-scale", "max-scale"):
        text = text.replace(f'{key}: "1"', f'{key}: "{replicas}"')
    if max_wait_ms is not None:
        text = text.rstrip("\n") + f"\n  max_wait_ms: {max_wait_ms:g}\n"
    wait = "" if max_wait_ms is None else f"-w{max_wait_ms:g}"
    path = out_dir / f"{model}-r{replicas}{wait}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _command(setup: Setup, model: str, port: int, out_dir: Path, bench_dir: Path) -> list[str]:
    s = setup.get
    if setup.system == "slackwise":
        config = _slackwise_config(model, s("replicas"), out_dir, s("max_wait_ms"))
        return [str(Path(sys.executable).parent / "slackwise"), "serve", "-c", str(config)]
    if setup.system == "kserve":
        return [
            str(peer_python("kserve", bench_dir)),
            str(ROOT / "benchmarks" / "kserve_server.py"),
            "--model",
            model,
            "--port",
            str(port),
            "--workers",
            str(s("workers")),
        ]
    if setup.system == "ray":
        return [
            str(peer_python("ray", bench_dir)),
            str(ROOT / "benchmarks" / "ray_server.py"),
            "--model",
            model,
            "--port",
            str(port),
            "--replicas",
            str(s("replicas")),
            "--max-batch",
            str(s("max_batch")),
            "--wait-ms",
            str(s("wait_ms")),
        ]
    if setup.system == "bentoml":
        bentoml = peer_python("bentoml", bench_dir).parent / "bentoml"
        return [
            str(bentoml),
            "serve",
            "benchmarks.bentoml_service:Peer",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ]
    raise ValueError(f"unknown system {setup.system!r}; known: {', '.join(SYSTEMS)}")


def _url(setup: Setup, model: str, port: int) -> str:
    if setup.system in ("ray", "bentoml"):
        return f"http://127.0.0.1:{port}/predict"
    return f"http://127.0.0.1:{port}/v1/models/{model}:predict"


def _wait_ready(running: Running, model: str, timeout_s: float) -> None:
    """Until a real predict is answered 200 (every system loads its model first)."""
    body = {"instances": sample_instances(model, 1)}
    deadline = time.monotonic() + timeout_s
    with httpx.Client(trust_env=False) as client:
        while time.monotonic() < deadline:
            for proc in [running.process, *running.extra]:
                if proc.poll() is not None:
                    raise RuntimeError(
                        f"{running.setup.label} exited with {proc.returncode}; see {running.log}"
                    )
            with contextlib.suppress(httpx.HTTPError):
                if client.post(running.url, json=body, timeout=5).status_code == 200:
                    return
            time.sleep(0.3)
    raise RuntimeError(f"{running.setup.label} not ready in {timeout_s:.0f} s; see {running.log}")


@contextlib.contextmanager
def serve_command(
    cmd: list[str], url: str, label: str, log: Path, model: str, *, timeout_s: float = 300
) -> Iterator[Running]:
    """``cmd`` (a server of ours, in its own session, offline, unbuffered) until the block
    ends, ready once a predict of ``model``'s sample input at ``url`` is answered 200."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONUNBUFFERED="1")
    sink = open(log, "wb")  # noqa: SIM115 - closed when the block ends
    process = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
    )
    run = Running(Setup(label), url, process, log)
    try:
        _wait_ready(run, model, timeout_s=timeout_s)
        yield run
    finally:
        _stop(process)
        sink.close()


def _stop(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, 15)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)
        proc.wait()


@contextlib.contextmanager
def start(setup: Setup, model: str, out_dir: Path, bench_dir: Path) -> Iterator[Running]:
    """Run ``setup`` serving ``model`` until the block ends (its whole process group stopped)."""
    name = setup.label.replace(" ", "_").replace("=", "")
    log = out_dir / f"{model}-{name}.log"
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONUNBUFFERED="1")
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[var] = "1"
    env.update(
        PEER_MODEL=model,
        PEER_THREADS="1",
        PEER_WORKERS=str(setup.get("workers", 1)),
        PEER_MAX_BATCH=str(setup.get("max_batch", 1)),
        PEER_MAX_LATENCY_MS=str(setup.get("max_latency_ms", 0)),
    )
    extra: list[subprocess.Popen[bytes]] = []
    sink = open(log, "wb")  # noqa: SIM115 - closed when the block ends
    try:
        if setup.system == "function":
            # the function alone: 1 or 2 processes accepting on one shared listening socket
            listener = socket.create_server(("127.0.0.1", 0), backlog=4096)
            port = listener.getsockname()[1]
            procs = [
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "functions.serve",
                        "--model",
                        model,
                        "--fd",
                        str(listener.fileno()),
                        "--threads",
                        "1",
                    ],
                    cwd=ROOT,
                    env=env,
                    stdout=sink,
                    stderr=subprocess.STDOUT,
                    pass_fds=(listener.fileno(),),
                    start_new_session=True,
                )
                for _ in range(setup.get("processes", 1))
            ]
            listener.close()
            process, extra = procs[0], procs[1:]
        else:
            port = 8700 if setup.system == "slackwise" else free_port()
            cmd = _command(setup, model, port, out_dir, bench_dir)
            process = subprocess.Popen(
                cmd,
                cwd=ROOT,
                env=env,
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        running = Running(setup, _url(setup, model, port), process, log, extra)
        try:
            _wait_ready(running, model, timeout_s=300)
            yield running
        finally:
            for proc in [process, *extra]:
                _stop(proc)
    finally:
        sink.close()
