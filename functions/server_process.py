"""One function server as a real child process (``python -m functions.serve``) on loopback.

Used by the profiler to measure cold starts and HTTP batch latency, and by tests that need a
real process. :meth:`ServerProcess.wait_ready` polls the readiness endpoint and reports the time
from spawn to the first 200.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import subprocess
import sys
import tempfile
import time
from types import TracebackType
from typing import IO

import httpx

from functions.errors import FunctionsError

logger = logging.getLogger(__name__)

_POLL_S = 0.02


class ServerStartError(FunctionsError, RuntimeError):
    """The server process exited or did not become ready in time; the message has its output."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class ServerProcess:
    """``python -m functions.serve --model KIND`` on a free loopback port; ``also`` adds more
    models to the same process (each ``--model``), ``device`` is its ``--device``,
    ``max_in_flight`` its ``--max-in-flight``."""

    def __init__(
        self,
        kind: str,
        *,
        threads: int = 1,
        port: int | None = None,
        also: tuple[str, ...] = (),
        device: str = "cpu",
        max_in_flight: int | None = None,
    ) -> None:
        self.kind = kind
        self.max_in_flight = max_in_flight
        self.kinds = (kind, *also)
        self.device = device
        self.threads = threads
        self.port = port or free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self.spawned_at = 0.0

    @property
    def ready_url(self) -> str:
        """200 once the model has loaded (with its ``load_ms``); with several models, once all
        of them have."""
        if len(self.kinds) > 1:
            return f"{self.base_url}/v2/health/ready"
        return f"{self.base_url}/v1/models/{self.kind}"

    @property
    def predict_url(self) -> str:
        return f"{self.base_url}/v1/models/{self.kind}:predict"

    @property
    def pid(self) -> int:
        """The server's process id (it must have been started)."""
        if self._process is None:
            raise RuntimeError("the server process has not been started")
        return self._process.pid

    def start(self) -> None:
        """Spawn the process; returns at once."""
        env = dict(os.environ)
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            env[var] = str(self.threads)
        env["PYTHONUNBUFFERED"] = "1"
        command = [sys.executable, "-m", "functions.serve", "--port", str(self.port)]
        for kind in self.kinds:
            command += ["--model", kind]
        command += ["--threads", str(self.threads), "--device", self.device]
        if self.max_in_flight is not None:
            command += ["--max-in-flight", str(self.max_in_flight)]
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 (closed in stop())
        self.spawned_at = time.perf_counter()
        self._process = subprocess.Popen(
            command, env=env, stdout=self._log, stderr=subprocess.STDOUT
        )
        logger.info("started %s (pid %d)", " ".join(command), self._process.pid)

    def output(self) -> str:
        """What the process printed so far (its last 4,000 characters)."""
        if self._log is None:
            return ""
        self._log.seek(0)
        return self._log.read().decode("utf-8", "replace")[-4000:]

    def wait_ready(self, client: httpx.Client, *, timeout_s: float) -> float:
        """Poll readiness until 200; returns seconds from spawn to ready."""
        if self._process is None:
            raise ServerStartError("the server was not started")
        deadline = time.perf_counter() + timeout_s
        while time.perf_counter() < deadline:
            if self._process.poll() is not None:
                raise ServerStartError(
                    f"{'+'.join(self.kinds)} server exited with {self._process.returncode}:\n"
                    f"{self.output()}"
                )
            with contextlib.suppress(httpx.TransportError):
                if client.get(self.ready_url).status_code == 200:
                    return time.perf_counter() - self.spawned_at
            time.sleep(_POLL_S)
        raise ServerStartError(
            f"{'+'.join(self.kinds)} server not ready after {timeout_s:.0f} s:\n{self.output()}"
        )

    def stop(self) -> None:
        """Terminate the process (kill it if it lingers) and close its log."""
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> ServerProcess:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
