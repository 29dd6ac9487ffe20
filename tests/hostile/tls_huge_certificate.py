#!/usr/bin/env python3
"""tls_huge_certificate: read a ClientHello, answer with a TLS 1.2 ServerHello
and a Certificate message whose header claims 16 MB (2^24 - 1 bytes), then
send up to 16 MB of records of random bytes as its body, then close.

A scanner must refuse the message from its header (or at least keep memory
bounded while it comes), and say why, never buffer 16 MB per port.
"""
import os
import struct

from common import graceful_close, parse_args, read_client_hello, serve, server_hello_record


def handle(conn):
    if read_client_hello(conn) is None:
        return graceful_close(conn)
    conn.sendall(server_hello_record())
    first = struct.pack("!B", 11) + (0xFFFFFF).to_bytes(3, "big") + os.urandom(16380)
    conn.sendall(struct.pack("!BHH", 0x16, 0x0303, len(first)) + first)
    chunk = os.urandom(16384)
    record = struct.pack("!BHH", 0x16, 0x0303, len(chunk)) + chunk
    try:
        for _ in range(1024):
            conn.sendall(record)
    except OSError:
        return  # the scanner hung up: what it should do
    graceful_close(conn)


if __name__ == "__main__":
    serve(parse_args(__doc__), handle)
