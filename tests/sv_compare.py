#!/usr/bin/env python3
"""Compares the service detection of two nmap-format XML files, port by port.

    sv_compare.py NMAP.xml MOONSCAN.xml

nmap's file is the reference. For every port open in either file, one JSON
object per line on stdout:

    {"addr", "port", "nmap": {name, product, version, extrainfo},
     "moonscan": {...}, "verdict": V}

where V is
    "equal"      nmap identified it (a product) and moonscan gives the same
                 service name and product, and the same version where nmap
                 gives one;
    "named"      nmap gave a service name only (no product), and moonscan the
                 same name;
    "different"  both said something and it differs;
    "missing"    nmap said something that moonscan did not;
    "more"       moonscan said something where nmap did not;
    "neither"    neither named it.
nmap's version scripts may put free text where the service name goes
(mqtt-subscribe writes the broker's "mosquitto version 2.0.11" there); a
name of nmap's with a space in it is compared with moonscan's
"<product> version <version>", ignoring case.

A last line {"summary": {verdict: count, ...}, "nmap_identified": N,
"moonscan_identified": M} counts them. Exits 2 on unreadable input.
"""
import json
import sys
import xml.etree.ElementTree as ET

UNKNOWN = {"", "unknown", "tcpwrapped"}


def services(path):
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        sys.exit(f"sv_compare: {path}: {e}")
    found = {}
    for host in root.iter("host"):
        addr = next((a.get("addr") for a in host.iter("address") if a.get("addrtype") in ("ipv4", "ipv6")), None)
        for port in host.iter("port"):
            state = port.find("state")
            if state is None or state.get("state") != "open":
                continue
            svc = port.find("service")
            attrs = {} if svc is None else svc.attrib
            # nmap names a port it could not identify after the port table
            # (method="table"): that is a guess, not a detection.
            guessed = attrs.get("method") == "table"
            name = "" if guessed else attrs.get("name", "")
            found[(addr, int(port.get("portid")), port.get("protocol"))] = {
                "name": "" if name in UNKNOWN else name,
                "product": "" if guessed else attrs.get("product", ""),
                "version": "" if guessed else attrs.get("version", ""),
                "extrainfo": "" if guessed else attrs.get("extrainfo", ""),
            }
    return found


def verdict(n, m):
    if " " in n["name"]:
        said = f'{m["product"]} version {m["version"]}'.lower()
        if not m["name"]:
            return "missing"
        return "equal" if m["product"] and m["version"] and n["name"].lower() == said else "different"
    if not n["name"] and not n["product"]:
        return "more" if (m["name"] or m["product"]) else "neither"
    if not m["name"] and not m["product"]:
        return "missing"
    if n["name"] != m["name"] or (n["product"] and n["product"] != m["product"]):
        return "different"
    if n["version"] and n["version"] != m["version"]:
        return "different"
    return "equal" if n["product"] else "named"


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: sv_compare.py NMAP.xml MOONSCAN.xml")
    nmap, ms = services(sys.argv[1]), services(sys.argv[2])
    empty = {"name": "", "product": "", "version": "", "extrainfo": ""}
    summary = {}
    for key in sorted(set(nmap) | set(ms), key=lambda k: (k[0] or "", k[1])):
        n, m = nmap.get(key, empty), ms.get(key, empty)
        v = verdict(n, m)
        summary[v] = summary.get(v, 0) + 1
        print(json.dumps({"addr": key[0], "port": key[1], "nmap": n, "moonscan": m, "verdict": v}))
    print(json.dumps({
        "summary": summary,
        "nmap_identified": sum(1 for s in nmap.values() if s["name"]),
        "moonscan_identified": sum(1 for s in ms.values() if s["name"]),
    }))


if __name__ == "__main__":
    main()
