"""Loopback ports for the servers a test starts."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A loopback port nothing listened on a moment ago (the kernel's pick)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
