"""Listening sockets for the servers longterm starts (``longterm mcp``, ``longterm ui``).

The seam: ``bind(host, port) -> socket`` binds before the server starts, so a busy port is an
``OSError`` the CLI reports in one line, and ``--port 0`` can print the port the system chose.
"""

from __future__ import annotations

import socket


def bind(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host``:``port`` (IPv6 when ``host`` has a colon), not yet listening."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except BaseException:
        sock.close()
        raise
    return sock
