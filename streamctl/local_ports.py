"""Ports on this machine's loopback: a free one to bind, and whether one answers."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on right now (the OS's choice)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something accepts connections on ``host:port`` (within 0.2 s)."""
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex((host, port)) == 0
