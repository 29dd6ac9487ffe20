#!/usr/bin/env python3
"""Port and host states in scripts/bench.sh's jobs udp, udprate and discover.

    bench_scans.py udp LABEL_A A.xml LABEL_B B.xml
    bench_scans.py discover MOONSCAN.xml NMAP.xml

In: nmap-format -oX files (moonscan's or nmap's).
Out, on stdout:
    udp       for each file, its count of UDP ports per state and its open
              ports, then whether every port has the same state in both and
              the ports where they differ ("-" where a file lists none);
              the ports nmap folds into one <extraports> are read from its
              <scaninfo> list;
    discover  hosts up and open ports in each, and whether both sets are
              the same.
What always holds: exit status 0 (differences are reported, not errors);
input that does not parse raises (exit 1).
"""
import re
import xml.etree.ElementTree as ET
from collections import Counter

from bench_lib import main


def states(path):
    # Listed ports, and the ports of <scaninfo> that nmap folds into one
    # <extraports state=...> (its collapsed "Not shown: 97 closed ports").
    text = open(path).read()
    listed = {int(p): s for p, s in re.findall(r'<port protocol="udp" portid="(\d+)"><state state="([^"]+)"', text)}
    extra = re.findall(r'<extraports state="([^"]+)"', text)
    info = re.search(r'<scaninfo type="udp" protocol="udp" numservices="\d+" services="([^"]+)"', text)
    if len(extra) == 1 and info:
        for part in info.group(1).split(","):
            lo, _, hi = part.partition("-")
            for p in range(int(lo), int(hi or lo) + 1):
                listed.setdefault(p, extra[0])
    return listed


def udp(label_a, path_a, label_b, path_b):
    (la, a), (lb, b) = (label_a, states(path_a)), (label_b, states(path_b))
    for label, st in ((la, a), (lb, b)):
        print(f"  {label} states: " + ", ".join(f"{k} {v}" for k, v in sorted(Counter(st.values()).items()))
              + f"; open: {sorted(p for p, s in st.items() if s == 'open')}")
    diff = sorted(p for p in set(a) | set(b) if a.get(p) != b.get(p))
    print(f"  same state on every port: {'yes' if not diff else 'no'}"
          + "".join(f"\n    udp/{p}: {la} {a.get(p, '-')}, {lb} {b.get(p, '-')}" for p in diff))


def seen(path):
    hosts, ports = set(), set()
    for h in ET.parse(path).iter("host"):
        if h.find("status").get("state") != "up":
            continue
        ip = h.find("address").get("addr")
        hosts.add(ip)
        for p in h.iter("port"):
            if p.find("state").get("state") == "open":
                ports.add((ip, p.get("portid")))
    return hosts, ports


def discover(moonscan_xml, nmap_xml):
    (mh, mp), (nh, np) = seen(moonscan_xml), seen(nmap_xml)
    same = "same" if (mh, mp) == (nh, np) else "DIFFERENT"
    print(f"  hosts up: moonscan {len(mh)}, nmap {len(nh)}; open ports: moonscan {len(mp)}, nmap {len(np)} ({same})")


COMMANDS = {"udp": udp, "discover": discover}

if __name__ == "__main__":
    main(COMMANDS)
