#!/usr/bin/env python3
"""tls_legacy_sim: a server speaking only the first flight of what no TLS
library still ships: SSLv2 (a SERVER-HELLO), SSLv3 and TLS 1.0, with RC4,
DES, 3DES and export suites (server preference: RC4-SHA, DES-CBC3-SHA,
DES-CBC-SHA, EXP-RC4-MD5 with a 512-bit temporary RSA key).  Its certificate
is RSA 1024, signed with SHA-1 and expired (2015-2016), and the chain it
sends is broken: the leaf, then an unrelated certificate.

It answers each ClientHello with ServerHello, Certificate, (for export)
ServerKeyExchange and ServerHelloDone, or with a fatal alert when nothing
offered is accepted, then closes.  It never finishes a handshake: it is for
version and suite enumeration and weak-configuration findings, which read
no further.  The certificates are made with the `openssl` CLI at start.
"""
import os
import struct
import subprocess
import tempfile
import time

from common import graceful_close, parse_args, recv_exact, serve

VERSIONS = (0x0300, 0x0301)
SUITES = (0x0005, 0x000A, 0x0009, 0x0003)  # preference order
EXPORT = (0x0003,)
CHAIN = []


def expired_sha1_leaf(d):
    """RSA 1024, SHA-1, its validity rewritten to 2015-2016 (the signature
    no longer matches: nothing here checks it)."""
    der = os.path.join(d, "leaf.der")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:1024", "-sha1", "-nodes", "-days", "365",
                    "-subj", "/CN=legacy.moonscan.test", "-keyout", os.path.join(d, "leaf.key"),
                    "-outform", "DER", "-out", der], check=True, capture_output=True)
    data = bytearray(open(der, "rb").read())
    dates = [b"150101000000Z", b"160101000000Z"]
    at = 0
    for new in dates:
        at = data.index(b"\x17\x0d", at) + 2
        data[at:at + 13] = new
        at += 13
    return bytes(data)


def other_cert(d):
    der = os.path.join(d, "other.der")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "3650",
                    "-subj", "/CN=unrelated.moonscan.test", "-keyout", os.path.join(d, "other.key"),
                    "-outform", "DER", "-out", der], check=True, capture_output=True)
    return open(der, "rb").read()


def record(kind, version, body):
    return struct.pack("!BHH", kind, version, len(body)) + body


def message(kind, body):
    return bytes([kind]) + len(body).to_bytes(3, "big") + body


def alert(conn, version, code):
    conn.sendall(record(21, version, bytes([2, code])))
    graceful_close(conn)


def sslv2_server_hello(conn):
    cert = CHAIN[0]
    specs = bytes([1, 0, 0x80, 3, 0, 0x80])
    conn_id = os.urandom(16)
    body = bytes([4, 0, 1]) + struct.pack("!HHHH", 0x0002, len(cert), len(specs), len(conn_id)) + cert + specs + conn_id
    conn.sendall(bytes([0x80 | (len(body) >> 8), len(body) & 0xFF]) + body)
    graceful_close(conn)


def handle(conn):
    head = recv_exact(conn, 2)
    if head[0] & 0x80:
        recv_exact(conn, ((head[0] & 0x7F) << 8 | head[1]))
        return sslv2_server_hello(conn)
    rest = recv_exact(conn, 3)
    if head[0] != 22:
        return graceful_close(conn)
    body = recv_exact(conn, min(int.from_bytes(rest[1:3], "big"), 18432))
    # ClientHello: type, length, version, random, session id, suites.
    client_version = int.from_bytes(body[4:6], "big")
    at = 6 + 32
    at += 1 + body[at]
    n = int.from_bytes(body[at:at + 2], "big")
    offered = [int.from_bytes(body[at + 2 + i:at + 4 + i], "big") for i in range(0, n, 2)]
    version = min(client_version, max(VERSIONS))
    if version not in VERSIONS:
        return alert(conn, 0x0301, 70)
    suite = next((s for s in SUITES if s in offered), None)
    if suite is None:
        return alert(conn, version, 40)
    # renegotiation_info (empty) after SSLv3, which had no extensions.
    ext = b"" if version == 0x0300 else struct.pack("!HHHB", 5, 0xFF01, 1, 0)
    # The random starts with the server's clock (gmt_unix_time), as servers
    # of its age sent it: ssl-date reads it.
    random = struct.pack("!I", int(time.time())) + os.urandom(28)
    hello = struct.pack("!H32sBHB", version, random, 0, suite, 0) + ext
    certs = b"".join(len(c).to_bytes(3, "big") + c for c in CHAIN)
    flight = message(2, hello) + message(11, len(certs).to_bytes(3, "big") + certs)
    if suite in EXPORT:
        modulus = b"\xc5" + os.urandom(63)  # 512 bits
        ske = struct.pack("!H", len(modulus)) + modulus + struct.pack("!H", 3) + b"\x01\x00\x01"
        flight += message(12, ske + struct.pack("!H", 64) + os.urandom(64))
    flight += message(14, b"")
    conn.sendall(record(22, version, flight))
    graceful_close(conn)


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="legacy-sim-") as d:
        CHAIN.extend([expired_sha1_leaf(d), other_cert(d)])
    serve(parse_args(__doc__), handle)
