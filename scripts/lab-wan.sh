# shellcheck shell=bash
# The lab's WAN, sourced by scripts/lab.sh: "lab.sh wan up|down|status|ports".
#
#   msscan   ms-wan0  198.18.4.1/24 ── veth ── ms-wana ┐ mswan: wan-forwarder
#   mswantgt ms-wtgt0 198.18.4.2/24 ── veth ── ms-wanb ┘ (tests/wan-forwarder)
#
# Opt-in: nothing of it exists until "wan up", and "wan up"/"wan down" touch
# only mswan, mswantgt and ms-wan0 (a /24 on its own veth in msscan, more
# specific than msscan's 198.18.0.0/16 to mstarget; no other route changes).
# "lab.sh down" takes it down first.
#
# mswan holds no address: wan-forwarder reads every frame off one veth end
# (AF_PACKET) and writes it out the other, both ways, through a path model
# per direction (tests/wan-forwarder/src/path.rs): a bottleneck of --rate
# frames/s with a queue of --queue frames (tail drop), then --loss % random
# loss, then a one-way delay of rtt/2 ± --jitter ms (uniform, independent per
# frame, so frames closer than 2 x jitter may be reordered). Every setting
# applies to each direction alone: with --loss 1 a round trip loses about 2 %,
# and the RTT varies by up to ± 2 x jitter. --rate 0: no bottleneck. The two
# ends hold permanent neighbour entries, so no ARP crosses the WAN (as on a
# real path, where the scanner resolves its gateway, not the far host).
#
# The veths' tx checksum offload (and TSO/GSO/GRO) is off: a forwarded frame
# carries the checksum its sender computed, never a partial one (the
# forwarder counts partial ones as partial_csum). IPv6 is off on them.
#
# 198.18.4.2 in mswantgt: 89 open TCP ports (sshd 22, nginx 80, and 87
# ports from 14 to 64600 that accept and close, tests/wan-forwarder/
# listen.py), UDP echo on 8 ports; "wan ports" lists them. mswantgt keeps
# the kernel's default ICMP rate limits, as a real host does.
#
# While the WAN is up a sweep of 198.18.0.0/16 also finds 198.18.4.1-2.
#
# "wan up --sweep" also puts 198.19.0.0/16 behind the WAN (mswantgt owns
# every address of it, nginx answers on port 80 of each): a sweep of
# 65,536 live hosts through the bottleneck. Without --sweep (and after
# "wan down") msscan routes it to mstarget again, as "lab.sh up" does.

WAN_NS=mswan
WAN_TGT_NS=mswantgt
WAN_SCAN_IF=ms-wan0 # msscan's end
WAN_A_IF=ms-wana    # mswan's end towards msscan
WAN_B_IF=ms-wanb    # mswan's end towards mswantgt
WAN_TGT_IF=ms-wtgt0 # mswantgt's end
WAN_DIR=$STATE/wan
# Defaults of "wan up" (issue 29's WAN).
WAN_DEFAULTS=(--rtt 50 --jitter 10 --loss 1 --rate 10000 --queue 500)
# 89 open TCP ports: 22, 80 and 87 spread from 14 to 64600.
mapfile -t WAN_TCP_PORTS < <(echo 22; echo 80; for ((i = 0; i < 87; i++)); do echo $((14 + 751 * i)); done)
WAN_UDP_PORTS=(7 53 123 161 500 1900 5353 11211)

wan_ns_all() { echo "$WAN_NS" "$WAN_TGT_NS"; }

# The forwarder's binary as built by wan_build.
wan_bin() {
    local target
    target=$("$REPO/scripts/cargo-target-dir.sh") || die "cannot tell where cargo builds"
    echo "$target/wan-forwarder/release/wan-forwarder"
}

# Builds the forwarder (its own crate, beside moonscan's target folder).
# Runs before the lab's lock is taken: a first build takes seconds.
wan_build() {
    if ! command -v cargo >/dev/null; then
        # shellcheck disable=SC1091
        [ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
    fi
    local bin dir
    bin=$(wan_bin)
    dir=${bin%/release/wan-forwarder}
    local build=(cargo build -q --release --manifest-path "$REPO/tests/wan-forwarder/Cargo.toml" --target-dir "$dir")
    "${build[@]}" --offline 2>/dev/null || "${build[@]}" >&2 || die "cannot build tests/wan-forwarder"
    [ -x "$bin" ] || die "built, but $bin is missing"
}

# ethtool and python3 only: sshd and nginx come with "lab.sh up".
wan_packages() {
    local missing=()
    command -v ethtool >/dev/null || missing+=(ethtool)
    test -x /usr/bin/python3 || missing+=(python3)
    [ ${#missing[@]} -eq 0 ] && return 0
    log "installing: ${missing[*]}"
    local apt=(apt-get -y -q -o DPkg::Lock::Timeout=300)
    if ! DEBIAN_FRONTEND=noninteractive "${apt[@]}" install "${missing[@]}" >&2; then
        DEBIAN_FRONTEND=noninteractive "${apt[@]}" update >&2 || true
        DEBIAN_FRONTEND=noninteractive "${apt[@]}" install "${missing[@]}" >&2 || die "could not install ${missing[*]}"
    fi
}

# Offloads off (the checksums must be whole on the wire) and IPv6 off on
# one veth end: namespace interface.
wan_link_setup() {
    ip netns exec "$1" ethtool -K "$2" tx off tso off gso off gro off >/dev/null 2>&1 ||
        die "cannot turn offloads off on $2 in $1 (ethtool -K)"
    ip netns exec "$1" sysctl -qw "net.ipv6.conf.$2.disable_ipv6=1" >/dev/null 2>&1 || true
    ip -n "$1" link set "$2" up
}

wan_setup_namespaces() {
    local ns
    for ns in $(wan_ns_all); do
        ns_exists "$ns" || { log "creating namespace $ns"; ip netns add "$ns"; }
        ip -n "$ns" link set lo up
    done
    if ! ip -n "$WAN_NS" link show "$WAN_A_IF" >/dev/null 2>&1; then
        ip -n "$SCAN_NS" link del "$WAN_SCAN_IF" 2>/dev/null || true
        log "creating veth $WAN_SCAN_IF <-> $WAN_A_IF"
        ip link add "$WAN_SCAN_IF" netns "$SCAN_NS" type veth peer name "$WAN_A_IF" netns "$WAN_NS"
    fi
    if ! ip -n "$WAN_NS" link show "$WAN_B_IF" >/dev/null 2>&1; then
        log "creating veth $WAN_B_IF <-> $WAN_TGT_IF"
        ip link add "$WAN_B_IF" netns "$WAN_NS" type veth peer name "$WAN_TGT_IF" netns "$WAN_TGT_NS"
    fi
    wan_link_setup "$SCAN_NS" "$WAN_SCAN_IF"
    wan_link_setup "$WAN_NS" "$WAN_A_IF"
    wan_link_setup "$WAN_NS" "$WAN_B_IF"
    wan_link_setup "$WAN_TGT_NS" "$WAN_TGT_IF"
    # mswan's ends take every frame (the forwarder reads them all anyway).
    ip -n "$WAN_NS" link set "$WAN_A_IF" promisc on
    ip -n "$WAN_NS" link set "$WAN_B_IF" promisc on
    ip -n "$SCAN_NS" addr replace "$WAN_SCAN_ADDR/24" dev "$WAN_SCAN_IF"
    ip -n "$WAN_TGT_NS" addr replace "$WAN_TARGET/24" dev "$WAN_TGT_IF"
    local scan_mac tgt_mac
    scan_mac=$(ip netns exec "$SCAN_NS" cat "/sys/class/net/$WAN_SCAN_IF/address")
    tgt_mac=$(ip netns exec "$WAN_TGT_NS" cat "/sys/class/net/$WAN_TGT_IF/address")
    ip -n "$SCAN_NS" neigh replace "$WAN_TARGET" lladdr "$tgt_mac" dev "$WAN_SCAN_IF" nud permanent
    ip -n "$WAN_TGT_NS" neigh replace "$WAN_SCAN_ADDR" lladdr "$scan_mac" dev "$WAN_TGT_IF" nud permanent
    ns_sysctl "$WAN_TGT_NS" net.core.somaxconn=65535
    ns_sysctl "$WAN_TGT_NS" net.ipv4.tcp_max_syn_backlog=65535
}

# Stops the forwarder; it logs its counters as it goes.
wan_stop_forwarder() { stop_service "$WAN_DIR/forwarder.pid" wan-forwarder; }

wan_start_forwarder() { # rtt jitter loss rate queue
    local bin=${MOONSCAN_WAN_BIN:-} i
    [ -x "$bin" ] || die "no forwarder binary (wan_build)"
    install -m 755 "$bin" "$WAN_DIR/wan-forwarder"
    rm -f "$WAN_DIR/forwarder.pid"
    local delay
    delay=$(awk -v r="$1" 'BEGIN { print r / 2 }')
    log "starting wan-forwarder: rtt $1 ms (one way $delay ± $2 ms), loss $3 % each way, $4 frames/s, queue $5"
    ip netns exec "$WAN_NS" setsid "$WAN_DIR/wan-forwarder" --a "$WAN_A_IF" --b "$WAN_B_IF" \
        --delay "$delay" --jitter "$2" --loss "$3" --rate "$4" --queue "$5" \
        --pid "$WAN_DIR/forwarder.pid" --log "$WAN_DIR/forwarder.log" \
        </dev/null >"$WAN_DIR/forwarder.err" 2>&1 &
    local child=$!
    for ((i = 0; i < 50; i++)); do
        pid_alive "$WAN_DIR/forwarder.pid" wan-forwarder && return 0
        proc_live "$child" || break
        sleep 0.1
    done
    die "wan-forwarder did not start: $(cat "$WAN_DIR/forwarder.err")"
}

wan_start_listener() {
    pid_alive "$WAN_DIR/listen.pid" python3 && return 0
    log "starting the WAN target's listeners"
    start_listener "the WAN target's listeners" "$WAN_TGT_NS" "$WAN_TARGET" "$WAN_DIR/listen" \
        --tcp "$(IFS=,; echo "${WAN_TCP_PORTS[*]:2}")" --udp "$(IFS=,; echo "${WAN_UDP_PORTS[*]}")"
}

wan_start_sshd() {
    pid_alive "$WAN_DIR/sshd.pid" sshd && return 0
    [ -s "$STATE/ssh_host_ed25519_key" ] || die "no lab host keys in $STATE (run scripts/lab.sh up)"
    cat >"$WAN_DIR/sshd_config" <<EOF
Port 22
ListenAddress $WAN_TARGET
HostKey $STATE/ssh_host_ed25519_key
HostKey $STATE/ssh_host_ecdsa_key
HostKey $STATE/ssh_host_rsa_key
PidFile $WAN_DIR/sshd.pid
UsePAM no
PermitRootLogin no
PasswordAuthentication no
KbdInteractiveAuthentication no
MaxStartups 10000
LoginGraceTime 10
EOF
    log "starting sshd on $WAN_TARGET"
    ip netns exec "$WAN_TGT_NS" /usr/sbin/sshd -f "$WAN_DIR/sshd_config" -E "$WAN_DIR/sshd.log" ||
        die "sshd failed to start (see $WAN_DIR/sshd.log)"
}

wan_start_nginx() {
    pid_alive "$WAN_DIR/nginx.pid" nginx && return 0
    local t=$WAN_DIR/nginx-tmp
    mkdir -p "$t"
    cat >"$WAN_DIR/nginx.conf" <<EOF
user root;
daemon on;
worker_processes 1;
pid $WAN_DIR/nginx.pid;
error_log $WAN_DIR/nginx-error.log;
events { worker_connections 1024; }
http {
    access_log off;
    default_type text/html;
    client_body_temp_path $t/body;
    proxy_temp_path $t/proxy;
    fastcgi_temp_path $t/fastcgi;
    uwsgi_temp_path $t/uwsgi;
    scgi_temp_path $t/scgi;
    server {
        listen 80 backlog=4096;
        server_name lab.moonscan.test;
        root $STATE/www;
        index index.html;
    }
}
EOF
    log "starting nginx on $WAN_TARGET"
    ip netns exec "$WAN_TGT_NS" /usr/sbin/nginx -q -p "$WAN_DIR" -e "$WAN_DIR/nginx-error.log" \
        -c "$WAN_DIR/nginx.conf" || die "nginx failed to start (see $WAN_DIR/nginx-error.log)"
}

# True if TCP port $1 of the WAN target accepts, tried inside mswantgt
# (not across the WAN, whose loss may be set to anything).
wan_port_local() { ip netns exec "$WAN_TGT_NS" timeout 1 bash -c "</dev/tcp/$WAN_TARGET/$1" 2>/dev/null; }

wan_wait_ports() {
    local p deadline=$((SECONDS + 10))
    for p in "${WAN_TCP_PORTS[@]}"; do
        until wan_port_local "$p"; do
            ((SECONDS < deadline)) || die "nothing answers on $WAN_TARGET:$p (logs in $WAN_DIR)"
            sleep 0.2
        done
    done
}

# A number, as "wan up" takes them.
wan_number() { [[ $2 =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "wan up: $1 $2: a number expected"; }

# 198.19.0.0/16 behind the WAN (--sweep) or back to mstarget.
wan_route_sweep() { # yes|no
    if [ "$1" = yes ]; then
        ip -n "$WAN_TGT_NS" route replace local 198.19.0.0/16 dev lo
        ip -n "$SCAN_NS" route replace 198.19.0.0/16 via "$WAN_TARGET" dev "$WAN_SCAN_IF"
    elif ns_exists "$SCAN_NS" && ns_exists "$TGT_NS"; then
        ip -n "$SCAN_NS" route replace 198.19.0.0/16 via 198.18.0.2
    fi
}

wan_up() { # [--rtt MS] [--jitter MS] [--loss PCT] [--rate PPS] [--queue N] [--sweep]
    local -A o=()
    local sweep=no
    set -- "${WAN_DEFAULTS[@]}" "$@"
    while [ $# -gt 0 ]; do
        case $1 in
        --sweep)
            sweep=yes
            shift
            ;;
        --rtt | --jitter | --loss | --rate | --queue)
            [ $# -ge 2 ] || die "wan up: $1 needs a value"
            wan_number "$1" "$2"
            o[$1]=$2
            shift 2
            ;;
        *) die "wan up: unknown option $1 (--rtt MS --jitter MS --loss PCT --rate PPS --queue N --sweep)" ;;
        esac
    done
    [[ ${o[--rate]} =~ ^[0-9]+$ && ${o[--queue]} =~ ^[0-9]+$ ]] || die "wan up: --rate and --queue take whole numbers"
    # The forwarder checks them too; here, before anything is touched.
    awk -v r="${o[--rtt]}" -v j="${o[--jitter]}" 'BEGIN { exit !(r <= 20000 && j <= r / 2) }' ||
        die "wan up: --rtt ${o[--rtt]} --jitter ${o[--jitter]}: the RTT is 0 to 20000 ms and the jitter (each way) at most half of it"
    awk -v l="${o[--loss]}" 'BEGIN { exit !(l <= 100) }' || die "wan up: --loss ${o[--loss]}: 0 to 100 (%)"
    ((${o[--rate]} <= 10000000)) || die "wan up: --rate ${o[--rate]}: 0 (no bottleneck) to 10000000 frames/s"
    ((${o[--queue]} >= 1 && ${o[--queue]} <= 1000000)) || die "wan up: --queue ${o[--queue]}: 1 to 1000000 frames"
    ns_exists "$SCAN_NS" && [ -d "$STATE" ] || die "the lab is not up (scripts/lab.sh up first)"
    wan_packages
    mkdir -p "$WAN_DIR"
    wan_setup_namespaces
    # Re-running "wan up" replaces the settings: a new forwarder.
    wan_stop_forwarder
    wan_start_forwarder "${o[--rtt]}" "${o[--jitter]}" "${o[--loss]}" "${o[--rate]}" "${o[--queue]}"
    wan_start_listener
    wan_start_sshd
    wan_start_nginx
    wan_wait_ports
    wan_route_sweep "$sweep"
    log "wan up: $WAN_TARGET (netns $WAN_TGT_NS) from $SCAN_NS via $WAN_NS: rtt ${o[--rtt]} ms ± ${o[--jitter]} each way," \
        "loss ${o[--loss]} % each way, ${o[--rate]} frames/s, queue ${o[--queue]}$([ $sweep = yes ] && echo ", 198.19.0.0/16 behind it"); log $WAN_DIR/forwarder.log"
}

wan_down() {
    wan_route_sweep no
    wan_stop_forwarder
    stop_service "$WAN_DIR/listen.pid" python3
    stop_service "$WAN_DIR/sshd.pid" sshd
    stop_service "$WAN_DIR/nginx.pid" nginx
    local ns
    for ns in $(wan_ns_all); do
        delete_ns "$ns"
    done
    # Gone with its peer in mswan; only a half-made "wan up" leaves it.
    ! ns_exists "$SCAN_NS" || ip -n "$SCAN_NS" link del "$WAN_SCAN_IF" 2>/dev/null || true
}

# The forwarder's counters now: it appends them to its log on SIGUSR1 (a
# forwarder working off a backlog may take a moment).
wan_counters() {
    local pid n i
    pid_alive "$WAN_DIR/forwarder.pid" wan-forwarder || return 1
    pid=$(tr -dc 0-9 <"$WAN_DIR/forwarder.pid")
    n=$(grep -c ' report ' "$WAN_DIR/forwarder.log" || true)
    kill -USR1 "$pid"
    for ((i = 0; i < 100; i++)); do
        if [ "$(grep -c ' report ' "$WAN_DIR/forwarder.log" || true)" -ge $((n + 2)) ]; then
            grep ' report ' "$WAN_DIR/forwarder.log" | tail -n +$((n + 1)) | head -n 2
            return 0
        fi
        sleep 0.05
    done
    echo "wan-forwarder: no counters within 5 s"
    return 1
}

wan_status() {
    local ok=0 ns svc
    for ns in $(wan_ns_all); do
        if ns_exists "$ns"; then echo "namespace $ns: present"; else echo "namespace $ns: MISSING"; ok=1; fi
    done
    for svc in forwarder:wan-forwarder listen:python3 sshd:sshd nginx:nginx; do
        if pid_alive "$WAN_DIR/${svc%%:*}.pid" "${svc#*:}"; then
            echo "${svc#*:}: running (pid $(tr -dc 0-9 <"$WAN_DIR/${svc%%:*}.pid"))"
        else
            echo "${svc#*:}: not running"
            ok=1
        fi
    done
    # The settings and counters of the running forwarder (the log keeps
    # those of earlier ones too).
    pid_alive "$WAN_DIR/forwarder.pid" wan-forwarder || return 1
    grep ' start ' "$WAN_DIR/forwarder.log" | tail -n 1
    wan_counters || ok=1
    if port_open "$WAN_TARGET" 22; then echo "port $WAN_TARGET:22 from $SCAN_NS: open"; else
        echo "port $WAN_TARGET:22 from $SCAN_NS: no answer"
        ok=1
    fi
    return $ok
}

wan_ports() {
    echo "$WAN_TARGET:$(printf '%s\n' "${WAN_TCP_PORTS[@]}" | sort -n | paste -sd, -)"
    echo "udp $WAN_TARGET:$(IFS=,; echo "${WAN_UDP_PORTS[*]}")"
}
