"""A share of new connections placed by the kernel on sockets the event loop does not read,
and refused there for the price of the system calls.

Under a flood of clients that open a connection per request, every connection the loop takes in
costs it a transport, a protocol object, callbacks, a write and a close before the door's answer
is known: about 150 µs of the core the adapter shares with its replicas (embed at ten times its
capacity: 0.4 of the core for 1,500 connections a second, nearly all of them refused, and the
model served half its capacity). The kernel's accept queue does not stand there (the loop keeps
up), so the drop-head at the queue (:mod:`adapter.serving.accept_trim`) never acts; the door
refuses, expensively, nine in ten of the connections the loop took in for it.

:class:`Steer` adds ``SHED_LISTENERS`` sockets to the port's ``SO_REUSEPORT`` group, which the loop
never listens on, and attaches to the group a classic BPF program (``SO_ATTACH_REUSEPORT_CBPF``,
Linux 4.5) that places each new connection's handshake on one of them with probability
``share`` (the kernel's per-packet random number, ``SKF_AD_RANDOM``), on one of the loop's
otherwise. Those connections are answered as the drop-head answers the queue's oldest: a predict
gets a canned 503 with ``Retry-After``, a status or health read its document, and the connection
is closed (:meth:`adapter.serving.accept_trim.AcceptTrim.watch`). The share follows how much of
what comes the doors cannot admit, leaving them twice what they admit to choose from
(:class:`slackwise_policies.steer_share.SteerShare`), so below twice the capacity it is 0 and
nothing changes, and it is 0 while any function's door has room (a steered connection is refused
before anything says which function it asks for). A kernel or platform that refuses the program
leaves the adapter as it was (:meth:`Steer.open` returns None).
"""

from __future__ import annotations

import contextlib
import ctypes
import socket
import struct
import sys
from collections.abc import Sequence

__all__ = ["SHED_LISTENERS", "Steer", "program"]

#: sockets beside the loop's that steered connections are placed on (each with its own accept
#: queue, so a burst between two reads of them waits there rather than being dropped)
SHED_LISTENERS = 4
#: the accept queue of each of them
SHED_BACKLOG = 1024
#: Linux's socket option (asm-generic/socket.h), not in Python's socket module
SO_ATTACH_REUSEPORT_CBPF = 51
#: the share is set in these steps (per mille): a program is attached only when it moves a step
STEP_PER_MILLE = 25

_RANDOM = -0x1000 + 56  # SKF_AD_OFF + SKF_AD_RANDOM: a load of the kernel's random u32
_LD_ABS, _MOD, _ADD, _JGE, _RET_A = 0x20, 0x94, 0x04, 0x35, 0x16


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k & 0xFFFFFFFF)


def program(loop_count: int, shed_count: int, per_mille: int) -> bytes:
    """The classic BPF program (its instructions) that returns, for a new connection, the index
    in the group of the socket to place it on: one of the ``shed_count`` after the
    ``loop_count`` loop sockets with probability ``per_mille`` / 1000, else one of the loop's."""
    if loop_count < 1 or shed_count < 1:
        raise ValueError(f"need a loop socket and a shed socket, got {loop_count}, {shed_count}")
    if not 0 <= per_mille <= 1000:
        raise ValueError(f"per_mille must be within 0..1000, got {per_mille!r}")
    return b"".join(
        (
            _insn(_LD_ABS, 0, 0, _RANDOM),
            _insn(_MOD, 0, 0, 1000),
            _insn(_JGE, 4, 0, per_mille),  # at or past the share: one of the loop's
            _insn(_LD_ABS, 0, 0, _RANDOM),
            _insn(_MOD, 0, 0, shed_count),
            _insn(_ADD, 0, 0, loop_count),
            _insn(_RET_A, 0, 0, 0),
            _insn(_LD_ABS, 0, 0, _RANDOM),
            _insn(_MOD, 0, 0, loop_count),
            _insn(_RET_A, 0, 0, 0),
        )
    )


class Steer:
    """The shed sockets of a port's group and the share of new connections placed on them."""

    def __init__(self, loop_socks: Sequence[socket.socket], shed: list[socket.socket]) -> None:
        self.loop_socks = loop_socks
        #: the sockets steered connections land on (never read by the event loop)
        self.shed = shed
        #: the share attached now, per mille
        self.per_mille = 0

    @classmethod
    def open(cls, loop_socks: Sequence[socket.socket], count: int = SHED_LISTENERS) -> Steer | None:
        """``count`` shed sockets joined to the group of ``loop_socks`` (which must listen
        already: the group's order is the order sockets listened in, and the program names
        sockets by it), the share at 0; None where the platform cannot steer."""
        if sys.platform != "linux" or not loop_socks or count < 1:
            return None
        first = loop_socks[0]
        steer = cls(loop_socks, [])
        try:
            steer._attach(0)  # before the shed sockets listen: none lands there by hashing
            address = first.getsockname()
            for _ in range(count):
                sock = socket.socket(first.family, socket.SOCK_STREAM, first.proto)
                steer.shed.append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
                if first.family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind(address)
                sock.listen(SHED_BACKLOG)
                sock.setblocking(False)
        except OSError:
            steer.close()
            return None
        return steer

    def set_share(self, share: float) -> bool:
        """Place about ``share`` of new connections on the shed sockets (in steps of
        :data:`STEP_PER_MILLE`); whether the program changed."""
        per_mille = min(1000, max(0, int(share * 1000) // STEP_PER_MILLE * STEP_PER_MILLE))
        if per_mille == self.per_mille:
            return False
        try:
            self._attach(per_mille)
        except OSError:
            return False
        return True

    def _attach(self, per_mille: int) -> None:
        code = program(len(self.loop_socks), len(self.shed) or SHED_LISTENERS, per_mille)
        buffer = ctypes.create_string_buffer(code)
        fprog = struct.pack("HL", len(code) // 8, ctypes.addressof(buffer))
        self.loop_socks[0].setsockopt(socket.SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, fprog)
        self.per_mille = per_mille

    def close(self) -> None:
        """Stop steering and close the shed sockets (their waiting connections are reset)."""
        with contextlib.suppress(OSError):
            if self.per_mille:
                self._attach(0)
        for sock in self.shed:
            sock.close()
        self.shed.clear()
