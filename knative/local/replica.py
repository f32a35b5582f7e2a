"""One replica of a function: a real ``python -m functions.serve`` process on a loopback socket.

The platform binds the listening socket itself and hands its descriptor to the child, so a port is
never raced for. A cold start is everything from the decision to start the replica until its
ready endpoint answers 200: an optional configured delay standing for image pull and scheduling,
the process start, the imports and the model load. Children get ``PR_SET_PDEATHSIG`` so they die
with the platform even if it is killed hard, and they run in their own process group so a stop
reaches everything they spawned.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import enum
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable
from pathlib import Path

import httpx

from functions.limits import TOKEN_ENV
from knative.errors import PlatformError
from knative.local.priority import lower
from knative.local.start_deadline import StartDeadline, thread_waits_s
from slackwise_config import FunctionConfig
from slackwise_core.http1 import Http1Pool, Origin

logger = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class ReplicaState(enum.Enum):
    STARTING = "starting"
    READY = "ready"
    DRAINING = "draining"
    STOPPED = "stopped"
    FAILED = "failed"


class ReplicaStartError(PlatformError, RuntimeError):
    """The replica's process exited or did not become ready in time."""


class Replica:
    """A function process and its bookkeeping; times are the platform clock's seconds."""

    def __init__(
        self,
        function: FunctionConfig,
        index: int,
        *,
        host: str,
        log_dir: Path,
        created_at: float,
        token: str | None = None,
    ) -> None:
        self.function = function
        self.token = token
        self._name = f"{function.name}-{index:05d}"
        self.host = host
        self.log_path = log_dir / f"{self._name}.log"
        self.state = ReplicaState.STARTING
        self.in_flight = 0
        self.created_at = created_at
        self.ready_at: float | None = None
        self.stopped_at: float | None = None
        self.port: int | None = None
        self.process: asyncio.subprocess.Process | None = None
        self.stopping = False
        #: the niceness it was spawned at (None: the platform's own, not set)
        self.started_nice: int | None = None
        #: keep-alive connections for predict requests to this replica
        self.pool: Http1Pool | None = None

    @property
    def name(self) -> str:
        return self._name

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    def __repr__(self) -> str:
        return f"Replica({self._name!r}, state={self.state.value}, port={self.port})"

    async def start(
        self,
        client: httpx.AsyncClient,
        *,
        ready_timeout_s: float,
        nice: Callable[[], int] | None = None,
        slot: asyncio.Semaphore | None = None,
    ) -> None:
        """Spawn the process and wait until it answers ready, holding ``slot`` (the platform's
        loading turns) from the spawn until then; raises ReplicaStartError. ``nice`` says the
        niceness to start at when the spawn comes (after its turn: the replicas ready by then
        decide whether it yields), kept in :attr:`started_nice`; the platform's own when
        ``None``."""
        if self.function.cold_start_extra_s > 0:
            await asyncio.sleep(self.function.cold_start_extra_s)
        async with slot if slot is not None else contextlib.nullcontext():
            if self.stopping:
                raise ReplicaStartError(f"{self._name}: stopped before it started")
            self.started_nice = None if nice is None else nice()
            await self._spawn(self.started_nice)
            await self._wait_ready(client, ready_timeout_s)

    async def _spawn(self, nice: int | None) -> None:
        fn = self.function
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # accepted connections inherit it: no ~40 ms delayed-ACK stall per keep-alive answer
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((self.host, 0))
        sock.listen(1024)
        self.port = sock.getsockname()[1]
        env = dict(os.environ)
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            env[var] = str(fn.threads)
        env.setdefault("HF_HUB_OFFLINE", "1")
        env.setdefault("TRANSFORMERS_OFFLINE", "1")
        if self.token:
            env[TOKEN_ENV] = self.token  # work only from the platform's router
        args = [
            sys.executable,
            "-m",
            "functions.serve",
            "--model",
            fn.model,
            "--name",
            fn.name,
            "--fd",
            str(sock.fileno()),
            "--threads",
            str(fn.threads),
            "--device",
            fn.device,
        ]
        with open(self.log_path, "ab") as log:
            try:
                self.process = await asyncio.create_subprocess_exec(
                    *args,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    env=env,
                    pass_fds=(sock.fileno(),),
                    start_new_session=True,
                    preexec_fn=_die_with_parent,
                )
            finally:
                sock.close()
        if nice is not None:
            # once it has exec'd: the platform's loop waits for the exec, and a child that
            # yielded before it kept that loop waiting behind the serving replicas
            lower(self.process.pid, nice)

    async def _wait_ready(self, client: httpx.AsyncClient, timeout_s: float) -> None:
        assert self.process is not None
        url = f"{self.url}/v1/models/{self.function.name}"
        loop = asyncio.get_running_loop()
        pid = self.process.pid
        # the time it waits for a CPU does not count against it (a start that yields)
        deadline = StartDeadline(loop.time(), timeout_s, lambda: thread_waits_s(pid))
        while True:
            if self.stopping:
                raise ReplicaStartError(f"{self._name}: stopped while starting")
            if self.process.returncode is not None:
                raise ReplicaStartError(
                    f"{self._name}: process exited with code {self.process.returncode} before "
                    f"it was ready; last log lines:\n{self.log_tail()}"
                )
            try:
                response = await client.get(url, timeout=2.0)
                if response.status_code == 200:
                    return
                if response.status_code == 503 and "failed to load" in response.text:
                    raise ReplicaStartError(f"{self._name}: {response.json().get('error')}")
            except httpx.TransportError:
                pass
            if deadline.passed(loop.time()):
                raise ReplicaStartError(f"{self._name}: {deadline.reason()}")
            await asyncio.sleep(0.05)

    def log_tail(self, lines: int = 8) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.strip().splitlines()[-lines:])

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the replica's process group."""
        if self.process is None or self.process.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, sig)

    def open_pool(self) -> Http1Pool:
        """The replica's own keep-alive connections, as many idle as its container concurrency."""
        if self.pool is None:
            assert self.port is not None
            size = self.function.container_concurrency or 100
            self.pool = Http1Pool(Origin(self.host, self.port), max_idle=size)
        return self.pool

    async def terminate(self, grace_s: float = 5.0) -> None:
        """SIGTERM, then SIGKILL after ``grace_s``; returns when the process is gone."""
        self.stopping = True
        if self.pool is not None:
            pool, self.pool = self.pool, None
            pool.close()
        if self.process is None:
            return
        if self.process.returncode is None:
            self.signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.process.wait(), grace_s)
            except TimeoutError:
                self.signal(signal.SIGKILL)
                await self.process.wait()
        # the group may hold children of the function's own making
        self.signal(signal.SIGKILL)
