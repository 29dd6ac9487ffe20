#!/usr/bin/env python3
"""tls_huge_extensions: read a ClientHello, answer with a TLS 1.2 ServerHello
whose extension block is as long as its 16-bit length allows (65,535 bytes of
made-up extensions, over five records), then 1 MiB of further handshake
records that never hold a ServerHelloDone, then close.

A scanner reading the server's first flight must keep its memory bounded
(one record and one handshake message at most) and end with a clear error.
"""
import os
import struct

from common import graceful_close, parse_args, read_client_hello, serve


def records(payload, kind=0x16):
    out = b""
    for at in range(0, len(payload), 16384):
        chunk = payload[at:at + 16384]
        out += struct.pack("!BHH", kind, 0x0303, len(chunk)) + chunk
    return out


def handle(conn):
    if read_client_hello(conn) is None:
        return graceful_close(conn)
    ext = b""
    while len(ext) + 4 + 1000 <= 65535:
        ext += struct.pack("!HH", 0x1000 + len(ext) // 1004, 1000) + os.urandom(1000)
    body = struct.pack("!H32sBHBH", 0x0303, os.urandom(32), 0, 0xC02F, 0, len(ext)) + ext
    hello = struct.pack("!B", 2) + len(body).to_bytes(3, "big") + body
    conn.sendall(records(hello))
    # Then certificate-status messages (type 22) of 64 KiB each, forever-ish.
    for _ in range(16):
        msg = struct.pack("!B", 22) + (65536).to_bytes(3, "big") + os.urandom(65536)
        conn.sendall(records(msg))
    graceful_close(conn)


if __name__ == "__main__":
    serve(parse_args(__doc__), handle)
