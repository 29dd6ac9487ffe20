#!/usr/bin/env python3
"""tls_silent: a server that speaks only TLS and waits for the client, as
TURN servers and Tor's ORPort do. Anything that does not start like a TLS
handshake record (0x16) is dropped without a word (no alert, no banner), so
a scanner finds TLS here only by offering a ClientHello itself. Inside TLS,
"GET / ..." gets "HTTP/1.0 200 OK\\r\\nServer: silent-tls/1.0\\r\\n\\r\\n".

The certificate (CN silent-tls.moonscan.test, ECDSA P-256, self-signed) is
made with the `openssl` CLI in a temporary folder before "ready" is printed.
"""
import os
import socket
import ssl
import subprocess
import tempfile

from common import graceful_close, parse_args, read_request, serve


def context():
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    with tempfile.TemporaryDirectory(prefix="hostile-silent-") as d:
        cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                        "-nodes", "-keyout", key, "-out", cert, "-days", "3650",
                        "-subj", "/CN=silent-tls.moonscan.test"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        ctx.load_cert_chain(cert, key)
    return ctx


def handle(conn):
    first = conn.recv(1, socket.MSG_PEEK)
    if first != b"\x16":
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        return  # dropped: closed without a word
    tls = CTX.wrap_socket(conn, server_side=True)
    if read_request(tls).startswith(b"GET /"):
        tls.sendall(b"HTTP/1.0 200 OK\r\nServer: silent-tls/1.0\r\n\r\n")
    tls.settimeout(2)
    try:
        raw = tls.unwrap()
    except OSError:
        return
    graceful_close(raw)


if __name__ == "__main__":
    ARGS = parse_args(__doc__)
    CTX = context()
    serve(ARGS, handle)
