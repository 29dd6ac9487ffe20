#!/usr/bin/env python3
"""Compares the OS detection of two -oX reports (nmap's and moonscan's).

In: NMAP_XML MOONSCAN_XML. Out: one line per host (both best matches and
their first classes, agree or differ) and a last line with the count of
hosts where the best match and class agree. What always holds: hosts are
matched by IPv4 address; a host missing from one report counts as differing.
Exit status 0 if every host of nmap's report agrees, 1 otherwise.
"""
import sys
import xml.etree.ElementTree as ET


def best(path):
    out = {}
    for host in ET.parse(path).getroot().iter("host"):
        addr = next((a.get("addr") for a in host.iter("address") if a.get("addrtype") == "ipv4"), None)
        m = next(host.iter("osmatch"), None)
        if addr is None:
            continue
        if m is None:
            out[addr] = (None, None)
            continue
        c = next(m.iter("osclass"), None)
        cls = None if c is None else "|".join(c.get(k, "") for k in ("type", "vendor", "osfamily", "osgen"))
        out[addr] = (m.get("name"), cls)
    return out


def main():
    nmap, ours = best(sys.argv[1]), best(sys.argv[2])
    agree = 0
    for addr in sorted(nmap, key=lambda a: tuple(int(x) for x in a.split("."))):
        same = ours.get(addr) == nmap[addr]
        agree += same
        print(f"    {addr:<15} {'agree ' if same else 'DIFFER'} nmap: {nmap[addr][0]} [{nmap[addr][1]}]"
              + ("" if same else f"  moonscan: {ours.get(addr, (None, None))[0]} [{ours.get(addr, (None, None))[1]}]"))
    print(f"  same best match and class: {agree} of {len(nmap)} hosts")
    return 0 if agree == len(nmap) else 1


if __name__ == "__main__":
    sys.exit(main())
