#!/usr/bin/env python3
"""tls_version_shuffle: answer every ClientHello with a ServerHello of another
version (SSLv3, TLS 1.0, 1.1, 1.2, an unknown 0x0399, in turn across
connections), a suite the client may not have offered, and no Certificate,
then close.

A scanner must not loop retrying, nor trust the versions it is told: each
connection ends in a clear error or an honest reading of what was said, in
bounded time.
"""
import itertools
import os
import struct
import threading

from common import graceful_close, parse_args, read_client_hello, serve

VERSIONS = itertools.cycle([0x0300, 0x0301, 0x0302, 0x0303, 0x0399])
LOCK = threading.Lock()


def handle(conn):
    if read_client_hello(conn) is None:
        return graceful_close(conn)
    with LOCK:
        version = next(VERSIONS)
    body = struct.pack("!H32sBHB", version, os.urandom(32), 0, 0x0005, 0)
    hello = struct.pack("!B", 2) + len(body).to_bytes(3, "big") + body
    done = struct.pack("!B", 14) + (0).to_bytes(3, "big")
    payload = hello + done
    conn.sendall(struct.pack("!BHH", 0x16, version, len(payload)) + payload)
    graceful_close(conn)


if __name__ == "__main__":
    serve(parse_args(__doc__), handle)
