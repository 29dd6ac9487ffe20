#!/usr/bin/env python3
"""TLS in scripts/bench.sh's jobs sslenum and tlssv.

    bench_tls.py sslenum MOONSCAN.ndjson SSLSCAN.xml NMAP.xml TESTSSL.json
    bench_tls.py tlssv NAME MOONSCAN.ndjson TIME_V EXIT

In: moonscan -oJ output (NDJSON), sslscan --xml, nmap -oX with
ssl-enum-ciphers, testssl.sh --jsonfile, the stderr of /usr/bin/time -v
(TIME_V) and the scan's exit status (EXIT).
Out, on stdout:
    sslenum  the suites per TLS version each tool found, and whether they
             are the same as moonscan's: by IANA name against nmap, by count
             per version against sslscan and testssl.sh (they print ids and
             OpenSSL names); the names only one of moonscan and nmap has,
             per version;
    tlssv    one line for binary NAME: certificates read (by path), of how
             many service events, per second, peak RSS, errors and EXIT.
What always holds: exit status 0; nmap's or testssl.sh's output that does
not parse is reported as unreadable; moonscan's, sslscan's, or for tlssv
anything that does not parse, raises (exit 1).
"""
import json
import re
import xml.etree.ElementTree as ET

from bench_lib import events, peak_rss_mb, main


def sslenum(ms, ss, nm, ts):
    mine = {}
    for e in events(ms):
        # nmap's table: ssl-enum-ciphers' script result (its findings are the weaknesses).
        if e.get("type") == "script" and e.get("plugin") == "ssl-enum-ciphers":
            for v, d in e["data"].items():
                if isinstance(d, dict):
                    for c in d.get("ciphers") or []:
                        mine.setdefault(v, set()).add(c["name"])
    nmap = {}
    try:
        for s in ET.parse(nm).getroot().iter("script"):
            if s.get("id") == "ssl-enum-ciphers":
                for v in s.findall("table"):
                    for cs in v.findall("table[@key='ciphers']"):
                        for c in cs.findall("table"):
                            nmap.setdefault(v.get("key"), set()).add(c.find("elem[@key='name']").text)
    except Exception as e:
        print(f"  nmap output unreadable: {e}")
    ssl = {}
    for c in ET.parse(ss).getroot().iter("cipher"):
        ssl.setdefault(c.get("sslversion"), set()).add(int(c.get("id"), 16))

    def count(d):
        return ", ".join(f"{v} {len(s)}" for v, s in sorted(d.items())) or "none"

    tssl = {}
    try:
        names = {"ssl3": "SSLv3", "tls1": "TLSv1.0", "tls1_1": "TLSv1.1", "tls1_2": "TLSv1.2", "tls1_3": "TLSv1.3"}
        for f in json.load(open(ts)):
            m = re.match(r"cipher-(ssl3|tls1(?:_[123])?)_x([0-9a-f]+)$", f.get("id", ""))
            if m and "not offered" not in f.get("finding", ""):
                tssl.setdefault(names[m.group(1)], set()).add(int(m.group(2), 16))
    except Exception as e:
        print(f"  testssl.sh output unreadable: {e}")
    print(f"  suites: moonscan {count(mine)}; sslscan {count(ssl)}; nmap {count(nmap)}; testssl.sh {count(tssl)}")
    same_nmap = mine == nmap
    same_ssl = {v: len(s) for v, s in mine.items()} == {v: len(s) for v, s in ssl.items()}
    same_tssl = {v: len(s) for v, s in mine.items()} == {v: len(s) for v, s in tssl.items()}
    print(f"  same versions and suites as nmap: {'yes' if same_nmap else 'NO'}; as sslscan: {'yes' if same_ssl else 'NO'}; as testssl.sh: {'yes' if same_tssl else 'NO'}")
    if not same_nmap:
        for v in sorted(set(mine) | set(nmap)):
            a, b = mine.get(v, set()), nmap.get(v, set())
            if a != b:
                print(f"    {v}: only moonscan {sorted(a - b)}; only nmap {sorted(b - a)}")


def tlssv(name, nd, tm, rc):
    certs = services = 0
    end, paths = {}, {}
    for e in events(nd):
        if e["type"] == "service":
            services += 1
            tls = e.get("tls") or {}
            if tls.get("chain"):
                certs += 1
                p = tls.get("path") or "?"
                paths[p] = paths.get(p, 0) + 1
        elif e["type"] == "scan_end":
            end = e
    rss = peak_rss_mb(open(tm).read())
    el = end.get("elapsed", 0) or 1
    how = ", ".join(f"{n} by {p}" for p, n in sorted(paths.items())) or "none"
    print(f"  {name}: {certs} certificates ({how}) of {services} services in {el:.2f} s = {certs / el:.0f} certificates/s, peak RSS {rss:.1f} MB, errors {end.get('errors')}, exit {rc}")


COMMANDS = {"sslenum": sslenum, "tlssv": tlssv}

if __name__ == "__main__":
    main(COMMANDS)
