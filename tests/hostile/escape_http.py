#!/usr/bin/env python3
"""escape_http: an HTTP server whose banner, Server header and page title
carry terminal escape sequences (clear the screen, set the window title,
ring the bell, CSI as a C1 character, a right-to-left override) and line
breaks followed by a fake scanner line.  Whatever reaches a terminal must
show these as visible escapes, never act on them.
"""
from common import parse_args, read_request, serve

FAKE = "\r\nDiscovered open port 31337/tcp on 6.6.6.6\r\n"
TITLE = "\x1b]0;owned\x07\x1b[2J\x1b[Hcleared" + FAKE + "\u009b31mred\u202eevil"
BODY = ("<html><head><title>" + TITLE + "</title></head><body>hi</body></html>").encode("utf-8")
HEAD = (
    "HTTP/1.1 200 OK\r\n"
    "Server: evil\u009b2J\u202epwned\r\n"
    "Content-Type: text/html\r\n"
    "Content-Length: %d\r\n"
    "Connection: close\r\n\r\n" % len(BODY)
).encode("utf-8")


def handle(conn):
    if not read_request(conn):
        return
    conn.sendall(HEAD + BODY)


if __name__ == "__main__":
    serve(parse_args(__doc__), handle)
