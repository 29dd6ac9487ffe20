#!/usr/bin/env bash
# moonscan lab: two network namespaces joined by one veth pair, with real
# services (nginx, sshd, redis) on the target side.
#
#   msscan   ms-scan0 198.18.0.1/24 2001:2::1/64   (run the scanner here)
#   mstarget ms-tgt0  198.18.0.2/24 2001:2::2/64   (+ every address of 198.19.0.0/16)
#
# The namespaces have no default route and no link to the root namespace.
#
# Usage: scripts/lab.sh up|down|status|exec CMD...|scan ARGS...
set -euo pipefail

SCAN_NS=msscan
TGT_NS=mstarget
SCAN_IF=ms-scan0
TGT_IF=ms-tgt0
STATE=/run/moonscan-lab
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TARGET=198.18.0.2
PORTS=(22 80 443 6379)

log() { echo "lab: $*" >&2; }
die() { echo "lab: error: $*" >&2; exit 1; }

usage() {
    echo "usage: $0 up|down|status|exec CMD [ARGS...]|scan [ARGS...]" >&2
    exit 2
}

ns_exists() { [ -e "/run/netns/$1" ]; } # where "ip netns add" mounts them

service_of_port() {
    case $1 in 22) echo sshd ;; 80 | 443) echo nginx ;; 6379) echo redis ;; esac
}

# True if the pid file names a live process whose name matches $2.
pid_alive() {
    local pid
    [ -s "$1" ] || return 1
    pid=$(tr -dc 0-9 <"$1")
    [ -n "$pid" ] && [ -d "/proc/$pid" ] && grep -q "$2" "/proc/$pid/comm" 2>/dev/null
}

# True if TCP port $2 on $1 accepts a connection from inside msscan.
port_open() {
    ns_exists "$SCAN_NS" || return 1
    ip netns exec "$SCAN_NS" timeout 1 bash -c "</dev/tcp/$1/$2" 2>/dev/null
}

all_ports_open() {
    local p
    for p in "${PORTS[@]}"; do port_open "$TARGET" "$p" || return 1; done
}

# --- packages ---------------------------------------------------------------

install_packages() {
    local missing=()
    command -v ip >/dev/null || missing+=(iproute2)
    test -x /usr/sbin/nginx || missing+=(nginx)
    test -x /usr/sbin/sshd || missing+=(openssh-server)
    command -v redis-server >/dev/null || missing+=(redis-server)
    command -v tcpdump >/dev/null || missing+=(tcpdump)
    command -v openssl >/dev/null || missing+=(openssl)
    [ ${#missing[@]} -eq 0 ] && return 0
    log "installing: ${missing[*]}"
    # DPkg::Lock::Timeout waits for another running apt/dpkg instead of failing.
    local apt=(apt-get -y -q -o DPkg::Lock::Timeout=300)
    if ! DEBIAN_FRONTEND=noninteractive "${apt[@]}" install "${missing[@]}" >&2; then
        log "install failed; running apt-get update and retrying"
        DEBIAN_FRONTEND=noninteractive "${apt[@]}" update >&2
        DEBIAN_FRONTEND=noninteractive "${apt[@]}" install "${missing[@]}" >&2 ||
            die "could not install ${missing[*]}"
    fi
}

# --- network ----------------------------------------------------------------

setup_namespaces() {
    local ns
    for ns in "$SCAN_NS" "$TGT_NS"; do
        ns_exists "$ns" || { log "creating namespace $ns"; ip netns add "$ns"; }
        ip -n "$ns" link set lo up
    done
    # The veth is created directly inside the namespaces, never in the root one.
    if ! ip -n "$SCAN_NS" link show "$SCAN_IF" >/dev/null 2>&1; then
        log "creating veth $SCAN_IF <-> $TGT_IF"
        ip link add "$SCAN_IF" netns "$SCAN_NS" type veth peer name "$TGT_IF" netns "$TGT_NS"
    fi
    # "replace" makes addresses and routes idempotent.
    ip -n "$SCAN_NS" addr replace 198.18.0.1/24 dev "$SCAN_IF"
    ip -n "$SCAN_NS" -6 addr replace 2001:2::1/64 dev "$SCAN_IF" nodad
    ip -n "$SCAN_NS" link set "$SCAN_IF" up
    ip -n "$TGT_NS" addr replace 198.18.0.2/24 dev "$TGT_IF"
    ip -n "$TGT_NS" -6 addr replace 2001:2::2/64 dev "$TGT_IF" nodad
    ip -n "$TGT_NS" link set "$TGT_IF" up
    ip -n "$SCAN_NS" route replace 198.19.0.0/16 via 198.18.0.2
    # mstarget owns all of 198.19.0.0/16 (65,536 hosts for sweeps).
    ip -n "$TGT_NS" route replace local 198.19.0.0/16 dev lo
}

# Set a sysctl inside a namespace; warn (do not fail) if it is not available.
ns_sysctl() {
    ip netns exec "$1" sysctl -qw "$2" >/dev/null 2>&1 ||
        log "warning: sysctl $2 not settable in $1 (not per-namespace or missing)"
}

setup_sysctls() {
    local ns
    ns_sysctl "$TGT_NS" net.core.somaxconn=65535
    ns_sysctl "$TGT_NS" net.ipv4.tcp_max_syn_backlog=65535
    # The scanner must see every ICMP error quickly: no per-peer rate limit,
    # and a global ICMP budget far above what a scan produces.
    for ns in "$SCAN_NS" "$TGT_NS"; do
        ns_sysctl "$ns" net.ipv4.icmp_ratelimit=0
        ns_sysctl "$ns" net.ipv6.icmp.ratelimit=0
        ns_sysctl "$ns" net.ipv4.icmp_msgs_per_sec=1000000
        ns_sysctl "$ns" net.ipv4.icmp_msgs_burst=1000000
    done
}

# --- services ---------------------------------------------------------------

make_state() {
    mkdir -p "$STATE/www" "$STATE/nginx-tmp" "$STATE/redis"
    chmod 755 "$STATE"
    mkdir -p /run/sshd && chmod 755 /run/sshd # sshd privilege separation dir
    echo '<!doctype html><html><head><title>moonscan lab</title></head><body>moonscan lab</body></html>' \
        >"$STATE/www/index.html"
}

make_tls_cert() {
    [ -s "$STATE/tls.crt" ] && [ -s "$STATE/tls.key" ] && return 0
    log "generating self-signed TLS certificate"
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 \
        -keyout "$STATE/tls.key" -out "$STATE/tls.crt" \
        -subj "/CN=lab.moonscan.test/O=moonscan lab" \
        -addext "subjectAltName=DNS:lab.moonscan.test,DNS:www.lab.moonscan.test" 2>/dev/null
}

start_nginx() {
    pid_alive "$STATE/nginx.pid" nginx && return 0
    make_tls_cert
    local t=$STATE/nginx-tmp
    cat >"$STATE/nginx.conf" <<EOF
user root;
daemon on;
worker_processes 2;
pid $STATE/nginx.pid;
error_log $STATE/nginx-error.log;
events { worker_connections 4096; }
http {
    access_log off;
    default_type text/html;
    client_body_temp_path $t/body;
    proxy_temp_path $t/proxy;
    fastcgi_temp_path $t/fastcgi;
    uwsgi_temp_path $t/uwsgi;
    scgi_temp_path $t/scgi;
    server {
        listen 80 backlog=65535;
        listen [::]:80 backlog=65535;
        listen 443 ssl backlog=65535;
        listen [::]:443 ssl backlog=65535;
        server_name lab.moonscan.test;
        ssl_certificate $STATE/tls.crt;
        ssl_certificate_key $STATE/tls.key;
        root $STATE/www;
        index index.html;
    }
}
EOF
    log "starting nginx"
    # -e: early error log, so nginx never touches /var/log/nginx.
    ip netns exec "$TGT_NS" /usr/sbin/nginx -q -p "$STATE" -e "$STATE/nginx-error.log" \
        -c "$STATE/nginx.conf" || die "nginx failed to start (see $STATE/nginx-error.log)"
}

start_sshd() {
    pid_alive "$STATE/sshd.pid" sshd && return 0
    local type
    for type in ed25519 ecdsa rsa; do
        [ -s "$STATE/ssh_host_${type}_key" ] ||
            ssh-keygen -q -t "$type" -N '' -C moonscan-lab -f "$STATE/ssh_host_${type}_key"
    done
    cat >"$STATE/sshd_config" <<EOF
Port 22
ListenAddress 0.0.0.0
ListenAddress ::
HostKey $STATE/ssh_host_ed25519_key
HostKey $STATE/ssh_host_ecdsa_key
HostKey $STATE/ssh_host_rsa_key
PidFile $STATE/sshd.pid
UsePAM no
PermitRootLogin no
PasswordAuthentication no
KbdInteractiveAuthentication no
# Many parallel banner grabs must not be dropped.
MaxStartups 10000
LoginGraceTime 10
EOF
    log "starting sshd"
    ip netns exec "$TGT_NS" /usr/sbin/sshd -f "$STATE/sshd_config" -E "$STATE/sshd.log" ||
        die "sshd failed to start (see $STATE/sshd.log)"
}

start_redis() {
    pid_alive "$STATE/redis.pid" redis-server && return 0
    cat >"$STATE/redis.conf" <<EOF
bind 0.0.0.0 ::
port 6379
tcp-backlog 65535
pidfile $STATE/redis.pid
logfile $STATE/redis.log
dir $STATE/redis
EOF
    log "starting redis"
    ip netns exec "$TGT_NS" redis-server "$STATE/redis.conf" \
        --protected-mode no --daemonize yes --save '' --appendonly no ||
        die "redis failed to start (see $STATE/redis.log)"
}

# Wait (up to 10 s in total) until every service port answers from msscan.
wait_ports() {
    local p deadline=$((SECONDS + 10))
    for p in "${PORTS[@]}"; do
        until port_open "$TARGET" "$p"; do
            ((SECONDS < deadline)) ||
                die "$(service_of_port "$p") is not answering on $TARGET:$p (logs in $STATE)"
            sleep 0.5
        done
    done
}

stop_service() { # pidfile name
    local pid i
    pid_alive "$1" "$2" || return 0
    pid=$(tr -dc 0-9 <"$1")
    log "stopping $2 (pid $pid)"
    kill "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
        [ -d "/proc/$pid" ] || return 0
        sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null || true
}

# --- commands ---------------------------------------------------------------

cmd_up() {
    install_packages
    setup_namespaces
    setup_sysctls
    make_state
    start_nginx
    start_sshd
    start_redis
    wait_ports
    log "up: scanner in netns $SCAN_NS, targets $TARGET, 2001:2::2, 198.19.0.0/16"
}

cmd_down() {
    stop_service "$STATE/nginx.pid" nginx
    stop_service "$STATE/sshd.pid" sshd
    stop_service "$STATE/redis.pid" redis-server
    local ns pid
    for ns in "$SCAN_NS" "$TGT_NS"; do
        ns_exists "$ns" || continue
        # Leftover processes would keep the namespace alive after deletion.
        for pid in $(ip netns pids "$ns"); do
            log "killing leftover process $pid in $ns"
            kill "$pid" 2>/dev/null || true
        done
        log "deleting namespace $ns"
        ip netns del "$ns"
    done
    rm -rf "$STATE"
    log "down"
}

cmd_status() {
    local ok=0 ns p svc
    for ns in "$SCAN_NS" "$TGT_NS"; do
        if ns_exists "$ns"; then echo "namespace $ns: present"; else echo "namespace $ns: MISSING"; ok=1; fi
    done
    for svc in nginx sshd redis; do
        if pid_alive "$STATE/$svc.pid" "$svc"; then
            echo "$svc: running (pid $(tr -dc 0-9 <"$STATE/$svc.pid"))"
        else
            echo "$svc: not running"
        fi
    done
    for p in "${PORTS[@]}"; do
        if port_open "$TARGET" "$p"; then echo "port $TARGET:$p: open"; else echo "port $TARGET:$p: CLOSED"; ok=1; fi
    done
    return $ok
}

# Bring the lab up only if it is not already fully working.
ensure_up() { all_ports_open || cmd_up; }

cmd_scan() {
    local cargo
    ensure_up
    cargo=$(command -v cargo || echo "$HOME/.cargo/bin/cargo")
    [ -x "$cargo" ] || die "cargo not found"
    (cd "$REPO" && "$cargo" build --release --quiet) || die "cargo build failed"
    exec ip netns exec "$SCAN_NS" "$REPO/target/release/moonscan" "$@"
}

main() {
    [ $# -ge 1 ] || usage
    [ "$(id -u)" -eq 0 ] || die "must run as root"
    local cmd=$1
    shift
    case $cmd in
    up) cmd_up ;;
    down) cmd_down ;;
    status) cmd_status ;;
    exec)
        [ $# -ge 1 ] || usage
        ensure_up
        exec ip netns exec "$SCAN_NS" "$@"
        ;;
    scan) cmd_scan "$@" ;;
    *) usage ;;
    esac
}

main "$@"
