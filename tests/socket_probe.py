"""Read socket options off the live TCP connections of this process or of a child process.

A child's sockets are copied into this process with ``pidfd_getfd(2)`` (Linux ≥ 5.6; a parent
may take its children's descriptors), so the test reads the very socket the child serves on, not
a stand-in.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import socket
from dataclasses import dataclass

import pytest

_SYS_PIDFD_GETFD = 438  # the same number on x86_64 and aarch64


@dataclass(frozen=True)
class TcpConnection:
    """One connected TCP socket: its addresses and whether TCP_NODELAY is set on it."""

    pid: int
    local: tuple[str, int]
    peer: tuple[str, int]
    nodelay: bool


def _inspect(sock: socket.socket, pid: int) -> TcpConnection | None:
    if sock.family not in (socket.AF_INET, socket.AF_INET6) or sock.type != socket.SOCK_STREAM:
        return None
    try:
        peer = sock.getpeername()
    except OSError:
        return None  # a listener, or not connected
    nodelay = bool(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
    return TcpConnection(pid, sock.getsockname()[:2], peer[:2], nodelay)


def _socket_fds(pid: int) -> list[int]:
    fds = []
    for name in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{pid}/fd/{name}").startswith("socket:"):
                fds.append(int(name))
    return fds


def _take(pidfd: int, fd: int) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    copied = int(libc.syscall(_SYS_PIDFD_GETFD, pidfd, fd, 0))
    if copied < 0:
        code = ctypes.get_errno()
        if code == errno.EBADF:
            return -1  # closed since the listing
        pytest.skip(f"pidfd_getfd is not allowed here ({os.strerror(code)})")
    return copied


def tcp_connections(pid: int | None = None) -> list[TcpConnection]:
    """The connected TCP sockets of ``pid`` (default: this process)."""
    own = pid is None or pid == os.getpid()
    target = os.getpid() if pid is None else pid
    found: list[TcpConnection] = []
    pidfd = -1 if own else os.pidfd_open(target)
    try:
        for fd in _socket_fds(target):
            try:
                copied = os.dup(fd) if own else _take(pidfd, fd)
            except OSError:
                continue
            if copied < 0:
                continue
            sock = socket.socket(fileno=copied)
            try:
                if (conn := _inspect(sock, target)) is not None:
                    found.append(conn)
            finally:
                sock.close()
    finally:
        if pidfd >= 0:
            os.close(pidfd)
    return found
