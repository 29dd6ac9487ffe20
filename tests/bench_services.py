#!/usr/bin/env python3
"""Service detection (-sV) in scripts/bench.sh's jobs service, svcmem and daemons.

    bench_services.py versions moonscan MOONSCAN.ndjson
    bench_services.py versions nmap NMAP.xml
    bench_services.py svcmem MOONSCAN.ndjson TIME_V
    bench_services.py daemons DIR

In: moonscan -oJ output (NDJSON), nmap -oX output, the stderr of
/usr/bin/time -v (TIME_V), and for daemons the DIR bench.sh filled:
compare.ndjson (tests/sv_compare.py's lines), nmap.time and moonscan.time
(/usr/bin/time -f "%e %M": seconds, peak RSS in kB), moonscan.json (a
hyperfine export, moonscan's runs) and moonscan.ndjson (its first run).
Out, on stdout:
    versions  one "port service | product | version" line per detected
              service, "ssl/" before the service when it is tunnelled, in the
              file's order (bench.sh sorts them with sort -n and compares
              moonscan's with nmap's);
    svcmem    open ports, service events and errors; one line per distinct
              (port, tunnel, service, product, version) with its count; wall
              time and peak RSS against the target < 40 MB;
    daemons   every port sv_compare.py did not judge "equal", the verdict
              counts, ports identified by each against the target (moonscan >=
              nmap), wall times and their ratio (target <= 0.05), peak RSS,
              and the three slowest ports of moonscan's first run (its service
              event after its open port event; target < 8 s).
What always holds: svcmem exits 0 only if the RSS target is met and there
were 8,192 service events, else 1; versions and daemons exit 0; input that
does not parse raises (exit 1).
"""
import collections
import json
import re
import xml.etree.ElementTree as ET

from bench_lib import events, peak_rss_mb, main


def versions(tool, path):
    if tool == "moonscan":
        for e in events(path):
            if e["type"] == "service":
                tunnel = "ssl/" if e.get("tunnel") else ""
                print(e["port"], tunnel + e["service"], "|", e.get("product", ""), "|", e.get("version", ""))
        return 0
    for p in ET.parse(path).iter("port"):
        s = p.find("service")
        if s is None:
            continue
        tunnel = "ssl/" if s.get("tunnel") else ""
        print(p.get("portid"), tunnel + s.get("name", ""), "|", s.get("product", ""), "|", s.get("version", ""))
    return 0


def svcmem(ndjson, time_v):
    svc = collections.Counter()
    end = {}
    for e in events(ndjson):
        if e["type"] == "service":
            svc[(e["port"], e.get("tunnel", ""), e["service"], e.get("product", ""), e.get("version", ""))] += 1
        elif e["type"] == "scan_end":
            end = e
    t = open(time_v).read()
    rss = peak_rss_mb(t)
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", t).group(1)
    print(f"  open ports {end.get('open')}, service events {sum(svc.values())}, errors {end.get('errors')}")
    for k, n in sorted(svc.items()):
        print(f"    {n:5d} x port {k[0]} {k[1] + '/' if k[1] else ''}{k[2]} {k[3]} {k[4]}")
    print(f"  wall {wall} (scan_end elapsed {end.get('elapsed', 0):.2f} s), peak RSS {rss:.1f} MB (target < 40: {'met' if rss < 40 else 'MISSED'})")
    return 0 if rss < 40 and sum(svc.values()) == 8192 else 1


def daemons(d):
    rows = [json.loads(l) for l in open(f"{d}/compare.ndjson")]
    summary = rows.pop()
    for r in rows:
        if r["verdict"] != "equal":
            said = lambda s: " ".join(x for x in (s["name"], s["product"], s["version"]) if x) or "-"
            print(f"    {r['verdict']:<9} {r['addr']}:{r['port']:<5} nmap: {said(r['nmap']):<40} moonscan: {said(r['moonscan'])}")
    v = summary["summary"]
    print(f"  verdicts: {', '.join(f'{k} {n}' for k, n in sorted(v.items()))}")
    print(f"  identified: nmap {summary['nmap_identified']}, moonscan {summary['moonscan_identified']}"
          f" (target >= nmap's: {'met' if summary['moonscan_identified'] >= summary['nmap_identified'] else 'MISSED'});"
          f" named as nmap names them: {v.get('equal', 0) + v.get('named', 0)} of {summary['nmap_identified']}")
    nt, nm = open(f"{d}/nmap.time").read().split()
    mt, mm = open(f"{d}/moonscan.time").read().split()
    timed = json.load(open(f"{d}/moonscan.json"))["results"][0]
    med = timed["median"]
    ratio = med / float(nt)
    print(f"  wall time: moonscan median {med:.2f} s ({len(timed['times'])} runs; first run {float(mt):.2f} s), nmap {float(nt):.1f} s (one run)")
    print(f"  ratio moonscan/nmap: {ratio:.3f} = 1/{1 / ratio:.0f} (target <= 0.05: {'met' if ratio <= 0.05 else 'MISSED'})")
    print(f"  peak RSS: moonscan {int(mm) / 1024:.1f} MB, nmap {int(nm) / 1024:.1f} MB")
    # Each port's detection time: its service event after its open port event.
    opened, took = {}, []
    for e in events(f"{d}/moonscan.ndjson"):
        key = (e.get("ip"), e.get("port"))
        if e["type"] == "port" and e.get("state") == "open":
            opened[key] = e["t"]
        elif e["type"] == "service" and key in opened:
            took.append((e["t"] - opened[key], f"{key[0]}:{key[1]} {e.get('service')}"))
    took.sort(reverse=True)
    slow = ", ".join(f"{p} {t:.2f} s" for t, p in took[:3])
    print(f"  slowest ports (first run): {slow} (target: slowest < 8 s: {'met' if took and took[0][0] < 8 else 'MISSED'})")
    return 0


COMMANDS = {"versions": versions, "svcmem": svcmem, "daemons": daemons}

if __name__ == "__main__":
    main(COMMANDS)
