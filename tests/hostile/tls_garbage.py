#!/usr/bin/env python3
"""tls_garbage: read a ClientHello, answer with a hand-built TLS 1.2 ServerHello
record (cipher 0xC02F, see common.py), then 64 KiB of random bytes, then close.

The handshake starts normally and then turns into noise.  A scanner's TLS
probe must fail cleanly (a record/decode error), not hang, panic, or buffer
without limit.
"""
import os

from common import graceful_close, parse_args, read_client_hello, serve, server_hello_record


def handle(conn):
    if read_client_hello(conn) is None:
        return graceful_close(conn)  # not TLS: hang up (FIN, not RST)
    conn.sendall(server_hello_record())
    conn.sendall(os.urandom(64 * 1024))
    graceful_close(conn)


if __name__ == "__main__":
    serve(parse_args(__doc__), handle)
