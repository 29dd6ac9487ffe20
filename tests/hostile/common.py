"""Shared plumbing for the hostile test servers in this folder.

Every server: `python3 NAME.py --host H --port P [--max-conns N]`, prints
"ready" on stdout (flushed) once the socket is listening, serves each
connection in its own daemon thread, and runs until killed.  Memory stays
bounded: at most --max-conns connections are handled at once (extra ones are
closed straight away), every read is capped, and every socket has a timeout so
a peer that goes silent cannot pin a thread forever.
"""
import argparse
import socket
import sys
import threading
import time

IO_TIMEOUT = 60.0  # seconds a single recv/send may block before we give up


def log(msg):
    print(f"[{sys.argv[0]}] {msg}", file=sys.stderr, flush=True)


def parse_args(description, extra=None):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True, help="0 picks a free port (logged on stderr)")
    p.add_argument("--max-conns", type=int, default=256, help="connections handled at once")
    if extra:
        extra(p)
    return p.parse_args()


def serve(args, handler):
    """Listen, print "ready", then run handler(conn) per connection in a thread."""
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    srv = socket.create_server((args.host, args.port), family=family, backlog=128)
    threading.stack_size(512 * 1024)
    slots = threading.BoundedSemaphore(args.max_conns)
    print("ready", flush=True)
    log(f"listening on {srv.getsockname()[0]} port {srv.getsockname()[1]}")
    try:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:  # e.g. EMFILE: back off instead of spinning
                time.sleep(0.1)
                continue
            if not slots.acquire(blocking=False):
                conn.close()
                continue
            conn.settimeout(IO_TIMEOUT)
            try:
                threading.Thread(target=_run, args=(handler, conn, slots), daemon=True).start()
            except RuntimeError:  # cannot start a thread: drop this one
                conn.close()
                slots.release()
    except KeyboardInterrupt:
        pass


def _run(handler, conn, slots):
    try:
        handler(conn)
    except OSError:  # peer closed / reset / timed out (ssl.SSLError is an OSError too)
        pass
    except Exception as e:  # a bug in the server itself: say so, keep serving
        log(f"handler error: {e!r}")
    finally:
        try:
            conn.close()
        except OSError:
            pass
        slots.release()


def recv_exact(sock, n):
    """Read exactly n bytes; raise ConnectionError if the peer closes first."""
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("peer closed")
        buf += chunk
    return bytes(buf)


def read_request(sock, limit=16384):
    """Read until a blank line ends an HTTP-style request, EOF, or `limit` bytes."""
    buf = bytearray()
    while len(buf) < limit and b"\r\n\r\n" not in buf and b"\n\n" not in buf:
        chunk = sock.recv(4096)
        if not chunk:
            break
        buf += chunk
    return bytes(buf)


def read_client_hello(sock):
    """Read one TLS record (meant to be the ClientHello); return it or None if not TLS handshake."""
    header = recv_exact(sock, 5)
    ctype, length = header[0], int.from_bytes(header[3:5], "big")
    if ctype != 0x16:
        return None
    return header + recv_exact(sock, min(length, 18432))  # 2^14 + slack: never more


def server_hello_record():
    """A syntactically valid TLS 1.2 ServerHello record, built by hand: version
    0x0303, random, empty session id, cipher 0xC02F, null compression, and one
    extension, an empty renegotiation_info (RFC 5746).  rustls accepts the hello
    without it, but OpenSSL clients abort with "unsafe legacy renegotiation"
    before ever reading what follows; with it, both stacks go on to the next record.
    """
    import os
    import struct
    reneg = struct.pack("!HHB", 0xFF01, 1, 0)  # type renegotiation_info, length 1, empty
    body = struct.pack("!H32sBHBH", 0x0303, os.urandom(32), 0, 0xC02F, 0, len(reneg)) + reneg
    handshake = struct.pack("!B", 2) + len(body).to_bytes(3, "big") + body  # type 2 = server_hello
    return struct.pack("!BHH", 0x16, 0x0303, len(handshake)) + handshake


def graceful_close(sock, linger=1.0):
    """Half-close, then drain what the peer still sends for up to `linger` s.

    Closing with unread input makes Linux send RST, which can throw away data the
    peer has not read yet; draining first makes the peer see our bytes, then EOF.
    """
    try:
        sock.shutdown(socket.SHUT_WR)
        deadline = time.monotonic() + linger
        while (left := deadline - time.monotonic()) > 0:
            sock.settimeout(left)
            if not sock.recv(65536):
                break
    except OSError:
        pass
    sock.close()
