#!/usr/bin/env bash
# Side-by-side benchmarks in the lab: moonscan and the tools it must beat,
# on the same job, in the same run, timed by hyperfine (medians), with what
# each tool found and its peak memory. Reports go to target/bench/.
#
# Usage: scripts/bench.sh [JOB...]      jobs: connect (default: all)
#        RUNS=N scripts/bench.sh        timed runs per tool (default 10)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPO=$(pwd)
RUNS=${RUNS:-10}
OUT=$REPO/target/bench
MS=$REPO/target/release/moonscan

[ "$(id -u)" -eq 0 ] || { echo "bench.sh: run as root (the lab needs network namespaces)" >&2; exit 1; }

install() {
    local missing=()
    command -v hyperfine >/dev/null || missing+=(hyperfine)
    command -v nmap >/dev/null || missing+=(nmap)
    command -v masscan >/dev/null || missing+=(masscan)
    command -v zmap >/dev/null || missing+=(zmap)
    test -x /usr/bin/time || missing+=(time)
    [ ${#missing[@]} -eq 0 ] && return 0
    apt=(apt-get -y -q -o DPkg::Lock::Timeout=300)
    DEBIAN_FRONTEND=noninteractive "${apt[@]}" update >&2
    DEBIAN_FRONTEND=noninteractive "${apt[@]}" install "${missing[@]}" >&2
}

in_lab() { ip netns exec msscan "$@"; }

# Open ports each tool reports for one run of its command.
found_moonscan() { in_lab "$MS" "$@" -oJ - | grep -c '"state":"open"' || true; }
found_nmap() { in_lab nmap "$@" -oG - | grep -o '[0-9]*/open/' | wc -l; }

# Peak RSS in MB of one run.
peak_rss() {
    in_lab /usr/bin/time -v "$@" 2>&1 >/dev/null | awk '/Maximum resident set size/ {printf "%.1f", $6/1024}'
}

# Medians from a hyperfine JSON export, and the ratio of the first to each other.
summarize() {
    python3 - "$1" <<'PY'
import json, sys
res = json.load(open(sys.argv[1]))["results"]
base = res[0]
for r in res:
    print(f"  {r['command']:<10} median {r['median']:.3f} s  (min {r['min']:.3f}, max {r['max']:.3f}, {len(r['times'])} runs)")
for r in res[1:]:
    print(f"  ratio {base['command']}/{r['command']}: {base['median'] / r['median']:.2f}x")
PY
}

job_connect() {
    local target=198.18.0.2
    local ms=("$MS" -sT -n -p- "$target")
    local nm=(nmap -n -Pn -sT -p- -T4 "$target")
    echo "== connect scan, 1 host, all ports: moonscan -sT -p- vs nmap -sT -p- -T4"
    local i counts=()
    for ((i = 0; i < RUNS; i++)); do counts+=("$(found_moonscan -sT -n -p- "$target")"); done
    echo "  found: moonscan ${counts[*]} (of 4, each run); nmap $(found_nmap -n -Pn -sT -p- -T4 "$target") (of 4)"
    echo "  peak RSS: moonscan $(peak_rss "${ms[@]}") MB, nmap $(peak_rss "${nm[@]}") MB"
    in_lab hyperfine -N -w 2 -r "$RUNS" --export-json "$OUT/connect.json" \
        -n moonscan "${ms[*]}" -n nmap "${nm[*]}" >"$OUT/connect.txt"
    summarize "$OUT/connect.json"
}

main() {
    install
    bash scripts/lab.sh up
    cargo build --release --quiet
    mkdir -p "$OUT"
    local jobs=("$@")
    [ ${#jobs[@]} -gt 0 ] || jobs=(connect)
    local j
    for j in "${jobs[@]}"; do
        declare -F "job_$j" >/dev/null || { echo "bench.sh: unknown job '$j'" >&2; exit 2; }
        "job_$j"
    done
}

main "$@"
