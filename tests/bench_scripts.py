#!/usr/bin/env python3
"""Script results (plugins, nmap's NSE) in scripts/bench.sh's jobs scripts, coverage, plugrate and names.

    bench_scripts.py facts moonscan MOONSCAN.ndjson
    bench_scripts.py facts nmap NMAP.xml
    bench_scripts.py coverage DIR
    bench_scripts.py plugrate MOONSCAN.ndjson TIME_V
    bench_scripts.py names MOONSCAN.txt NMAP.txt NMAP.time

In: moonscan -oJ output (NDJSON), nmap -oX output, -oN text reports, the
stderr of /usr/bin/time -v (TIME_V) or of /usr/bin/time -f "%e %M" (a .time
file: seconds, peak RSS in kB; for names its last two words), and for
coverage the DIR bench.sh filled: nmap.xml, moonscan.xml, nmap.time,
moonscan.time.
Out, on stdout:
    facts     the facts nmap's default scripts report (ssh-hostkey,
              http-title, http-server-header, ssl-cert, tls-alpn), one
              "script port: fact" line each, sorted, parsed the same way
              from both tools (moonscan: its script events; ALPN from
              tls-versions-and-alpn's data);
    coverage  the (host, port or "host", script) results of nmap and how
              many of them moonscan reports (target >= 80 %), the scripts
              only one of them reports, wall times and peak RSS; a script
              nmap says failed ("ERROR: Script execution failed") is no
              result;
    plugrate  plugin runs (finding events), open ports, errors, runs per
              second and peak RSS;
    names     reports in each -oN file and how many have the same port,
              http-title and ssl-cert lines; nmap's time and RSS.
What always holds: plugrate exits 0 only with 8,192 plugin runs; names exits
0 only with 256 moonscan reports that all match nmap's; facts and coverage
exit 0; input that does not parse raises (exit 1).
"""
import re
import xml.etree.ElementTree as ET
from collections import Counter

from bench_lib import events, peak_rss_mb, main


def facts(tool, path):
    found = set()

    # Both tools' script results as nmap writes them: the same parsing of each
    # script's output text.
    def script_facts(sid, p, out):
        if sid == "ssh-hostkey":
            for l in out.strip().splitlines():
                m = re.match(r"\s*(\d+) ([0-9a-f:]+) \((\w+)\)", l)
                if m:
                    found.add(f"ssh-hostkey {p}: {m.group(1)} {m.group(2).replace(':', '')} ({m.group(3)})")
        elif sid == "http-title":
            found.add(f"http-title {p}: {out.strip()}")
        elif sid == "http-server-header":
            found.add(f"http-server-header {p}: {out.strip()}")
        elif sid == "ssl-cert":
            m = re.search(r"commonName=([^/\n]+)", out)
            found.add(f"ssl-cert {p}: subject CN {m.group(1)}")
            m = re.search(r"Subject Alternative Name: (.*)", out)
            if m:
                found.add(f"ssl-cert {p}: SAN {m.group(1).strip()}")
            nb = re.search(r"Not valid before: *(\S+)", out).group(1)
            found.add(f"ssl-cert {p}: not before {nb}")
            na = re.search(r"Not valid after: *(\S+)", out).group(1)
            found.add(f"ssl-cert {p}: not after {na}")
        elif sid == "tls-alpn":
            found.add(f"tls-alpn {p}: {', '.join(l.strip() for l in out.strip().splitlines())}")

    if tool == "moonscan":
        for e in events(path):
            # What a plugin's run returned is a script event (its text in
            # "output"); ctx:finding calls are finding events.
            if e["type"] != "script":
                continue
            p, d = e["port"], e.get("data") or {}
            if e["plugin"] == "tls-versions-and-alpn":
                if d.get("alpn"):
                    found.add(f"tls-alpn {p}: {', '.join(d['alpn'])}")
            else:
                script_facts(e["plugin"], p, e["output"])
    else:
        for port in ET.parse(path).iter("port"):
            p = port.get("portid")
            for s in port.iter("script"):
                script_facts(s.get("id"), p, s.get("output", ""))
    for f in sorted(found):
        print(f)
    return 0


# nmap writes a script that failed as a result of its own ("ERROR: Script
# execution failed"): a failure, not a fact either tool reports.
def fact(s):
    return not s.get("output", "").startswith("ERROR: Script execution failed")


def results(path):
    out = set()
    for h in ET.parse(path).getroot().iter("host"):
        addr = h.find("address").get("addr")
        for p in h.iter("port"):
            for s in p.iter("script"):
                if fact(s):
                    out.add((addr, int(p.get("portid")), s.get("id")))
        for hs in h.iter("hostscript"):
            for s in hs.iter("script"):
                if fact(s):
                    out.add((addr, "host", s.get("id")))
    return out


def coverage(d):
    nm, ms = results(f"{d}/nmap.xml"), results(f"{d}/moonscan.xml")
    both = nm & ms
    print(f"  nmap's results: {len(nm)}; moonscan reports {len(both)} of them ({100 * len(both) / max(len(nm), 1):.0f} %,"
          f" target >= 80 %: {'met' if len(both) >= 0.8 * len(nm) else 'MISSED'}), and {len(ms - nm)} more")
    missing = Counter(k[2] for k in nm - ms)
    print("  only nmap: " + (", ".join(f"{i} x{n}" for i, n in sorted(missing.items())) or "none"))
    extra = Counter(k[2] for k in ms - nm)
    print("  only moonscan: " + (", ".join(f"{i} x{n}" for i, n in sorted(extra.items())) or "none"))
    nt, nmem = open(f"{d}/nmap.time").read().split()
    mt, mmem = open(f"{d}/moonscan.time").read().split()
    ratio = float(mt) / float(nt)
    print(f"  wall time: moonscan {float(mt):.2f} s, nmap {float(nt):.1f} s (one run each): ratio {ratio:.3f};"
          f" peak RSS moonscan {int(mmem) / 1024:.1f} MB,"
          f" nmap {int(nmem) / 1024:.1f} MB")
    return 0


def plugrate(ndjson, time_v):
    runs, end = 0, {}
    for e in events(ndjson):
        if e["type"] == "finding":
            runs += 1
        elif e["type"] == "scan_end":
            end = e
    rss = peak_rss_mb(open(time_v).read())
    el = end.get("elapsed", 0)
    print(f"  plugin runs {runs} (open ports {end.get('open')}), errors {end.get('errors')}, in {el:.2f} s: {runs / el:.0f} runs/s, peak RSS {rss:.1f} MB")
    return 0 if runs == 8192 else 1


def reports(path):
    out = {}
    for r in open(path).read().split("Nmap scan report for ")[1:]:
        head = r.splitlines()[0]
        lines = sorted(l.strip() for l in r.splitlines()
                       if re.match(r"^\|[_ ]?(http-title|ssl-cert): ", l) or re.match(r"^\d+/tcp ", l))
        out[head] = lines
    return out


def names(ours_path, theirs_path, nmap_time):
    ours, theirs = reports(ours_path), reports(theirs_path)
    same = sum(1 for h in ours if theirs.get(h) == ours[h])
    wall, rss = open(nmap_time).read().split()[-2:]
    print(f"  reports: moonscan {len(ours)}, nmap {len(theirs)}; the same ports, services, title and certificate line: {same} of {len(theirs)}")
    print(f"  nmap by name: {float(wall):.1f} s, {int(rss) / 1024:.1f} MB")
    return 0 if len(ours) == 256 and same == len(theirs) else 1


COMMANDS = {"facts": facts, "coverage": coverage, "plugrate": plugrate, "names": names}

if __name__ == "__main__":
    main(COMMANDS)
