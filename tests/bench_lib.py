"""What the bench_*.py reports of scripts/bench.sh share (imported, not run).

In: a moonscan -oJ file (NDJSON, one event per line) or the stderr of
/usr/bin/time -v. Out: the events one by one, the peak RSS in MB.
What always holds: nothing is printed here; a file that does not parse
raises (the caller's job is then incomplete, as with bench.sh's inline
Python before).
"""
import json
import re


def events(path):
    """Each event of a moonscan NDJSON file, in order."""
    for line in open(path):
        yield json.loads(line)


def peak_rss_mb(time_v):
    """The peak RSS in MB from /usr/bin/time -v's text."""
    return int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", time_v).group(1)) / 1024
