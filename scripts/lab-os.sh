# shellcheck shell=bash
# OS personalities for OS detection (sourced by scripts/lab.sh).
#
# The lab has one kernel, but its TCP/IP personality is per network
# namespace. Three more namespaces behind mstarget (which routes to them,
# as to msrate: two hops from msscan, whose /16 route covers them) each set
# their own stack, so -O is matched on more than one fingerprint:
#
#   msos1 198.18.6.2 (mstarget 198.18.6.1): initial TTL 128, no TCP
#         timestamps, window scaling and SACK on, no ECN
#   msos2 198.18.7.2 (mstarget 198.18.7.1): initial TTL 255, no timestamps,
#         no window scaling, no SACK, MSS 536 and an 8 KiB window (route)
#   msos3 198.18.8.2 (mstarget 198.18.8.1): TTL 64, ECN on, timestamps
#         without per-connection offsets (an uptime that means something),
#         no SACK
#
# Each listens on TCP 22 and 80 (tests/wan-forwarder/listen.py: accepts and
# closes) and nothing else: every other port is closed.
OS_NS=(msos1 msos2 msos3)
OS_TCP_PORTS=(22 80)
OS_DIR=$STATE/os

os_ns_all() { echo "${OS_NS[@]}"; }

# ns index: the sysctls and route of personality $2 in namespace $1.
os_personality() {
    local ns=$1 gw=$2 i=$3
    case $i in
    0)
        ns_sysctl "$ns" net.ipv4.ip_default_ttl=128
        ns_sysctl "$ns" net.ipv4.tcp_timestamps=0
        ns_sysctl "$ns" net.ipv4.tcp_window_scaling=1
        ns_sysctl "$ns" net.ipv4.tcp_sack=1
        ns_sysctl "$ns" net.ipv4.tcp_ecn=0
        ip -n "$ns" route replace default via "$gw"
        ;;
    1)
        ns_sysctl "$ns" net.ipv4.ip_default_ttl=255
        ns_sysctl "$ns" net.ipv4.tcp_timestamps=0
        ns_sysctl "$ns" net.ipv4.tcp_window_scaling=0
        ns_sysctl "$ns" net.ipv4.tcp_sack=0
        ns_sysctl "$ns" net.ipv4.tcp_ecn=0
        ip -n "$ns" route replace default via "$gw" advmss 536 window 8192
        ;;
    2)
        ns_sysctl "$ns" net.ipv4.ip_default_ttl=64
        ns_sysctl "$ns" net.ipv4.tcp_ecn=1
        ns_sysctl "$ns" net.ipv4.tcp_timestamps=2
        ns_sysctl "$ns" net.ipv4.tcp_sack=0
        ip -n "$ns" route replace default via "$gw"
        ;;
    esac
}

os_setup() {
    local i ns net host_if tgt_if
    for i in "${!OS_NS[@]}"; do
        ns=${OS_NS[$i]}
        net=198.18.$((6 + i))
        host_if=ms-os$((i + 1))
        tgt_if=ms-tos$((i + 1))
        ns_exists "$ns" || { log "creating namespace $ns"; ip netns add "$ns"; }
        ip -n "$ns" link set lo up
        if ! ip -n "$ns" link show "$host_if" >/dev/null 2>&1; then
            log "creating veth $tgt_if <-> $host_if"
            ip link add "$tgt_if" netns "$TGT_NS" type veth peer name "$host_if" netns "$ns"
        fi
        ip -n "$TGT_NS" addr replace "$net.1/24" dev "$tgt_if"
        ip -n "$TGT_NS" link set "$tgt_if" up
        ip -n "$ns" addr replace "$net.2/24" dev "$host_if"
        ip -n "$ns" link set "$host_if" up
        os_personality "$ns" "$net.1" "$i"
    done
}

os_start() {
    mkdir -p "$OS_DIR"
    local i ns
    for i in "${!OS_NS[@]}"; do
        ns=${OS_NS[$i]}
        pid_alive "$OS_DIR/$ns.pid" python3 && continue
        log "starting $ns's listeners on ${OS_TARGETS[$i]}"
        start_listener "$ns's listeners" "$ns" "${OS_TARGETS[$i]}" "$OS_DIR/$ns" \
            --tcp "$(IFS=,; echo "${OS_TCP_PORTS[*]}")"
    done
}

# Every personality's ports answer from msscan.
os_ready() {
    local a p
    for a in "${OS_TARGETS[@]}"; do
        for p in "${OS_TCP_PORTS[@]}"; do port_open "$a" "$p" || return 1; done
    done
}

os_wait() {
    local n
    for ((n = 0; n < 50; n++)); do
        os_ready && return 0
        sleep 0.1
    done
    die "the OS personalities' ports do not answer from $SCAN_NS"
}

os_stop() {
    local ns
    for ns in "${OS_NS[@]}"; do
        stop_service "$OS_DIR/$ns.pid" python3
        delete_ns "$ns"
    done
}
