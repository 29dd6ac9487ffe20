# shellcheck shell=bash
# The WAN jobs of scripts/bench.sh, which sources this file: scans across
# the lab's WAN (scripts/lab.sh wan up: latency, jitter, loss each way, a
# bottleneck and its queue between msscan and 198.18.4.2), moonscan and the
# tools it must beat in the same run. Each job takes the WAN down at its end.
#
#   wan      -sS -p- of 198.18.4.2 (89 open ports) across four paths (RTT
#            20-200 ms, loss 0-3 % each way, bottlenecks 5,000-100,000
#            frames/s): moonscan WAN_RUNS times (default 3) and nmap -T4 once
#            (cut at WAN_NMAP_LIMIT s, default 900): open ports, times, the
#            ratio, and moonscan's time against the path's limit (65,535
#            probes / bottleneck rate)
#            (target: every port nmap finds, moonscan/nmap <= 0.05, moonscan
#            <= 2x the path's limit)
#   wansweep SYN sweep of 198.19.0.0/16 x port 80 behind the issue's path
#            (wan up --sweep: 50 ms, 1 %, 10,000 frames/s): moonscan
#            WAN_RUNS times, zmap at its default 10,000 pps and -r 0,
#            masscan --rate 10000, once each: hosts found, times
#            (target: >= 99.9 % of the hosts)

WAN_RUNS=${WAN_RUNS:-3}
WAN_NMAP_LIMIT=${WAN_NMAP_LIMIT:-900}
WAN_PATHS=(
    "--rtt 50 --jitter 10 --loss 1 --rate 10000 --queue 500"
    "--rtt 20 --jitter 2 --loss 0 --rate 100000 --queue 1000"
    "--rtt 100 --jitter 10 --loss 2 --rate 30000 --queue 1000"
    "--rtt 200 --jitter 20 --loss 3 --rate 5000 --queue 500"
)

bench_wan_up() { # lab.sh wan up ARGS...
    bash "$REPO/scripts/lab.sh" wan up "$@" >"$OUT/wan-up.log" 2>&1 || {
        echo "  lab.sh wan up $*: failed ($(tail -n 1 "$OUT/wan-up.log"))"
        return 1
    }
}

bench_wan_down() { bash "$REPO/scripts/lab.sh" wan down >/dev/null 2>&1 || true; }

# Seconds since the epoch, to the nanosecond.
now() { date +%s.%N; }

# "open ports, seconds" of one moonscan run across the WAN.
wan_moonscan() { # label args...
    local label=$1 t0 t1 n
    shift
    t0=$(now)
    attempt wan "$label" "$OUT/wan.moonscan.ndjson" "$MS" "$@" -oJ - || return 1
    t1=$(now)
    n=$(grep -c '"state":"open"' "$OUT/wan.moonscan.ndjson" || true)
    awk -v n="$n" -v a="$t0" -v b="$t1" 'BEGIN { printf "%d %.2f\n", n, b - a }'
}

job_wan() {
    local path rate limit i line ms_open=() ms_time=() nm_open nm_time t0 t1 rc
    echo "== -sS -p- of $WAN_TARGET (89 open) across the WAN: moonscan ($WAN_RUNS runs) vs nmap -T4 (once, cut at $WAN_NMAP_LIMIT s)"
    echo "   (target: every port nmap finds, moonscan/nmap <= 0.05, moonscan <= 2x the path's limit)"
    for path in "${WAN_PATHS[@]}"; do
        # shellcheck disable=SC2086 # path is a list of words
        bench_wan_up $path || return 1
        rate=$(awk '{ for (i = 1; i < NF; i++) if ($i == "--rate") print $(i + 1) }' <<<"$path")
        limit=$(awk -v r="$rate" 'BEGIN { printf "%.2f", 65535 / r }')
        ms_open=()
        ms_time=()
        for ((i = 0; i < WAN_RUNS; i++)); do
            line=$(wan_moonscan "moonscan -sS" -sS -n -Pn -p- "$WAN_TARGET") || { bench_wan_down; return 1; }
            ms_open+=("${line% *}")
            ms_time+=("${line#* }")
        done
        cp "$OUT/wan.moonscan.ndjson" "$OUT/wan.$rate.moonscan.ndjson"
        t0=$(now)
        rc=0
        in_lab timeout "$WAN_NMAP_LIMIT" nmap -n -Pn -sS -p- -T4 "$WAN_TARGET" -oG - >"$OUT/wan.$rate.nmap.gnmap" 2>&1 || rc=$?
        t1=$(now)
        # nmap cut short writes no host line: none found (grep finds nothing).
        nm_open=$(grep -o '[0-9]*/open/' "$OUT/wan.$rate.nmap.gnmap" | wc -l || true)
        nm_time=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
        if [ "$rc" -eq 124 ]; then nm_time=">$WAN_NMAP_LIMIT (cut; nmap reports a host only when done)"; fi
        echo "  path $path (limit $limit s):"
        echo "    moonscan: open ${ms_open[*]}; seconds ${ms_time[*]}"
        echo "    nmap -T4: open $nm_open; seconds $nm_time"
        bench_py times wan "$limit" "${nm_time%% *}" "${ms_time[@]}"
    done
    bench_wan_down
}

job_wansweep() {
    local net=198.19.0.0/16 mac i line found=() times=() t0 t1
    bench_wan_up --sweep || return 1
    mac=$(ip -n mswantgt -br link show ms-wtgt0 | awk '{print $3}')
    : >"$OUT/zmap-blocklist.conf"
    echo "== SYN sweep, $SWEEP_HOSTS hosts x port 80 behind the WAN (50 ms, 1 %, 10,000 frames/s, queue 500)"
    echo "   (target: >= 99.9 % of the hosts; the path carries a probe and the RST of its SYN-ACK: 13.1 s at best)"
    for ((i = 0; i < WAN_RUNS; i++)); do
        line=$(wan_moonscan "moonscan -sS" -sS -n -Pn -p 80 "$net") || { bench_wan_down; return 1; }
        found+=("$(of_sweep "${line% *}")")
        times+=("${line#* }")
    done
    echo "  moonscan: found ${found[*]}; seconds ${times[*]}"
    local zm=(zmap -p 80 "$net" -i ms-wan0 -S "$WAN_SCAN_ADDR" -G "$mac" -b "$OUT/zmap-blocklist.conf"
        -c 8 -q --disable-syslog -o "$OUT/wansweep.zmap.txt")
    for r in 10000 0; do
        t0=$(now)
        if attempt wansweep "zmap -r $r" /dev/null "${zm[@]}" -r "$r"; then
            t1=$(now)
            echo "  zmap -r $r: found $(of_sweep "$(found_zmap "$OUT/wansweep.zmap.txt")") in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }') s"
        fi
    done
    # masscan's pcap thread needs a packet to notice the end: poke the WAN target.
    write_poke_wrapper
    sed "s|198.18.0.2/9|$WAN_TARGET/9|" "$OUT/with-poke.sh" >"$OUT/with-poke-wan.sh"
    t0=$(now)
    if attempt wansweep masscan /dev/null bash "$OUT/with-poke-wan.sh" masscan "$net" -p80 --rate 10000 -e ms-wan0 \
        --adapter-ip "$WAN_SCAN_ADDR" --router-mac "$mac" --wait 8 -oL "$OUT/wansweep.masscan.txt"; then
        t1=$(now)
        echo "  masscan --rate 10000: found $(of_sweep "$(found_masscan "$OUT/wansweep.masscan.txt")") in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }') s"
    fi
    bench_wan_down
}
