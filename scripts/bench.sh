#!/usr/bin/env bash
# Side-by-side benchmarks in the lab: moonscan and the tools it must beat,
# on the same job, in the same run, timed by hyperfine (medians), with what
# each tool found and its peak memory. Reports go to target/bench/.
#
#   connect  connect scan, 1 host, all ports:    moonscan -sT vs nmap -sT -T4
#   syn      SYN scan, 1 host, all ports:        moonscan -sS vs nmap -sS -T4
#            (target: moonscan/nmap <= 0.5)
#   sweep    SYN sweep, 198.19.0.0/16 x port 80: moonscan -sS vs zmap, masscan
#            (target: moonscan time <= zmap's, found >= 99.99 %)
#   service  -sV, 1 host, the 4 lab services:   moonscan -sV vs nmap -sV
#            (target: moonscan/nmap <= 0.1, same product/version on all 4)
#   svcmem   -sV -p 80,443 over 198.19.0.0/20 (8,192 open ports): wall time,
#            services found, peak RSS (target: under 40 MB)
#   scripts  -sV -sC, the 4 lab services:        moonscan -sV -sC vs nmap -sV -sC
#            (target: moonscan/nmap <= 0.15, the same facts as nmap's default scripts)
#   plugrate a trivial plugin on the 8,192 open ports of 198.19.0.0/20 x {80,443}:
#            plugin runs per second and peak RSS
#   db       --db overhead: -sS -p- 198.18.0.2 and the /16 sweep with and
#            without --db FILE (target for -sS -p-: with/without < 1.10), db size per open port
#   nmapdb   nmap's own probe file through `probes import`: import time, load
#            time and peak RSS, and -sV on the 8 lab services of 198.18.0.2/.3
#            with moonscan's database, with the imported one, and nmap -sV
#   daemons  -sV on every port of the lab's daemon zoo (scripts/lab-daemons.sh)
#            and its core services against nmap -sV on the same ports: ports
#            each identifies (tests/sv_compare.py verdicts), wall time, ratio
#            (target: as many identified as nmap, moonscan/nmap <= 0.05).
#            nmap takes about 3 minutes: timed once, moonscan RUNS times
#   coverage -sV -sC on the same daemons and 198.18.0.2: the (host, port,
#            script) results nmap reports, how many moonscan reports too,
#            and those only moonscan reports; both timed once (target: at
#            least 80 % of nmap's results)
#   udp      -sU --top-ports 100 198.18.0.2 (ICMP not rate-limited): moonscan
#            -sU vs nmap -sU -T4 given the same 100 ports (moonscan's top-ports
#            table is its own, not nmap's): times, ratio, each port's state in
#            both (target: moonscan/nmap <= 0.5, the same states)
#   udprate  the same on 198.18.1.2, whose kernel keeps Linux's default ICMP
#            rate limit: both tools' times and states, each timed once
#            (target: every port nmap finds open, moonscan finds open)
#   ping     host discovery sweep, 198.19.0.0/16 (every address up): moonscan
#            -sn vs zmap --probe-module=icmp_echoscan (both RUNS times) and
#            nmap -sn (timed once): hosts found, times, ratios
#            (target: >= 99.99 % of hosts, moonscan time <= zmap's)
#   discover default scan (host discovery on) of
#            198.18.2.0/24, where 8 hosts are up, on moonscan's top 1000
#            ports given to both: moonscan vs nmap -T3 default (target:
#            moonscan/nmap <= 0.5, the same hosts and open ports)
#   sslenum  --script ssl-enum-ciphers on the lab's nginx 443 (198.18.0.2) and
#            the legacy TLS servers (198.18.0.7, .9, .10, .11): moonscan vs
#            sslscan and nmap --script ssl-enum-ciphers (hyperfine), and
#            testssl.sh -p -E (timed once: it takes seconds); whether each
#            finds the same versions and suites as moonscan
#            (target: moonscan <= 0.2x the fastest of them)
#   tlssv    -sV -p 443 over 198.19.0.0/19 (8,192 TLS ports), then -p 10443
#            (the lab's TLS 1.0-only server on the same 8,192 addresses):
#            certificates read per second and peak RSS, against
#            BASELINE=PATH if given (an older moonscan: the figure before)
#   baseline every job's moonscan command, this build against an older
#            moonscan binary given as BASELINE=PATH, side by side in one
#            hyperfine run per job (target: now/then <= 1.05); not in the default list
#   names    -sV -sC -p 80,443 of 256 names over 64 addresses (198.19.0.1-64,
#            four names each, from a hosts file mounted over msscan's) vs the
#            same scan of 256 addresses (198.19.0.1-198.19.1.0): what names
#            cost (target: names/addresses <= 1.05); nmap -sV -sC of the 256
#            names once, and each name's report (title, certificate) compared
#            with nmap's; not in the default list
#   os       -O of one host (198.18.0.2, default ports) and of 32 hosts (the
#            lab's four OS personalities, msrate, the 8 live hosts of
#            198.18.2.0/24, 198.19.0.1-19): moonscan -O vs nmap -O, wall
#            times, ratios and each host's best match in both
#            (target: the same best match on every host, moonscan/nmap <= 0.2
#            for one host and <= 0.05 for 32); RUNS_OS runs each (default 3)
#   wan, wansweep  across the lab's WAN: see scripts/bench-wan.sh
#
# A job that cannot run a tool (a missing engine, a failed run) says why and
# still runs the other tools; the script goes on with the next job and exits
# 1 at the end if any job was incomplete.
#
# Usage: scripts/bench.sh [JOB...]      jobs: connect syn sweep service svcmem scripts plugrate db nmapdb daemons coverage udp udprate ping discover sslenum tlssv os names wan wansweep (default: all but names)
#        scripts/bench.sh --help        list the jobs
#        RUNS=N scripts/bench.sh        timed runs per tool (default 10)
#        MS=PATH scripts/bench.sh       benchmark that moonscan binary (no build)
#        BASELINE=PATH scripts/bench.sh baseline
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPO=$(pwd)
RUNS=${RUNS:-10}
OUT=$REPO/target/bench
BUILD=1
[ -n "${MS:-}" ] && BUILD=0
MS=${MS:-$(scripts/cargo-target-dir.sh)/release/moonscan}
JOBS=(connect syn sweep service svcmem scripts plugrate db nmapdb daemons coverage udp udprate ping discover sslenum tlssv os wan wansweep)
SWEEP_HOSTS=65536 # 198.19.0.0/16, every address answers on port 80
# The lab's addresses: SCAN_ADDR, TARGET and PORTS, TARGET2, RATE, LIVE8, OS_TARGETS, WAN_*.
# shellcheck source=scripts/lab-targets.sh
. "$REPO/scripts/lab-targets.sh"
TARGET_PORTS=$(IFS=,; echo "${PORTS[*]}") # 22,80,443,6379
# shellcheck source=scripts/bench-wan.sh
. "$REPO/scripts/bench-wan.sh"

usage() {
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
}

install() {
    local missing=()
    command -v hyperfine >/dev/null || missing+=(hyperfine)
    command -v nmap >/dev/null || missing+=(nmap)
    command -v masscan >/dev/null || missing+=(masscan)
    command -v zmap >/dev/null || missing+=(zmap)
    command -v sslscan >/dev/null || missing+=(sslscan)
    command -v testssl >/dev/null || missing+=(testssl.sh)
    test -x /usr/bin/time || missing+=(time)
    [ ${#missing[@]} -eq 0 ] && return 0
    apt=(env DEBIAN_FRONTEND=noninteractive apt-get -y -q -o DPkg::Lock::Timeout=300)
    "${apt[@]}" update >&2 && "${apt[@]}" install "${missing[@]}" >&2
}

in_lab() { ip netns exec msscan "$@"; }

# One of the reports' Python beside tests/sv_compare.py: tests/bench_NAME.py
# (its header says what it reads and prints). -B: no __pycache__ in tests/.
bench_py() { # name command args...
    python3 -B "$REPO/tests/bench_$1.py" "${@:2}"
}

# Run one command in the lab with stdout to FILE. If it fails, say so with its
# exit status and the last line of its stderr, and return 1.
attempt() { # job label file cmd...
    local job=$1 label=$2 file=$3 rc=0 err
    shift 3
    err=$OUT/$job.${label%% *}.err
    in_lab "$@" >"$file" 2>"$err" || rc=$?
    [ "$rc" -eq 0 ] && return 0
    echo "  job $job: $label failed (exit $rc): $(tr '\r' '\n' <"$err" | grep -v '^[[:space:]]*$' | tail -n 1)"
    return 1
}

# Open ports moonscan reports in each of RUNS runs, into the array COUNTS
# (-oJ lines with "state":"open"). Returns 1 as soon as a run fails.
moonscan_counts() { # job label args...
    local job=$1 label=$2 i
    shift 2
    COUNTS=()
    for ((i = 0; i < RUNS; i++)); do
        attempt "$job" "$label" "$OUT/$job.moonscan.ndjson" "$MS" "$@" -oJ - || return 1
        COUNTS+=("$(grep -c '"state":"open"' "$OUT/$job.moonscan.ndjson" || true)")
    done
}

found_nmap() { in_lab nmap "$@" -oG - | grep -o '[0-9]*/open/' | wc -l; }

# Distinct addresses in a zmap output file (one per line) or a masscan -oL file.
found_zmap() { sort -u "$1" | grep -c . || true; }
found_masscan() { awk '$1 == "open" { print $4 }' "$1" | sort -u | wc -l; }

# "N (P %)" of the SWEEP_HOSTS hosts of the sweep.
of_sweep() { awk -v n="$1" -v all="$SWEEP_HOSTS" 'BEGIN { printf "%d (%.3f %%)", n, n * 100 / all }'; }

# Peak RSS in MB of one run.
peak_rss() {
    in_lab /usr/bin/time -v "$@" 2>&1 >/dev/null | awk '/Maximum resident set size/ {printf "%.1f", $6/1024}'
}

# Medians from a hyperfine JSON export, and the ratio of the first to each other.
# A NAME=MAX argument states the target ratio moonscan/NAME <= MAX.
summarize() { # json [name=max...]
    bench_py times medians "$@"
}

# Time NAME CMD pairs with hyperfine in the lab (-N: the commands have no
# shell constructs), report to $OUT/JOB.{json,txt}, print the summary.
bench() { # job "name=max..." name cmd [name cmd...]
    local job=$1 targets=$2 args=()
    shift 2
    while [ $# -gt 0 ]; do
        args+=(-n "$1" "$2")
        shift 2
    done
    in_lab hyperfine -N -w 2 -r "$RUNS" --export-json "$OUT/$job.json" "${args[@]}" >"$OUT/$job.txt"
    # shellcheck disable=SC2086 # targets is a list of words
    summarize "$OUT/$job.json" $targets
}

# One host, all ports: moonscan FLAG vs nmap FLAG -T4, found ports, peak RSS, times.
one_host_vs_nmap() { # job flag title targets
    local job=$1 flag=$2 title=$3 targets=$4 target=$TARGET
    local ms=("$MS" "$flag" -n -Pn -p- "$target")
    local nm=(nmap -n -Pn "$flag" -p- -T4 "$target")
    local ok=1 timed=()
    echo "== $title"
    moonscan_counts "$job" "moonscan $flag" "$flag" -n -Pn -p- "$target" || ok=0
    if ((ok)); then
        echo "  found: moonscan ${COUNTS[*]} (of 4, each run); nmap $(found_nmap -n -Pn "$flag" -p- -T4 "$target") (of 4)"
        echo "  peak RSS: moonscan $(peak_rss "${ms[@]}") MB, nmap $(peak_rss "${nm[@]}") MB"
        timed+=(moonscan "${ms[*]}")
    else
        echo "  found: nmap $(found_nmap -n -Pn "$flag" -p- -T4 "$target") (of 4)"
        echo "  peak RSS: nmap $(peak_rss "${nm[@]}") MB"
    fi
    bench "$job" "$targets" "${timed[@]}" nmap "${nm[*]}"
    ((ok))
}

job_connect() {
    one_host_vs_nmap connect -sT "connect scan, 1 host, all ports: moonscan -sT -p- vs nmap -sT -p- -T4" ""
}

job_syn() {
    one_host_vs_nmap syn -sS \
        "SYN scan, 1 host, all ports: moonscan -sS -p- vs nmap -sS -p- -T4 (target: moonscan/nmap <= 0.5)" "nmap=0.5"
}

# masscan 1.3.2 with libpcap 1.10 (TPACKET_V3): its receive thread sits in
# pcap until a packet reaches the interface, so on the quiet lab link it may
# notice the end of the scan only much later (2.4 s to 37 s for the same
# sweep, "waiting -N-secs"). The wrapper keeps a packet going every 50 ms
# while the command runs: UDP to a closed port of 198.18.0.2, which answers
# with ICMP port unreachable. The sweep then takes 2.4 to 3 s every time.
write_poke_wrapper() {
    cat >"$OUT/with-poke.sh" <<'SH'
#!/usr/bin/env bash
# Run "$@" while sending one UDP packet to 198.18.0.2:9 every 50 ms (see bench.sh).
(exec 3>/dev/udp/198.18.0.2/9 && while sleep 0.05; do echo >&3; done) 2>/dev/null &
poker=$!
rc=0
"$@" || rc=$?
kill "$poker"
exit "$rc"
SH
}

job_sweep() {
    local net=198.19.0.0/16 mac n verdict ok=1 timed=() found=() rss=()
    # Next hop of 198.19.0.0/16 from msscan: the target end of the veth.
    mac=$(ip -n mstarget -br link show ms-tgt0 | awk '{print $3}')
    # zmap's default blocklist (/etc/zmap/blacklist.conf) excludes 198.18.0.0/15,
    # the lab's whole range: give it an empty one. It only scans $net anyway.
    : >"$OUT/zmap-blocklist.conf"
    write_poke_wrapper
    local ms=("$MS" -sS -n -Pn -p 80 "$net")
    # -r 0: no rate limit (the default is 10,000 pps; -B 10G overflows to
    # 1.4 Gbit/s in zmap 2.1.1). -c 1: wait 1 s for late answers, not 8.
    local zm=(zmap -p 80 "$net" -i ms-scan0 -S "$SCAN_ADDR" -G "$mac" -b "$OUT/zmap-blocklist.conf"
        -r 0 -c 1 -q --disable-syslog -o "$OUT/sweep.zmap.txt")
    local mc=(bash "$OUT/with-poke.sh" masscan "$net" -p80 --rate 1000000 -e ms-scan0
        --adapter-ip "$SCAN_ADDR" --router-mac "$mac" --wait 1 -oL "$OUT/sweep.masscan.txt")
    echo "== SYN sweep, $SWEEP_HOSTS hosts x port 80: moonscan -sS vs zmap -r 0, masscan --rate 1000000"
    echo "   (target: moonscan time <= zmap's, found >= 99.99 %)"
    echo "  note: masscan runs with --wait 1 instead of its default 10 (zmap with -c 1 instead of 8)"
    if moonscan_counts sweep "moonscan -sS" -sS -n -Pn -p 80 "$net"; then
        n=$(printf '%s\n' "${COUNTS[@]}" | sort -n | head -n 1)
        verdict=$(awk -v n="$n" -v all="$SWEEP_HOSTS" 'BEGIN { print (n * 100 / all >= 99.99 ? "met" : "MISSED") }')
        found+=("moonscan min $(of_sweep "$n"), each run: ${COUNTS[*]}  (target >= 99.99 %: $verdict)")
        rss+=("moonscan $(peak_rss "${ms[@]}") MB")
        timed+=(moonscan "${ms[*]}")
    else
        ok=0
    fi
    if attempt sweep zmap /dev/null "${zm[@]}"; then
        found+=("zmap $(of_sweep "$(found_zmap "$OUT/sweep.zmap.txt")")")
        rss+=("zmap $(peak_rss "${zm[@]}") MB")
        timed+=(zmap "${zm[*]}")
    else
        ok=0
    fi
    if attempt sweep masscan /dev/null "${mc[@]}"; then
        found+=("masscan $(of_sweep "$(found_masscan "$OUT/sweep.masscan.txt")")")
        rss+=("masscan $(peak_rss "${mc[@]}") MB")
        timed+=(masscan "${mc[*]}")
    else
        ok=0
    fi
    local f
    echo "  found (hosts with port 80 open):"
    for f in "${found[@]}"; do echo "    $f"; done
    printf '  peak RSS: %s\n' "$(printf '%s, ' "${rss[@]}" | sed 's/, $//')"
    [ ${#timed[@]} -eq 0 ] || bench sweep "zmap=1" "${timed[@]}"
    ((ok))
}

# "port service product version" lines from moonscan NDJSON or nmap XML.
versions_moonscan() {
    bench_py services versions moonscan "$1" | sort -n
}
versions_nmap() {
    bench_py services versions nmap "$1" | sort -n
}

job_service() {
    local target=$TARGET ports=$TARGET_PORTS ok=1 timed=()
    local ms=("$MS" -sV -n -Pn -p "$ports" "$target")
    local nm=(nmap -n -Pn -sV -p "$ports" "$target")
    echo "== service detection, 4 lab services: moonscan -sV vs nmap -n -Pn -sV (target: moonscan/nmap <= 0.1)"
    if attempt service "moonscan -sV" "$OUT/service.moonscan.ndjson" "${ms[@]}" -oJ -; then
        versions_moonscan "$OUT/service.moonscan.ndjson" >"$OUT/service.moonscan.txt"
        timed+=(moonscan "${ms[*]}")
    else
        ok=0
    fi
    attempt service "nmap -sV" /dev/null "${nm[@]}" -oX "$OUT/service.nmap.xml" || ok=0
    versions_nmap "$OUT/service.nmap.xml" >"$OUT/service.nmap.txt" || ok=0
    echo "  moonscan found:"
    sed 's/^/    /' "$OUT/service.moonscan.txt"
    echo "  nmap found:"
    sed 's/^/    /' "$OUT/service.nmap.txt"
    if cmp -s "$OUT/service.moonscan.txt" "$OUT/service.nmap.txt"; then
        echo "  same service/product/version on all ports: yes"
    else
        echo "  same service/product/version on all ports: NO"
        ok=0
    fi
    echo "  peak RSS: moonscan $(peak_rss "${ms[@]}") MB, nmap $(peak_rss "${nm[@]}") MB"
    bench service "nmap=0.1" "${timed[@]}" nmap "${nm[*]}"
    ((ok))
}

# A command in msscan with $OUT/names.hosts over /etc/hosts (a mount
# namespace of its own: msscan's hosts file is left as it is).
with_names() { echo "unshare -m sh -c 'mount --bind $OUT/names.hosts /etc/hosts && exec \"\$@\"' sh $*"; }

job_names() {
    local i k line ok=1 runs=${NAMES_RUNS:-5}
    cp /etc/netns/msscan/hosts "$OUT/names.hosts"
    : >"$OUT/names.list"
    for i in $(seq 1 64); do
        line="198.19.0.$i"
        for k in 1 2 3 4; do
            line="$line n$k-a$i.bench.lab.moonscan.test"
            echo "n$k-a$i.bench.lab.moonscan.test" >>"$OUT/names.list"
        done
        echo "$line" >>"$OUT/names.hosts"
    done
    local by_name by_addr nm
    by_name=$(with_names "$MS" -Pn -sV -sC -p 80,443 -iL "$OUT/names.list")
    by_addr=$(with_names "$MS" -Pn -sV -sC -p 80,443 198.19.0.1-198.19.1.0)
    nm=$(with_names nmap -Pn -sV -sC -p 80,443 -iL "$OUT/names.list")
    echo "== -sV -sC -p 80,443: 256 names over 64 addresses vs 256 addresses (target: names/addresses <= 1.05), nmap by name once"
    in_lab sh -c "$by_name -oN $OUT/names.moonscan.txt" >/dev/null 2>"$OUT/names.moonscan.err" || ok=0
    in_lab /usr/bin/time -f "%e %M" sh -c "$nm -oN $OUT/names.nmap.txt" >/dev/null 2>"$OUT/names.nmap.time" || ok=0
    bench_py scripts names "$OUT/names.moonscan.txt" "$OUT/names.nmap.txt" "$OUT/names.nmap.time" || ok=0
    RUNS=$runs bench names "by-address=1.05" by-name "$by_name" by-address "$by_addr"
    ((ok))
}

job_svcmem() {
    local net=198.19.0.0/20
    local ms=("$MS" -sV -n -Pn -p 80,443 "$net")
    echo "== service detection across $net x {80,443} (8,192 open ports): time and peak RSS (target: RSS < 40 MB)"
    in_lab /usr/bin/time -v "${ms[@]}" -oJ "$OUT/svcmem.ndjson" >/dev/null 2>"$OUT/svcmem.time"
    bench_py services svcmem "$OUT/svcmem.ndjson" "$OUT/svcmem.time"
}

# The facts nmap's default scripts report on the lab, from moonscan NDJSON
# (script events: what the plugins returned) or nmap XML (script output),
# one "fact: value" line each.
facts() { # moonscan|nmap file
    bench_py scripts facts "$1" "$2"
}

job_scripts() {
    local target=$TARGET ports=$TARGET_PORTS ok=1 timed=()
    local ms=("$MS" -sV -sC -n -Pn -p "$ports" "$target")
    local nm=(nmap -n -Pn -sV -sC -p "$ports" "$target")
    echo "== -sV -sC, 4 lab services: moonscan vs nmap (target: moonscan/nmap <= 0.15, the same facts)"
    if attempt scripts "moonscan -sV -sC" "$OUT/scripts.moonscan.ndjson" "${ms[@]}" -oJ -; then
        facts moonscan "$OUT/scripts.moonscan.ndjson" >"$OUT/scripts.moonscan.txt"
        timed+=(moonscan "${ms[*]}")
    else
        ok=0
    fi
    attempt scripts "nmap -sV -sC" /dev/null "${nm[@]}" -oX "$OUT/scripts.nmap.xml" || ok=0
    facts nmap "$OUT/scripts.nmap.xml" >"$OUT/scripts.nmap.txt" || ok=0
    echo "  facts nmap's default scripts report, and whether moonscan reports the same:"
    local f
    while IFS= read -r f; do
        if grep -qxF "$f" "$OUT/scripts.moonscan.txt"; then echo "    same: $f"; else echo "    MISSING in moonscan: $f"; ok=0; fi
    done <"$OUT/scripts.nmap.txt"
    echo "  moonscan findings in all: $(grep -c '"type":"finding"' "$OUT/scripts.moonscan.ndjson" || true)," \
        "script results: $(grep -c '"type":"script"' "$OUT/scripts.moonscan.ndjson" || true)"
    echo "  peak RSS: moonscan $(peak_rss "${ms[@]}") MB, nmap $(peak_rss "${nm[@]}") MB"
    bench scripts "nmap=0.15" "${timed[@]}" nmap "${nm[*]}"
    ((ok))
}

# The plugin of the plugrate job: one finding per port, nothing else.
trivial_plugin() {
    cat >"$OUT/trivial.lua" <<'LUA'
return {
  id = "trivial", description = "One finding per port, nothing else.", categories = { "bench" },
  ports = { 80, 443 },
  run = function(ctx) ctx:finding{ title = "seen", data = { port = ctx.port } } end,
}
LUA
}

job_plugrate() {
    local net=198.19.0.0/20
    trivial_plugin
    local ms=("$MS" -n -Pn -p 80,443 "$net" --script "$OUT/trivial.lua")
    echo "== plugin throughput: a trivial plugin on $net x {80,443} (8,192 open ports)"
    in_lab /usr/bin/time -v "${ms[@]}" -oJ "$OUT/plugrate.ndjson" >/dev/null 2>"$OUT/plugrate.time"
    bench_py scripts plugrate "$OUT/plugrate.ndjson" "$OUT/plugrate.time"
}

job_nmapdb() {
    local src=/usr/share/nmap/nmap-service-probes dir=$OUT/nmapdb
    local ports=21,22,25,80,443,5432,6379,11211 target=$TARGET2
    [ -r "$src" ] || { echo "  job nmapdb: $src is missing (Debian's nmap-common)"; return 1; }
    mkdir -p "$dir"
    echo "== nmap's probe file in moonscan: import, load, and -sV on $target's 8 lab services"
    "$MS" probes import "$src" -o "$dir/nmap.yaml" 2>&1 | sed -n '1,2s/^moonscan: /  /p'
    echo "  peak RSS of loading it (every rule compiled): $(peak_rss "$MS" probes --dir "$dir" list) MB"
    local own=("$MS" -sV -n -Pn -p "$ports" "$target") imported=("$MS" -sV -n -Pn --probes "$dir" -p "$ports" "$target")
    local nm=(nmap -n -Pn -sV -p "$ports" "$target")
    echo "  peak RSS of -sV: own database $(peak_rss "${own[@]}") MB, imported $(peak_rss "${imported[@]}") MB, nmap $(peak_rss "${nm[@]}") MB"
    in_lab hyperfine -N -w 1 -r "$RUNS" --export-json "$OUT/nmapdb-import.json" \
        -n import "$MS probes import $src -o $dir/nmap.yaml" >"$OUT/nmapdb-import.txt" 2>&1
    summarize "$OUT/nmapdb-import.json"
    bench nmapdb "" own "${own[*]}" imported "${imported[*]}" nmap "${nm[*]}"
}

# The lab's detection targets (`lab.sh ports`) added to the caller's arrays
# addrs and ports; sets list to every port once, comma-separated.
lab_targets() {
    local line each
    while read -r line; do
        addrs+=("${line%%:*}")
        read -ra each <<<"$(tr , ' ' <<<"${line#*:}")"
        ports+=("${each[@]}")
    done < <(bash "$REPO/scripts/lab.sh" ports)
    list=$(printf '%s\n' "${ports[@]}" | sort -nu | paste -sd, -)
}

job_daemons() {
    local dir=$OUT/daemons addrs=() ports=() list
    mkdir -p "$dir"
    lab_targets
    local ms=("$MS" -n -Pn -sV -p "$list" "${addrs[@]}") nm=(nmap -n -Pn -sV -p "$list" "${addrs[@]}")
    echo "== -sV on the lab's daemons (${addrs[*]}, ${#ports[@]} ports) against nmap -sV (target: identified >= nmap's, moonscan/nmap <= 0.05)"
    attempt daemons "nmap -sV" /dev/null /usr/bin/time -f "%e %M" -o "$dir/nmap.time" "${nm[@]}" -oX "$dir/nmap.xml" || return 1
    attempt daemons "moonscan -sV" /dev/null /usr/bin/time -f "%e %M" -o "$dir/moonscan.time" "${ms[@]}" -oX "$dir/moonscan.xml" -oJ "$dir/moonscan.ndjson" || return 1
    python3 "$REPO/tests/sv_compare.py" "$dir/nmap.xml" "$dir/moonscan.xml" >"$dir/compare.ndjson"
    in_lab hyperfine -N -w 1 -r "$RUNS" --export-json "$dir/moonscan.json" -n moonscan "${ms[*]}" >"$dir/hyperfine.txt"
    bench_py services daemons "$dir"
}

# -O of some hosts: moonscan vs nmap, agreement and times.
os_vs_nmap() { # label target-ratio hosts...
    local label=$1 target=$2 dir=$OUT/os
    shift 2
    mkdir -p "$dir"
    local ms=("$MS" -n -O "$@") nm=(nmap -n -O "$@")
    attempt os "nmap -O" /dev/null "${nm[@]}" -oX "$dir/$label.nmap.xml" || return 1
    attempt os "moonscan -O" /dev/null "${ms[@]}" -oX "$dir/$label.moonscan.xml" || return 1
    python3 "$REPO/tests/os_compare.py" "$dir/$label.nmap.xml" "$dir/$label.moonscan.xml" || true
    # The noise floor: nmap against itself (SP, ISR and TS are read from
    # clocks, and near ties flip with them from run to run).
    attempt os "nmap -O" /dev/null "${nm[@]}" -oX "$dir/$label.nmap2.xml" || return 1
    echo "  nmap against a second nmap run:"
    python3 "$REPO/tests/os_compare.py" "$dir/$label.nmap.xml" "$dir/$label.nmap2.xml" | tail -n 1 || true
    echo "  peak RSS: moonscan $(peak_rss "${ms[@]}") MB, nmap $(peak_rss "${nm[@]}") MB"
    in_lab hyperfine -N -w 1 -r "${RUNS_OS:-3}" --export-json "$OUT/os-$label.json" \
        -n moonscan "${ms[*]}" -n nmap "${nm[*]}" >"$OUT/os-$label.txt"
    summarize "$OUT/os-$label.json" "nmap=$target"
}

job_os() {
    local many=("$TARGET" "${OS_TARGETS[@]}" "$RATE")
    local h
    for h in $LIVE8; do many+=("198.18.2.$h"); done
    for h in $(seq 1 19); do many+=("198.19.0.$h"); done
    echo "== -O of one host ($TARGET): moonscan -O vs nmap -O (target: same best match, moonscan/nmap <= 0.2)"
    os_vs_nmap one 0.2 "$TARGET" || return 1
    echo "== -O of ${#many[@]} hosts: moonscan -O vs nmap -O (target: same best match on each, moonscan/nmap <= 0.05)"
    os_vs_nmap many 0.05 "${many[@]}"
}

job_coverage() {
    local dir=$OUT/coverage addrs=("$TARGET") ports=("${PORTS[@]}") list
    mkdir -p "$dir"
    lab_targets
    local args=(-n -Pn -sV -sC -p "$list" "${addrs[@]}")
    echo "== -sV -sC on the lab's daemons (${addrs[*]}, ${#ports[@]} ports) against nmap -sV -sC (target: >= 80 % of nmap's script results)"
    attempt coverage "nmap -sV -sC" /dev/null /usr/bin/time -f "%e %M" -o "$dir/nmap.time" nmap "${args[@]}" -oX "$dir/nmap.xml" || return 1
    attempt coverage "moonscan -sV -sC" /dev/null /usr/bin/time -f "%e %M" -o "$dir/moonscan.time" "$MS" "${args[@]}" -oX "$dir/moonscan.xml" || return 1
    bench_py scripts coverage "$dir"
}

# Each UDP port's state in two nmap-format XML files: counts per state, and
# the ports where they differ.
udp_states() { # label-a xml-a label-b xml-b
    bench_py scans udp "$@"
}

# moonscan's top N UDP ports (its own table, not nmap's: nmap is given
# the same list with -p so both scan the same ports).
top_udp() { # n
    in_lab "$MS" -sU -n -Pn --top-ports "$1" --max-retries 0 --max-rtt-timeout 10ms "$TARGET" -oX - 2>/dev/null |
        grep -o 'protocol="udp" numservices="[0-9]*" services="[^"]*"' | sed 's/.*services="//; s/"$//'
}

job_udp() {
    local target=$TARGET list
    list=$(top_udp 100)
    [ -n "$list" ] || { echo "  job udp: could not read moonscan's top 100 UDP ports"; return 1; }
    local ms=("$MS" -sU -n -Pn --top-ports 100 "$target")
    local nm=(nmap -n -Pn -sU -p "U:$list" -T4 "$target")
    # -d: nmap lists every port in its XML (without it, states are folded into <extraports>).
    echo "== UDP scan, moonscan's top 100 UDP ports of $target: moonscan -sU vs nmap -sU -T4 on the same ports"
    echo "   (target: moonscan/nmap <= 0.5, same states)"
    attempt udp "moonscan -sU" "$OUT/udp.moonscan.out" "${ms[@]}" -v -oX "$OUT/udp.moonscan.xml" || return 1
    attempt udp "nmap -sU" "$OUT/udp.nmap.out" "${nm[@]}" -d -oX "$OUT/udp.nmap.xml" || return 1
    udp_states moonscan "$OUT/udp.moonscan.xml" nmap "$OUT/udp.nmap.xml"
    echo "  peak RSS: moonscan $(peak_rss "${ms[@]}") MB, nmap $(peak_rss "${nm[@]}") MB"
    bench udp "nmap=0.5" moonscan "${ms[*]}" nmap "${nm[*]}"
}

job_udprate() {
    local target=$RATE t0 t1 t2 list
    list=$(top_udp 100)
    [ -n "$list" ] || { echo "  job udprate: could not read moonscan's top 100 UDP ports"; return 1; }
    echo "== UDP scan, moonscan's top 100 UDP ports of $target (default ICMP rate limit): moonscan -sU vs nmap -sU -T4, once each"
    t0=$(date +%s.%N)
    attempt udprate "moonscan -sU" "$OUT/udprate.moonscan.out" "$MS" -sU -n -Pn -v --top-ports 100 "$target" \
        -oX "$OUT/udprate.moonscan.xml" || return 1
    t1=$(date +%s.%N)
    attempt udprate "nmap -sU" "$OUT/udprate.nmap.out" nmap -n -Pn -sU -T4 -p "U:$list" "$target" \
        -d -oX "$OUT/udprate.nmap.xml" || return 1
    t2=$(date +%s.%N)
    awk -v a="$t0" -v b="$t1" -v c="$t2" 'BEGIN { printf "  moonscan %.2f s, nmap %.2f s, ratio moonscan/nmap %.3fx\n", b - a, c - b, (b - a) / (c - b) }'
    udp_states moonscan "$OUT/udprate.moonscan.xml" nmap "$OUT/udprate.nmap.xml"
}

job_ping() {
    local net=198.19.0.0/16 mac n t0 t1 timed=() found=()
    mac=$(ip -n mstarget -br link show ms-tgt0 | awk '{print $3}')
    : >"$OUT/zmap-blocklist.conf"
    local ms=("$MS" -sn -n "$net")
    local zm=(zmap --probe-module=icmp_echoscan "$net" -i ms-scan0 -S "$SCAN_ADDR" -G "$mac"
        -b "$OUT/zmap-blocklist.conf" -r 0 -c 1 -q --disable-syslog -o "$OUT/ping.zmap.txt")
    echo "== host discovery sweep, $SWEEP_HOSTS hosts: moonscan -sn vs zmap icmp_echoscan -r 0 -c 1 vs nmap -sn"
    echo "   (target: >= 99.99 % of hosts, moonscan time <= zmap's)"
    if attempt ping "moonscan -sn" "$OUT/ping.moonscan.ndjson" "${ms[@]}" -oJ -; then
        n=$(grep -c '"state":"up"' "$OUT/ping.moonscan.ndjson" || true)
        found+=("moonscan $(of_sweep "$n")")
        echo "  peak RSS: moonscan $(peak_rss "${ms[@]}") MB, zmap $(peak_rss "${zm[@]}") MB"
        timed+=(moonscan "${ms[*]}")
    fi
    if attempt ping zmap /dev/null "${zm[@]}"; then
        found+=("zmap $(of_sweep "$(found_zmap "$OUT/ping.zmap.txt")")")
        timed+=(zmap "${zm[*]}")
    fi
    t0=$(date +%s.%N)
    if attempt ping "nmap -sn" "$OUT/ping.nmap.gnmap" nmap -n -sn "$net" -oG -; then
        t1=$(date +%s.%N)
        found+=("nmap $(of_sweep "$(grep -c 'Status: Up' "$OUT/ping.nmap.gnmap" || true)"), timed once: $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f s", b - a }')")
    fi
    local f
    echo "  found (hosts up):"
    for f in "${found[@]}"; do echo "    $f"; done
    [ ${#timed[@]} -eq 0 ] || bench ping "zmap=1" "${timed[@]}"
}

job_discover() {
    local net=198.18.2.0/24 list
    list=$(in_lab "$MS" -n -Pn --top-ports 1000 --max-retries 0 --max-rtt-timeout 10ms "$TARGET" -oX - 2>/dev/null |
        grep -o 'protocol="tcp" numservices="[0-9]*" services="[^"]*"' | sed 's/.*services="//; s/"$//')
    [ -n "$list" ] || { echo "  job discover: could not read moonscan's top 1000 TCP ports"; return 1; }
    local ms=("$MS" -n -p "$list" "$net") nm=(nmap -n -p "$list" "$net")
    echo "== default scan (host discovery on) of $net, 8 hosts up, moonscan's top 1000 ports: moonscan vs nmap (-T3)"
    echo "   (target: moonscan/nmap <= 0.5, the same hosts and open ports)"
    attempt discover moonscan "$OUT/discover.moonscan.out" "${ms[@]}" -oX "$OUT/discover.moonscan.xml" || return 1
    attempt discover nmap "$OUT/discover.nmap.out" "${nm[@]}" -oX "$OUT/discover.nmap.xml" || return 1
    bench_py scans discover "$OUT/discover.moonscan.xml" "$OUT/discover.nmap.xml"
    echo "  peak RSS: moonscan $(peak_rss "${ms[@]}") MB, nmap $(peak_rss "${nm[@]}") MB"
    bench discover "nmap=0.5" moonscan "${ms[*]}" nmap "${nm[*]}"
}

job_sslenum() {
    local t ok=0 fastest
    echo "== ssl-enum-ciphers: moonscan vs sslscan, nmap --script ssl-enum-ciphers, testssl.sh (target: <= 0.2x the fastest)"
    for t in "$TARGET" 198.18.0.7 198.18.0.9 198.18.0.10 198.18.0.11; do
        echo "-- $t:443"
        local ms=("$MS" -sT -n -Pn -p 443 --script ssl-enum-ciphers "$t")
        local nm=(nmap -n -Pn -p 443 --script ssl-enum-ciphers "$t")
        # What nmap's script and testssl.sh -p -e check too: versions and suites.
        local ss=(sslscan --no-colour --no-heartbleed --no-renegotiation --no-compression --no-fallback "$t:443")
        attempt sslenum moonscan "$OUT/sslenum.$t.ndjson" "${ms[@]}" -oJ - || ok=1
        attempt sslenum sslscan "$OUT/sslenum.$t.sslscan.xml" sslscan --xml=- "${ss[@]:1}" || ok=1
        attempt sslenum nmap "$OUT/sslenum.$t.nmap.xml" "${nm[@]}" -oX - || ok=1
        local start end
        start=$(date +%s.%N)
        rm -f "$OUT/sslenum.$t.testssl.json"
        in_lab testssl --quiet --color 0 --warnings off -p -E --jsonfile "$OUT/sslenum.$t.testssl.json" "$t:443" \
            >"$OUT/sslenum.$t.testssl.txt" 2>&1 || true
        end=$(date +%s.%N)
        # The same sets? By IANA name against nmap; by count per version
        # against sslscan and testssl.sh (they print ids and OpenSSL names;
        # tests/tls.rs compares sslscan's ids with moonscan's names exactly).
        bench_py tls sslenum "$OUT/sslenum.$t.ndjson" "$OUT/sslenum.$t.sslscan.xml" "$OUT/sslenum.$t.nmap.xml" "$OUT/sslenum.$t.testssl.json"
        echo "  testssl.sh -p -E: $(echo "$end - $start" | bc | awk '{printf "%.2f", $1}') s (timed once)"
        bench "sslenum.$t" "" moonscan "${ms[*]}" sslscan "${ss[*]}" nmap "${nm[*]}"
        fastest=$(bench_py times fastest "$OUT/sslenum.$t.json")
        echo "$fastest"
    done
    return "$ok"
}

job_tlssv() {
    local net=198.19.0.0/19 port b rc
    # 443: nginx as rustls speaks to it; 10443: the lab's TLS 1.0-only
    # server on every address (the legacy path: moonscan's own hellos).
    for port in 443 10443; do
        echo "== -sV on $net x $port (8,192 TLS ports): certificates read per second, peak RSS"
        local bins=("$MS")
        [ -n "${BASELINE:-}" ] && bins+=("$BASELINE")
        for b in "${bins[@]}"; do
            # A scan with errors exits 1 (an older build reads no legacy chain).
            rc=0
            in_lab /usr/bin/time -v "$b" -sV -n -Pn -p "$port" "$net" -oJ "$OUT/tlssv.ndjson" >/dev/null 2>"$OUT/tlssv.time" || rc=$?
            bench_py tls tlssv "$b" "$OUT/tlssv.ndjson" "$OUT/tlssv.time" "$rc"
        done
    done
}

# This build against BASELINE, each job's moonscan command in one hyperfine
# run (the peak RSS of each too): a restructuring must not cost speed.
job_baseline() {
    [ -x "${BASELINE:-}" ] || { echo "  job baseline: set BASELINE to an older moonscan binary"; return 1; }
    trivial_plugin
    local db=$OUT/baseline.db name args
    local -A cmd=(
        [connect]="-sT -n -Pn -p- $TARGET"
        [syn]="-sS -n -Pn -p- $TARGET"
        [sweep]="-sS -n -Pn -p 80 198.19.0.0/16"
        [service]="-sV -n -Pn -p $TARGET_PORTS $TARGET"
        [svcmem]="-sV -n -Pn -p 80,443 198.19.0.0/20"
        [scripts]="-sV -sC -n -Pn -p $TARGET_PORTS $TARGET"
        [plugrate]="-n -Pn -p 80,443 198.19.0.0/20 --script $OUT/trivial.lua"
        [db]="-sS -n -Pn -p- $TARGET --db $db"
    )
    echo "== this build (now) against $BASELINE (then), the same commands (target: now/then <= 1.05)"
    for name in connect syn sweep service svcmem scripts plugrate db; do
        args=${cmd[$name]}
        echo "-- $name: moonscan $args"
        rm -f "$db"*
        # shellcheck disable=SC2086 # args is a list of words
        echo "  peak RSS: now $(peak_rss "$MS" $args) MB, then $(peak_rss "$BASELINE" $args) MB"
        in_lab hyperfine -N -w 2 -r "$RUNS" --prepare "rm -f $db $db-wal $db-shm" \
            --export-json "$OUT/baseline-$name.json" -n now "$MS $args" -n then "$BASELINE $args" \
            >"$OUT/baseline-$name.txt"
        summarize "$OUT/baseline-$name.json"
    done
}

job_db() {
    local db=$OUT/bench.db name args ratio
    echo "== --db overhead (SQLite, WAL, batched): with/without, same run (target for -sS -p-: < 1.10)"
    for name in syn sweep; do
        case $name in
        syn) args=(-sS -n -Pn -p- "$TARGET") ;;
        sweep) args=(-sS -n -Pn -p 80 198.19.0.0/16) ;;
        esac
        in_lab hyperfine -N -w 2 -r "$RUNS" --prepare "rm -f $db $db-wal $db-shm" --export-json "$OUT/db-$name.json" \
            -n without "$MS ${args[*]}" -n with "$MS ${args[*]} --db $db" >"$OUT/db-$name.txt"
        echo "  $name: moonscan ${args[*]}"
        bench_py times db "$OUT/db-$name.json" "$name"
        rm -f "$db" "$db-wal" "$db-shm"
        in_lab "$MS" "${args[@]}" --db "$db" -oJ "$OUT/db-$name.ndjson" >/dev/null
        local open size
        open=$(grep -c '"state":"open"' "$OUT/db-$name.ndjson" || true)
        size=$(stat -c %s "$db")
        echo "    db size $size bytes for $open open ports: $((size / (open > 0 ? open : 1))) bytes per open port"
    done
}

main() {
    case ${1:-} in -h | --help | help | --list | list)
        usage
        return 0
        ;;
    esac
    [ "$(id -u)" -eq 0 ] || { echo "bench.sh: run as root (the lab needs network namespaces)" >&2; exit 1; }
    local jobs=("$@") j rc incomplete=()
    [ ${#jobs[@]} -gt 0 ] || jobs=("${JOBS[@]}")
    for j in "${jobs[@]}"; do
        declare -F "job_$j" >/dev/null || { echo "bench.sh: unknown job '$j' (jobs: ${JOBS[*]})" >&2; exit 2; }
    done
    install
    bash scripts/lab.sh up
    # Others may be mid-edit: a failed build benchmarks the last good binary.
    if ((BUILD)); then
        cargo build --release --quiet ||
            echo "bench.sh: warning: cargo build failed; moonscan parts use the existing $MS, if any"
    fi
    mkdir -p "$OUT"
    for j in "${jobs[@]}"; do
        # A subshell with its own errexit: a job that stops does not stop the rest.
        set +e
        (set -e; "job_$j")
        rc=$?
        set -e
        [ "$rc" -eq 0 ] || { incomplete+=("$j"); echo "  job $j: incomplete (exit $rc)"; }
    done
    [ ${#incomplete[@]} -eq 0 ] || { echo "bench.sh: incomplete jobs: ${incomplete[*]}"; exit 1; }
}

main "$@"
