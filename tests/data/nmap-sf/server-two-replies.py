# A made-up service that answers every request with one of two replies, for
# recording how nmap's fingerprint-strings groups probes and fails
# (engine/findings/service_fp_tests.rs).
# In: connections on 198.18.0.5:47002 (run it in the lab's mstarget
# namespace); with TAIL=yes and port 47003 for the grouped recording.
# Out: nothing first; a request starting GET gets an HTTP-like reply with
# tabs, runs of spaces and control bytes, any other request NOPE... ending
# in a literal backslash and TAIL (xzz: fingerprint-strings fails on it).
# What always holds: the same request gets the same bytes back.
# Recorded with nmap 7.93: nmap -n -Pn -sV --script fingerprint-strings -p PORT
#   198.18.0.5 -oN nmap-sV-backslash-x.nmap (47002) / nmap-sV-grouped.nmap (47003)
import os, socket, threading
TAIL = os.environ.get("TAIL", "xzz").encode()
PORT = 47003 if TAIL == b"yes" else 47002
def handle(c):
    try:
        c.settimeout(8)
        d = c.recv(4096)
        if d.startswith(b"GET"):
            c.sendall(b"HTTP/9.9 777 Moon\r\nX-Odd:\t tabs  and   spaces\r\n\r\nab\x01cdefg\x02hi\x7fjklm nop")
        elif d:
            c.sendall(b"NOPE\x00\x00what?\r\n\\" + TAIL)
    except Exception:
        pass
    finally:
        c.close()
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("198.18.0.5", PORT))
s.listen(50)
while True:
    c, _ = s.accept()
    threading.Thread(target=handle, args=(c,), daemon=True).start()
