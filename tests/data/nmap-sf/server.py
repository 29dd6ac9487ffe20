# A made-up service no probe rule identifies, for recording nmap's service
# fingerprint and fingerprint-strings output (engine/findings/service_fp_tests.rs).
# In: connections on 198.18.0.5:47001 (run it in the lab's mstarget namespace).
# Out: a banner with hostile bytes (ANSI escape, NUL, CR, 0xff, quotes,
# backslash, regex metacharacters), then after any request one reply line
# naming the request's length and first 12 bytes.
# What always holds: the same request gets the same bytes back.
# Recorded: ip netns exec msscan nmap -n -Pn -sV --script fingerprint-strings
#   -p 47001 198.18.0.5 -oN nmap-sV-fingerprint-strings.nmap -oX ...xml (nmap 7.93)
import socket, threading
BANNER = b"MOON-7 hello\t\"q\" back\\slash (x)*+?[]$^|.{}~!@#%&=-_,;:'<>/\r\n\x1b[31mred\x1b[0m\x00\x00" + b"1\x00z\xff\xfe\x7f\x80 end\r\n"
def handle(c):
    try:
        c.sendall(BANNER)
        c.settimeout(8)
        d = c.recv(4096)
        if d:
            c.sendall(b"ERR unknown command len=%d\r\nfirst=" % len(d) + d[:12] + b"\r\n" + b"A" * 40 + b"\r\n")
    except Exception:
        pass
    finally:
        c.close()
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("198.18.0.5", 47001))
s.listen(50)
while True:
    c, _ = s.accept()
    threading.Thread(target=handle, args=(c,), daemon=True).start()
