#!/usr/bin/env python3
"""huge_response: on connect, send 100 MiB of "x" (no newline) in chunks, then close.

It never reads what the client sends.  A scanner must cap how much of a
response it buffers (a line reader waiting for "\\n" would eat it all) and stop
reading once it has enough; when it closes, we stop quietly.
"""
from common import graceful_close, parse_args, serve

CHUNK = memoryview(b"x" * 65536)  # shared by all connections: no per-connection buffers


def handle(conn):
    left = ARGS.bytes
    while left > 0:
        n = min(left, len(CHUNK))
        conn.sendall(CHUNK[:n])  # raises if the client closed
        left -= n
    graceful_close(conn)


def extra(p):
    p.add_argument("--bytes", type=int, default=100 * 1024 * 1024, help="total to send (default 100 MiB)")


if __name__ == "__main__":
    ARGS = parse_args(__doc__, extra)
    serve(ARGS, handle)
