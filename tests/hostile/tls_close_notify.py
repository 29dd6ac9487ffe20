#!/usr/bin/env python3
"""tls_close_notify: read a ClientHello, send a hand-built TLS 1.2 ServerHello
record, then a close_notify alert record (level 1, description 0), then close.

The server says "goodbye" in the middle of the handshake.  A scanner must treat
this as a failed (or at least finished) handshake, not wait for more.
"""
from common import graceful_close, parse_args, read_client_hello, serve, server_hello_record

CLOSE_NOTIFY = bytes([0x15, 0x03, 0x03, 0x00, 0x02, 0x01, 0x00])  # alert, TLS 1.2, len 2, warning, close_notify


def handle(conn):
    if read_client_hello(conn) is None:
        return graceful_close(conn)  # not TLS: hang up (FIN, not RST)
    conn.sendall(server_hello_record() + CLOSE_NOTIFY)
    graceful_close(conn)


if __name__ == "__main__":
    serve(parse_args(__doc__), handle)
