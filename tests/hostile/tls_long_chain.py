#!/usr/bin/env python3
"""tls_long_chain: a real TLS server whose chain has 100 certificates: the leaf
(CN long-chain.moonscan.test) plus 99 more, each signed by the next, the last a
self-signed root.  After the handshake, "GET / ..." gets
"HTTP/1.0 200 OK\\r\\nServer: hostile-chain\\r\\n\\r\\n", then we close.

A scanner that parses or verifies certificates must cope with a ~50 KB
Certificate message and a 100-deep chain (no deep recursion, no unbounded
work), and still read the leaf's CN and the HTTP answer.

The chain is made with the `openssl` CLI (ECDSA P-256, ~1 s in all) before
"ready" is printed.  With --workdir DIR it is cached in DIR (chain.pem,
leaf.key) and reused on later starts; without, a temp dir is used and deleted
as soon as the certificates are loaded.
"""
import os
import ssl
import subprocess
import tempfile

from common import graceful_close, parse_args, read_request, serve

LEAF_CN = "long-chain.moonscan.test"
CHAIN_LEN = 100


def make_chain(d):
    """Write d/chain.pem (leaf first, root last) and d/leaf.key."""
    parent = None  # (cert, key) of the issuer; None for the self-signed root
    for i in range(CHAIN_LEN - 1, -1, -1):  # 99 = root ... 0 = leaf
        cert, key = os.path.join(d, f"{i}.pem"), os.path.join(d, f"{i}.key")
        if i == 0:
            subj, exts = LEAF_CN, ["basicConstraints=critical,CA:FALSE", f"subjectAltName=DNS:{LEAF_CN}",
                                   "keyUsage=critical,digitalSignature", "extendedKeyUsage=serverAuth"]
        else:
            name = "root" if i == CHAIN_LEN - 1 else f"intermediate {i}"
            subj, exts = f"hostile chain {name}", ["basicConstraints=critical,CA:TRUE",
                                                    "keyUsage=critical,keyCertSign,cRLSign"]
        cmd = ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
               "-keyout", key, "-out", cert, "-days", "3650", "-subj", f"/CN={subj}"]
        cmd += [a for e in exts for a in ("-addext", e)]
        if parent:
            cmd += ["-CA", parent[0], "-CAkey", parent[1]]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        parent = (cert, key)
    with open(os.path.join(d, "chain.pem.tmp"), "w") as out:
        for i in range(CHAIN_LEN):
            with open(os.path.join(d, f"{i}.pem")) as f:
                out.write(f.read())
    os.replace(os.path.join(d, "0.key"), os.path.join(d, "leaf.key"))
    os.replace(os.path.join(d, "chain.pem.tmp"), os.path.join(d, "chain.pem"))  # last: marks the cache complete
    for i in range(CHAIN_LEN):
        for ext in ("pem", "key"):
            if os.path.exists(p := os.path.join(d, f"{i}.{ext}")):
                os.remove(p)


def context(workdir):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if workdir:
        os.makedirs(workdir, exist_ok=True)
        if not os.path.exists(os.path.join(workdir, "chain.pem")):
            make_chain(workdir)
        ctx.load_cert_chain(os.path.join(workdir, "chain.pem"), os.path.join(workdir, "leaf.key"))
    else:
        with tempfile.TemporaryDirectory(prefix="hostile-chain-") as d:
            make_chain(d)
            ctx.load_cert_chain(os.path.join(d, "chain.pem"), os.path.join(d, "leaf.key"))
    return ctx


def handle(conn):
    tls = CTX.wrap_socket(conn, server_side=True)  # handshake happens here, under conn's timeout
    if read_request(tls).startswith(b"GET /"):
        tls.sendall(b"HTTP/1.0 200 OK\r\nServer: hostile-chain\r\n\r\n")
    tls.settimeout(2)
    try:
        raw = tls.unwrap()  # send close_notify so the client sees a clean TLS EOF
    except OSError:
        return
    graceful_close(raw)


def extra(p):
    p.add_argument("--workdir", help="cache the generated chain here (reused if present)")


if __name__ == "__main__":
    ARGS = parse_args(__doc__, extra)
    CTX = context(ARGS.workdir)
    serve(ARGS, handle)
