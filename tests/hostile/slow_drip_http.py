#!/usr/bin/env python3
"""slow_drip_http: answer any request with "HTTP/1.0 200 OK\\r\\n", then one header
byte every 2 seconds, forever (the headers never end: "X-Drip: slow\\r\\n" repeated).

Slowloris in reverse.  A scanner's HTTP probe needs an overall deadline for the
response headers, not only an idle timeout that every byte resets.
"""
import itertools
import time

from common import parse_args, read_request, serve

HEADER = b"X-Drip: slow\r\n"


def handle(conn):
    if not read_request(conn):
        return  # client closed without asking anything
    conn.sendall(b"HTTP/1.0 200 OK\r\n")
    for byte in itertools.cycle(HEADER):
        time.sleep(2)
        conn.sendall(bytes([byte]))  # raises once the client has closed/reset


if __name__ == "__main__":
    serve(parse_args(__doc__), handle)
