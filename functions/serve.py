"""Run one function as a process: ``python -m functions.serve --model digits --port 9001``.

This is what a replica is, on the local platform and in the function's container image.
``--model`` given more than once serves those models from one process on one worker thread
(ROMA's GPU executable: ``--model embed --model imagenet --device cuda:0``).
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import sys
from typing import Any

import uvicorn

from functions.device import DeviceUnavailable
from functions.head_timeout import HeadTimeoutProtocol
from functions.limits import TOKEN_ENV, BearerRequired, RequestLimits
from functions.registry import UnknownModel, create_model
from functions.runtime import MAX_BODY_BYTES, create_app


def _threads_env(threads: int) -> None:
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(var, str(threads))


def listening_socket(fd: int) -> socket.socket:
    """The listening socket the platform handed over as ``fd``, with TCP_NODELAY set.

    uvicorn's own ``fd=`` path wraps the descriptor as an AF_UNIX socket, so neither uvicorn nor
    uvloop sets TCP_NODELAY on the connections it accepts, and every keep-alive response then
    waits ~40 ms for the peer's delayed ACK. Wrapping it with its real family (the kernel's
    answer, not a guess) and setting the option on the listener (accepted sockets inherit it on
    Linux) removes that stall."""
    sock = socket.socket(fileno=fd)
    if sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m functions.serve", description=__doc__)
    parser.add_argument(
        "--model",
        required=True,
        action="append",
        help="model kind, e.g. digits; repeat it to serve several models from this process",
    )
    parser.add_argument(
        "--name", help="name in the URL path (default: the model kind; a single model only)"
    )
    parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8080")))
    parser.add_argument(
        "--fd", type=int, help="serve on this already-bound listening socket (set by the platform)"
    )
    parser.add_argument("--threads", type=int, default=1, help="compute threads for the model")
    parser.add_argument(
        "--device",
        default=os.environ.get("DEVICE", "cpu"),
        help="cpu, cuda or cuda:N; a device that cannot be used stops the start (no CPU fallback)",
    )
    parser.add_argument(
        "--max-in-flight",
        type=int,
        help="predicts held at once; one more is answered 429 at once (a backend of Swayam's "
        "random dispatch, which retries another); default: no limit, they wait their turn",
    )
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args(argv)
    if args.threads < 1:
        parser.error(f"--threads must be at least 1, got {args.threads}")
    if args.max_in_flight is not None and args.max_in_flight < 1:
        parser.error(f"--max-in-flight must be at least 1, got {args.max_in_flight}")
    if args.name is not None and len(args.model) > 1:
        parser.error("--name applies to a single --model; several are served under their kinds")
    if len(set(args.model)) < len(args.model):
        parser.error(f"--model given twice for the same kind: {', '.join(args.model)}")
    _threads_env(args.threads)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(message)s")
    models = []
    for kind in args.model:
        try:
            model = create_model(kind, threads=args.threads, device=args.device)
            model.check_device()
        except UnknownModel as exc:
            parser.error(str(exc))
        except (DeviceUnavailable, ValueError) as exc:
            print(f"{parser.prog}: {kind}: {exc}", file=sys.stderr)
            return 2
        models.append(model)
    app: Any = create_app(models, name=args.name, max_in_flight=args.max_in_flight)
    token = os.environ.pop(TOKEN_ENV, None)  # not left for the model code to read
    if token:
        app = BearerRequired(app, token)
    app = RequestLimits(app, max_body_bytes=MAX_BODY_BYTES)
    common: dict[str, Any] = {
        "log_level": args.log_level,
        "access_log": False,
        "http": HeadTimeoutProtocol,
    }
    if args.fd is not None:
        config = uvicorn.Config(app, **common)
        uvicorn.Server(config).run(sockets=[listening_socket(args.fd)])
    else:
        uvicorn.run(app, host=args.host, port=args.port, **common)
    return 0


if __name__ == "__main__":
    sys.exit(main())
