#!/usr/bin/env python3
"""tls_empty_chain: on --ports consecutive ports from --port, read a
ClientHello and answer with a TLS 1.2 ServerHello, a Certificate message of
87,000 zero-length certificates (255 KiB in all, each entry three bytes) and
ServerHelloDone, in records of 16 KiB; then wait for the client to hang up.

A scanner that keeps a summary per certificate holds ~87,000 of them per
port; one that bounds a chain keeps a few and says how many it cut.
"""
import socket
import struct
import threading

from common import parse_args, read_client_hello, server_hello_record

EMPTY = 87_000  # 3 bytes each: the list stays under 256 KiB


def flight():
    entries = b"\x00\x00\x00" * EMPTY
    body = len(entries).to_bytes(3, "big") + entries
    msg = struct.pack("!B", 11) + len(body).to_bytes(3, "big") + body
    msg += b"\x0e\x00\x00\x00"  # ServerHelloDone
    records = b""
    for at in range(0, len(msg), 16384):
        part = msg[at : at + 16384]
        records += struct.pack("!BHH", 0x16, 0x0303, len(part)) + part
    return records


FLIGHT = flight()


def handle(conn):
    try:
        if read_client_hello(conn) is None:
            return
        conn.sendall(server_hello_record() + FLIGHT)
        while conn.recv(4096):
            pass
    except OSError:
        pass
    finally:
        conn.close()


def listen(srv):
    while True:
        try:
            conn, _ = srv.accept()
        except OSError:
            return
        conn.settimeout(30)
        threading.Thread(target=handle, args=(conn,), daemon=True).start()


def extra(p):
    p.add_argument("--ports", type=int, default=1, help="how many consecutive ports to serve")


if __name__ == "__main__":
    ARGS = parse_args(__doc__, extra)
    threading.stack_size(512 * 1024)
    servers = [socket.create_server((ARGS.host, ARGS.port + i), backlog=64) for i in range(ARGS.ports)]
    for s in servers:
        threading.Thread(target=listen, args=(s,), daemon=True).start()
    print("ready", flush=True)
    threading.Event().wait()
