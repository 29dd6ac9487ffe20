#!/usr/bin/env python3
"""garbage_tls_alert: on connect, immediately send 15 03 01 00 02 02 28 (what a TLS
fatal handshake_failure alert record looks like) and close.  Plain TCP, no TLS.

The server "looks like TLS" before the client has said anything.  A scanner must
not mistake it for a working TLS service, must not hang waiting for more, and
must report something sensible (e.g. tls/unknown) rather than crash.
"""
from common import graceful_close, parse_args, serve

ALERT = bytes([0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 0x28])  # alert, TLS 1.0, len 2, fatal, handshake_failure


def handle(conn):
    conn.sendall(ALERT)
    graceful_close(conn)


if __name__ == "__main__":
    serve(parse_args(__doc__), handle)
