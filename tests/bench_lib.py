"""What the bench_*.py reports of scripts/bench.sh share (imported, not run).

In: a moonscan -oJ file (NDJSON, one event per line) or the stderr of
/usr/bin/time -v; a report's command line. Out: the events one by one,
the peak RSS in MB, the report named on the command line run.
What always holds: nothing is printed here; a file that does not parse
raises (the caller's job is then incomplete, as with bench.sh's inline
Python before).
"""
import json
import os
import re
import sys


def events(path):
    """Each event of a moonscan NDJSON file, in order."""
    for line in open(path):
        yield json.loads(line)


def peak_rss_mb(time_v):
    """The peak RSS in MB from /usr/bin/time -v's text."""
    return int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", time_v).group(1)) / 1024


def main(commands):
    """Runs the report the command line names (`FILE.py NAME ARGS...`) with
    its arguments; its return value is the exit status."""
    if len(sys.argv) < 3 or sys.argv[1] not in commands:
        name = os.path.basename(sys.argv[0])
        sys.exit(f"usage: {name} {'|'.join(commands)} ARGS... (see its header)")
    sys.exit(commands[sys.argv[1]](*sys.argv[2:]))
