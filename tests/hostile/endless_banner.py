#!/usr/bin/env python3
"""endless_banner: on connect, send "A" once a second, forever (until the client closes).

A scanner grabbing a banner must not wait for the banner to "finish": it needs a
total read deadline (not just an idle timeout, which this resets every second)
and a cap on what it keeps.
"""
import time

from common import parse_args, serve


def handle(conn):
    while True:
        conn.sendall(b"A")  # raises once the client has closed/reset
        time.sleep(1)


if __name__ == "__main__":
    serve(parse_args(__doc__), handle)
