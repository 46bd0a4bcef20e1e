"""Listening sockets for the servers longterm starts (``longterm mcp``, ``longterm ui``).

The seam: ``bind(host, port) -> socket`` binds and listens before the server starts, so a busy
port is one ``ConfigurationError`` naming the port and ``--port`` (the CLI's one line),
``--port 0`` can print the port the system chose, and a client that connects as soon as the
address is printed waits in the backlog until the server accepts (bound but not listening, it
was refused: a browser test on a busy machine saw ERR_CONNECTION_REFUSED).
"""

from __future__ import annotations

import errno
import socket

from .errors import ConfigurationError

#: Connections the system queues before the server accepts them.
BACKLOG = 2048


def bind(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host``:``port`` (IPv6 when ``host`` has a colon), listening."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(BACKLOG)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ConfigurationError(
                f"port {port} on {host} is in use (another server, or another longterm ui or mcp); "
                "pass --port with a free one, or --port 0 to let the system pick."
            ) from None
        raise
    except BaseException:
        sock.close()
        raise
    return sock
