#!/usr/bin/env python3
"""Wall times of scripts/bench.sh's jobs, as its report prints them.

    bench_times.py medians HYPERFINE.json [NAME=MAX...]
    bench_times.py fastest HYPERFINE.json
    bench_times.py db HYPERFINE.json JOB
    bench_times.py wan LIMIT NMAP_SECONDS MOONSCAN_SECONDS...

In: a hyperfine --export-json file (its "results", in the order of the
commands given), or seconds bench-wan.sh measured.
Out, on stdout:
    medians  one line per command (median, min, max, runs), then the ratio
             of the first command's median to each other's; a NAME=MAX
             argument adds the target moonscan/NAME <= MAX, met or MISSED
             (only when the first command is named "moonscan");
    fastest  moonscan (the first command) against the fastest of the others,
             target <= 0.20;
    db       the medians of the commands named "without" and "with" (--db)
             and their ratio; for JOB "syn" the target < 1.10;
    wan      the median of moonscan's seconds against the path's LIMIT
             (65,535 probes / its rate) and against nmap's time (NMAP_SECONDS
             with a leading ">" when nmap was cut: the ratio is then an upper
             bound; empty when nmap gave no time).
What always holds: a ratio is first/other; exit status 0 (a target missed is
reported, not an error); input that does not parse raises (exit 1).
"""
import json
import statistics

from bench_lib import main


def medians(path, *target_args):
    res = json.load(open(path))["results"]
    targets = dict(a.split("=", 1) for a in target_args)
    base = res[0]
    for r in res:
        print(f"  {r['command']:<10} median {r['median']:.3f} s  (min {r['min']:.3f}, max {r['max']:.3f}, {len(r['times'])} runs)")
    for r in res[1:]:
        ratio = base['median'] / r['median']
        line = f"  ratio {base['command']}/{r['command']}: {ratio:.2f}x"
        if base['command'] == "moonscan" and r['command'] in targets:
            t = float(targets[r['command']])
            line += f"  (target <= {t:.2f}: {'met' if ratio <= t else 'MISSED'})"
        print(line)


def fastest(path):
    r = json.load(open(path))['results']
    m = r[0]['median']
    f = min(x['median'] for x in r[1:])
    print(f'  moonscan / fastest other: {m/f:.2f}x (target <= 0.20: ' + ('met' if m/f <= 0.2 else 'MISSED') + ')')


def db(path, job):
    r = {x["command"]: x for x in json.load(open(path))["results"]}
    a, b = r["without"]["median"], r["with"]["median"]
    verdict = f" (target < 1.10: {'met' if b / a < 1.10 else 'MISSED'})" if job == "syn" else ""
    print(f"    without --db {a:.3f} s, with --db {b:.3f} s: ratio {b / a:.2f}x{verdict}")


def wan(limit, nmap_seconds, *seconds):
    limit, nmap = float(limit), nmap_seconds.lstrip(">")
    ms = statistics.median(float(t) for t in seconds)
    line = f"    moonscan median {ms:.2f} s = {ms / limit:.2f}x the path's limit"
    if nmap:
        line += f"; moonscan/nmap {ms / float(nmap):.3f}x" + (" (at most: nmap was cut)" if nmap_seconds.startswith(">") else "")
    print(line)


COMMANDS = {"medians": medians, "fastest": fastest, "db": db, "wan": wan}

if __name__ == "__main__":
    main(COMMANDS)
