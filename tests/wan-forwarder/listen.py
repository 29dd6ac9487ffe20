#!/usr/bin/env python3
"""The WAN target's listeners (scripts/lab.sh wan up runs this in mswantgt).

In: --addr ADDR, --tcp PORT,PORT..., --udp PORT,PORT... and --pidfile FILE
(written with this process's pid before anything is bound).
Out: a TCP listener on each TCP port that accepts every connection and
closes it at once (an open port that says nothing), and on each UDP port an
echo: every datagram goes back to its sender unchanged.
What always holds: one thread, no state kept per connection or peer; runs
until SIGTERM (the default action); prints "listening" once every port is
bound; exits non-zero if a port cannot be bound within 5 s.
"""
import argparse
import errno
import os
import selectors
import socket
import time


def ports(text):
    return [int(p) for p in text.split(",") if p]


def bind(s, addr):
    """Binds, waiting up to 5 s for a listener of a WAN just taken down to go."""
    for _ in range(50):
        try:
            s.bind(addr)
            return
        except OSError as e:
            if e.errno != errno.EADDRINUSE:
                raise
            time.sleep(0.1)
    s.bind(addr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--addr", required=True)
    ap.add_argument("--tcp", type=ports, default=[])
    ap.add_argument("--udp", type=ports, default=[])
    ap.add_argument("--pidfile")
    args = ap.parse_args()
    if args.pidfile:
        # Its own pid, whatever started it (setsid forks where it must).
        tmp = args.pidfile + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{os.getpid()}\n")
        os.replace(tmp, args.pidfile)
    sel = selectors.DefaultSelector()
    for port in args.tcp:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        bind(s, (args.addr, port))
        s.listen(4096)
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, "tcp")
    for port in args.udp:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        bind(s, (args.addr, port))
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, "udp")
    print("listening", flush=True)
    while True:
        for key, _ in sel.select():
            s = key.fileobj
            try:
                if key.data == "tcp":
                    conn, _ = s.accept()
                    conn.close()
                else:
                    data, peer = s.recvfrom(65535)
                    s.sendto(data, peer)
            except (BlockingIOError, ConnectionError):
                pass


if __name__ == "__main__":
    main()
