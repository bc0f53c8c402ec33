"""Small networking helpers shared by the retrieval service and the distributed trainer."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A TCP port nobody listens on right now (free on every interface, loopback included)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return s.getsockname()[1]
