"""The servers' sockets listen as soon as they are bound (longterm/_net.py)."""

from __future__ import annotations

import socket

from longterm._net import bind


def test_a_client_connecting_right_after_the_address_is_known_is_queued_not_refused() -> None:
    # `longterm ui`/`mcp` print the address before the server accepts: a client that connects
    # then (a browser test on a busy machine) was refused while the socket was only bound.
    server = bind("127.0.0.1", 0)
    try:
        client = socket.create_connection(server.getsockname(), timeout=2)
        client.close()
    finally:
        server.close()
