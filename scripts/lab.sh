#!/usr/bin/env bash
# moonscan lab: network namespaces joined by veth pairs, with real services
# on the target side.
#
#   msscan   ms-scan0 198.18.0.1/24 2001:2::1/64   (run the scanner here)
#   mstarget ms-tgt0  198.18.0.2/24 2001:2::2/64   (+ every address of 198.19.0.0/16)
#                     198.18.0.3/24                (second target, see below)
#                     198.18.0.5/24                (the daemon zoo, scripts/lab-daemons.sh)
#                     198.18.0.6/24                (behind a firewall, see below)
#                     198.18.0.7-11/24             (legacy TLS on 443, see below)
#                     198.18.0.12/24               (two sites by name, see below)
#            ms-tgt1  198.18.1.1/24                (router to msrate)
#   msrate   ms-rate0 198.18.1.2/24                (ICMP rate-limited target, see below)
#
# nginx (80, 443), sshd (22) and redis (6379) listen on every address of
# mstarget, so 198.18.0.2 has exactly those 4 open ports. vsftpd (21), exim
# (25, SMTPS 465, submission 587), PostgreSQL (5432), memcached (11211) and
# FreeRDP's shadow server (3389, NLA) listen on 198.18.0.3 only.
# (198.18.0.3 also reaches the wildcard listeners above.)
#
# 198.18.0.6 reaches the same wildcard listeners as 198.18.0.2, behind an
# nftables filter in mstarget: TCP and UDP port 9 are dropped (filtered)
# and port 10 is rejected with ICMP admin-prohibited.
#
# Legacy TLS (servers rustls refuses, Debian's OpenSSL at @SECLEVEL=0 in
# nginx): 443 on 198.18.0.7 speaks TLS 1.0 only, on .8 TLS 1.1 only, on .9
# TLS 1.2 with RSA key exchange only, on .10 TLS 1.2 with DHE and 1024-bit
# parameters only, on .11 TLS 1.0-1.2 with NULL and anonymous suites only.
# (Debian builds OpenSSL without RC4, DES, 3DES and export suites.)
# Their other ports are the wildcard listeners above. Every address of
# 198.19.0.0/16 also answers on 10443 as the TLS 1.0-only server does (a
# legacy port on many addresses); elsewhere 10443 is reset by the firewall.
#
# 198.18.0.5 carries some 30 more real Debian daemons (mail, directory, file,
# database, chat, proxy, printing, VPN, monitoring, version control, message
# queues...) for service detection; "lab.sh ports" lists their ports.
#
# UDP scans: 198.18.0.2 also answers on UDP, UDP only (dnsmasq 53, tftpd 69,
# chrony 123, nmbd 137, snmpd 161, memcached 11211; dnsmasq's TCP 53 is reset
# by the firewall, so TCP sees the 4 ports above and no more). 198.18.1.2, in
# a third namespace msrate behind mstarget (which forwards, msrate's default
# route), keeps Linux's default ICMP rate limit (icmp_ratelimit 1000 ms per
# peer), so its port unreachables are rate-limited as on real networks; it
# answers on udp 53 (dnsmasq), 123 (chrony) and 161 (snmpd), and TCP 53
# (dnsmasq). msscan routes only 198.18.1.2/32 there: the rest of 198.18.1.0/24
# has no route (tests rely on 198.18.1.5 having none). "lab.sh ports udp"
# lists the UDP ports (scripts/lab-udp.sh).
#
# Host discovery: msscan routes all of 198.18.0.0/16 to mstarget, which
# answers on 8 addresses of 198.18.2.0/24 (198.18.2.3, .17, .42, .77, .100,
# .128, .200, .254: the wildcard listeners above, 4 open ports each) and
# drops the rest of the /16 without a word (blackhole): dead hosts, as on a
# real network. 198.18.1.0/24 but 198.18.1.2 stays unreachable from msscan.
#
# The namespaces have no link to the root namespace; only msrate has a
# default route, to mstarget, which has none.
#
# Three OS personalities (198.18.6.2, 198.18.7.2, 198.18.8.2: TTL, window,
# options, ECN per namespace) sit behind mstarget too, for OS detection
# (scripts/lab-os.sh).
#
# A WAN (delay, jitter, loss, a bottleneck and its queue) to one more target,
# 198.18.4.2, is opt-in: "lab.sh wan up [--sweep] [--rtt MS] [--jitter MS] [--loss PCT]
# [--rate PPS] [--queue N]", "wan down", "wan status", "wan ports" (see
# scripts/lab-wan.sh). Without "wan up" nothing of it exists.
#
# Usage: scripts/lab.sh up|down|status|ports [tcp|udp|all]|exec CMD...|scan ARGS...|wan up|down|status|ports
set -euo pipefail
# Daemons start as "ip netns exec NS setsid CMD &" with $! as their pid.
# With job control on (monitor mode inherited through an exported
# SHELLOPTS) each background job leads its own process group, setsid then
# forks, and $! names a process already gone: no job control here.
set +m

SCAN_NS=msscan
TGT_NS=mstarget
RATE_NS=msrate
SCAN_IF=ms-scan0
TGT_IF=ms-tgt0
TGT_RATE_IF=ms-tgt1 # mstarget's end of the veth to msrate
RATE_IF=ms-rate0
STATE=/run/moonscan-lab
LOCK=/run/moonscan-lab.lock # outside $STATE, which "down" removes
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# TARGET, PORTS, TARGET2, PORTS2, RATE, LIVE8, OS_TARGETS, the WAN's ends.
# shellcheck source=scripts/lab-targets.sh
. "$REPO/scripts/lab-targets.sh"
FIREWALLED=198.18.0.6
# Legacy TLS servers on 443 (address:protocols:ciphers[:dh for 1024-bit DHE]).
LEGACY_WIDE_PORT=10443 # TLS 1.0 only, on every address of 198.19.0.0/16
LEGACY_TLS=(
    "198.18.0.7:TLSv1:DEFAULT"
    "198.18.0.8:TLSv1.1:DEFAULT"
    "198.18.0.9:TLSv1.2:kRSA"
    "198.18.0.10:TLSv1.2:kDHE:dh"
    "198.18.0.11:TLSv1 TLSv1.1 TLSv1.2:eNULL:aNULL"
)
# Two sites on one address, chosen by name: on $NAMED, nginx serves
# alpha.lab.moonscan.test and beta.lab.moonscan.test on $NAMED_HTTP (HTTP,
# by Host; any other Host gets the "no such site" page) and $NAMED_TLS
# (HTTPS: each name its own certificate by SNI; a handshake without a
# known name is refused). msscan resolves both names to $NAMED through its
# hosts file (/etc/netns/msscan/hosts, which "ip netns exec" puts over
# /etc/hosts), so the scanner and nmap scan them by name.
NAMED=198.18.0.12
NAMED_HTTP=8181
NAMED_TLS=8543
NAMES=(alpha.lab.moonscan.test beta.lab.moonscan.test)
# shellcheck source=scripts/lab-daemons.sh
. "$REPO/scripts/lab-daemons.sh"
# shellcheck source=scripts/lab-udp.sh
. "$REPO/scripts/lab-udp.sh"
# shellcheck source=scripts/lab-www.sh
. "$REPO/scripts/lab-www.sh"
# shellcheck source=scripts/lab-wan.sh
. "$REPO/scripts/lab-wan.sh"
# shellcheck source=scripts/lab-os.sh
. "$REPO/scripts/lab-os.sh"

log() { echo "lab: $*" >&2; }
die() { echo "lab: error: $*" >&2; exit 1; }

usage() {
    echo "usage: $0 up|down|status|ports [tcp|udp|all]|exec CMD [ARGS...]|scan [ARGS...]" >&2
    echo "       $0 wan up [--sweep] [--rtt MS] [--jitter MS] [--loss PCT] [--rate PPS] [--queue N]|wan down|wan status|wan ports" >&2
    exit 2
}

ns_exists() { [ -e "/run/netns/$1" ]; } # where "ip netns add" mounts them

# Deletes namespace $1, if it exists, after killing what is left in it
# (leftover processes would keep it alive after deletion).
delete_ns() {
    local pid
    ns_exists "$1" || return 0
    for pid in $(ip netns pids "$1"); do
        log "killing leftover process $pid in $1"
        kill "$pid" 2>/dev/null || true
    done
    log "deleting namespace $1"
    ip netns del "$1"
}

service_of_port() {
    case $1 in
    21) echo vsftpd ;; 22) echo sshd ;; 25 | 465 | 587) echo exim4 ;; 80 | 443) echo nginx ;;
    3389) echo freerdp-shadow-cli ;;
    5432) echo postgres ;; 6379) echo redis ;; 11211) echo memcached ;;
    esac
}

# Newest Debian PostgreSQL server binaries (never /usr/local: CI has none).
pg_bindir() {
    local d
    d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
    [ -n "$d" ] && [ -x "$d/postgres" ] && [ -x "$d/initdb" ] && echo "$d"
}

# True if process $1 exists and is not a zombie (an orphaned daemon that
# died stays a zombie until init gets round to reaping it).
proc_live() {
    [ -d "/proc/$1" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null
}

# Starts tests/wan-forwarder/listen.py in namespace $2 on address $3,
# detached: its output in $4.log, its pid in $4.pid, written by the listener
# itself (right even where setsid has to fork). Returns once it prints
# "listening" (every port bound); dies with its output if it exits with an
# error or is not listening within 10 s.
start_listener() { # what namespace address path-stem listen.py-args...
    local what=$1 ns=$2 addr=$3 stem=$4 child n rc
    shift 4
    rm -f "$stem.pid" "$stem.log" # the background job opens the log later
    ip netns exec "$ns" setsid /usr/bin/python3 "$REPO/tests/wan-forwarder/listen.py" --addr "$addr" \
        --pidfile "$stem.pid" "$@" </dev/null >"$stem.log" 2>&1 &
    child=$!
    for ((n = 0; n < 100; n++)); do
        grep -qsx listening "$stem.log" && return 0
        if [ -n "$child" ] && ! proc_live "$child"; then
            # Exit 0: setsid forked and the listener goes on.
            rc=0
            wait "$child" || rc=$?
            [ "$rc" -eq 0 ] || die "$what did not start (exit $rc): $(cat "$stem.log")"
            child=
        fi
        sleep 0.1
    done
    die "$what are not listening after 10 s: $(cat "$stem.log")"
}

# True if the pid file names a live process whose name matches $2.
pid_alive() {
    local pid
    [ -s "$1" ] || return 1
    pid=$(tr -dc 0-9 <"$1")
    [ -n "$pid" ] && proc_live "$pid" && grep -q "$2" "/proc/$pid/comm" 2>/dev/null
}

# True if TCP port $2 on $1 accepts a connection from inside msscan.
port_open() {
    ns_exists "$SCAN_NS" || return 1
    ip netns exec "$SCAN_NS" timeout 1 bash -c "</dev/tcp/$1/$2" 2>/dev/null
}

all_ports_open() {
    local p
    for p in "${PORTS[@]}"; do port_open "$TARGET" "$p" || return 1; done
    for p in "${PORTS2[@]}"; do port_open "$TARGET2" "$p" || return 1; done
    port_open "$NAMED" "$NAMED_TLS" || return 1
    [ -s "/etc/netns/$SCAN_NS/hosts" ] && [ -s "/etc/netns/$SCAN_NS/resolv.conf" ]
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
    test -x /usr/sbin/vsftpd || missing+=(vsftpd)
    test -x /usr/sbin/exim4 || missing+=(exim4-daemon-light)
    pg_bindir >/dev/null || missing+=(postgresql)
    test -x /usr/bin/memcached || missing+=(memcached)
    test -x /usr/bin/freerdp-shadow-cli || missing+=(freerdp2-shadow-x11)
    test -x /usr/bin/Xvfb || missing+=(xvfb)
    command -v runuser >/dev/null || missing+=(util-linux)
    command -v nft >/dev/null || missing+=(nftables)
    mapfile -t -O "${#missing[@]}" missing < <(zoo_missing_packages)
    mapfile -t -O "${#missing[@]}" missing < <(udp_missing_packages)
    [ ${#missing[@]} -eq 0 ] && return 0
    log "installing: ${missing[*]}"
    # Units of these daemons the host had before are the user's: never touched.
    local had
    had=$(root_units)
    # The packages' own daemons (vsftpd, exim4, postgresql, memcached, nginx...)
    # must not start in the root namespace: a policy-rc.d that denies every
    # action keeps invoke-rc.d (and deb-systemd-invoke) from starting them.
    local policy=/usr/sbin/policy-rc.d ours=0
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\n# moonscan lab: installing packages, start no daemon\nexit 101\n' >"$policy"
        chmod 755 "$policy"
        ours=1
    fi
    # DPkg::Lock::Timeout waits for another running apt/dpkg instead of failing.
    local apt=(apt-get -y -q -o DPkg::Lock::Timeout=300) rc=0
    if ! DEBIAN_FRONTEND=noninteractive "${apt[@]}" install "${missing[@]}" >&2; then
        log "install failed; running apt-get update and retrying"
        DEBIAN_FRONTEND=noninteractive "${apt[@]}" update >&2 || true
        DEBIAN_FRONTEND=noninteractive "${apt[@]}" install "${missing[@]}" >&2 || rc=1
    fi
    [ "$ours" -eq 0 ] || rm -f "$policy"
    [ "$rc" -eq 0 ] || die "could not install ${missing[*]}"
    stop_new_root_daemons "$had"
    # spamassassin's postinst imports its update keys with gpg, which leaves
    # a gpg-agent running in the root namespace.
    if [ -d /var/lib/spamassassin/sa-update-keys ] && command -v gpgconf >/dev/null; then
        gpgconf --homedir /var/lib/spamassassin/sa-update-keys --kill gpg-agent 2>/dev/null || true
    fi
}

# The systemd units of the daemons the lab runs copies of (inside mstarget).
ROOT_UNITS=(vsftpd exim4 postgresql memcached apache2 lighttpd dovecot mariadb slapd named smbd nmbd squid
    tinyproxy cups mosquitto ngircd epmd rabbitmq-server tor xrdp xrdp-sesman openvpn munin-node dictd mpd
    gearman-job-server beanstalkd distcc danted spamd tomcat10 snmpd tftpd-hpa prosody rpcbind xinetd
    bitlbee inspircd icecast2 krb5-kdc krb5-admin-server nut-server nut-monitor nut-client webfs mini-httpd
    caddy caddy-api unbound unbound-resolvconf nsd knot pdns transmission-daemon supervisor apt-cacher-ng kamailio
    pdns-recursor gdnsd)

# Those of ROOT_UNITS this host has, one a line (none without systemd);
# rpcbind.socket and micro-httpd.socket too, which would start rpcbind and
# micro-httpd (on port 80) on the first connection.
root_units() {
    [ -d /run/systemd/system ] || return 0
    local unit
    for unit in "${ROOT_UNITS[@]/%/.service}" rpcbind.socket micro-httpd.socket; do
        systemctl list-unit-files "$unit" >/dev/null 2>&1 && echo "$unit"
    done
    return 0
}

# On a systemd host, the units the packages just installed enabled would
# start at the next boot (or, under a policy-rc.d that allows it, run
# already): stop and disable those, and only those. A unit the host had
# before the install (HAD, from root_units) is the user's, left as it is.
stop_new_root_daemons() { # had
    local unit
    while read -r unit; do
        [ -n "$unit" ] || continue
        grep -qxF "$unit" <<<"$1" && continue
        systemctl disable --now "$unit" >/dev/null 2>&1 || true
    done < <(root_units)
}

# --- network ----------------------------------------------------------------

setup_namespaces() {
    local ns
    for ns in "$SCAN_NS" "$TGT_NS" "$RATE_NS"; do
        ns_exists "$ns" || { log "creating namespace $ns"; ip netns add "$ns"; }
        ip -n "$ns" link set lo up
    done
    # The veth is created directly inside the namespaces, never in the root one.
    if ! ip -n "$SCAN_NS" link show "$SCAN_IF" >/dev/null 2>&1; then
        log "creating veth $SCAN_IF <-> $TGT_IF"
        ip link add "$SCAN_IF" netns "$SCAN_NS" type veth peer name "$TGT_IF" netns "$TGT_NS"
    fi
    # "replace" makes addresses and routes idempotent.
    ip -n "$SCAN_NS" addr replace "$SCAN_ADDR/24" dev "$SCAN_IF"
    ip -n "$SCAN_NS" -6 addr replace 2001:2::1/64 dev "$SCAN_IF" nodad
    ip -n "$SCAN_NS" link set "$SCAN_IF" up
    ip -n "$TGT_NS" addr replace "$TARGET/24" dev "$TGT_IF"
    ip -n "$TGT_NS" addr replace "$TARGET2/24" dev "$TGT_IF"
    ip -n "$TGT_NS" -6 addr replace 2001:2::2/64 dev "$TGT_IF" nodad
    ip -n "$TGT_NS" link set "$TGT_IF" up
    ip -n "$TGT_NS" addr replace "$FIREWALLED/24" dev "$TGT_IF"
    local l
    for l in "${LEGACY_TLS[@]}"; do
        ip -n "$TGT_NS" addr replace "${l%%:*}/24" dev "$TGT_IF"
    done
    ip -n "$TGT_NS" addr replace "$NAMED/24" dev "$TGT_IF"
    # The lab's names, for everything run in msscan (the rest of /etc/hosts
    # kept), and its resolver: dnsmasq on $TARGET (scripts/lab-udp.sh),
    # which also answers reverse lookups (PTR) for the lab's addresses.
    mkdir -p "/etc/netns/$SCAN_NS"
    { cat /etc/hosts; echo "$NAMED ${NAMES[*]}"; } >"/etc/netns/$SCAN_NS/hosts"
    printf 'nameserver %s\noptions timeout:1 attempts:2\n' "$TARGET" >"/etc/netns/$SCAN_NS/resolv.conf"
    ip -n "$SCAN_NS" route replace 198.19.0.0/16 via 198.18.0.2
    # mstarget owns all of 198.19.0.0/16 (65,536 hosts for sweeps).
    ip -n "$TGT_NS" route replace local 198.19.0.0/16 dev lo
    # msrate, behind mstarget: a second veth, also created inside the namespaces.
    if ! ip -n "$RATE_NS" link show "$RATE_IF" >/dev/null 2>&1; then
        log "creating veth $TGT_RATE_IF <-> $RATE_IF"
        ip link add "$TGT_RATE_IF" netns "$TGT_NS" type veth peer name "$RATE_IF" netns "$RATE_NS"
    fi
    ip -n "$TGT_NS" addr replace 198.18.1.1/24 dev "$TGT_RATE_IF"
    ip -n "$TGT_NS" link set "$TGT_RATE_IF" up
    ip -n "$RATE_NS" addr replace "$RATE/24" dev "$RATE_IF"
    ip -n "$RATE_NS" link set "$RATE_IF" up
    ip -n "$RATE_NS" route replace default via 198.18.1.1
    # A host route only: the rest of 198.18.1.0/24 stays unroutable from msscan.
    ip -n "$SCAN_NS" route replace "$RATE/32" via 198.18.0.2
    # "throw": no route at all (ENETUNREACH), as before the /16 route came.
    ip -n "$SCAN_NS" route replace throw 198.18.1.0/24
    # Host discovery's /16: 8 live hosts in 198.18.2.0/24, the rest dead.
    ip -n "$SCAN_NS" route replace 198.18.0.0/16 via 198.18.0.2
    ip -n "$TGT_NS" route replace blackhole 198.18.0.0/16
    local h
    for h in $LIVE8; do
        ip -n "$TGT_NS" addr replace "198.18.2.$h/32" dev lo
    done
}

# The firewalled target's rules, in a table of their own in mstarget
# (replaced whole, so "up" stays idempotent).
setup_firewall() {
    ip netns exec "$TGT_NS" nft -f - <<EOF || die "nft failed"
table inet mslab
delete table inet mslab
table inet mslab {
    chain input {
        type filter hook input priority 0; policy accept;
        ip daddr $FIREWALLED meta l4proto { tcp, udp } th dport 9 drop
        ip daddr $FIREWALLED tcp dport 10 reject with icmp type admin-prohibited
        ip daddr $FIREWALLED udp dport 10 reject with icmp type admin-prohibited
        # dnsmasq (udp/53 on $TARGET) listens on TCP 53 too: TCP sees it
        # closed, as with no listener, so $TARGET keeps its 4 TCP ports.
        ip daddr $TARGET tcp dport 53 reject with tcp reset
        # The legacy TLS port on many addresses is for 198.19.0.0/16 only.
        ip daddr != 198.19.0.0/16 tcp dport $LEGACY_WIDE_PORT reject with tcp reset
    }
    chain output {
        type filter hook output priority 0; policy accept;
        # nmbd's broadcasts (name registrations, host announcements) stay in
        # mstarget: nothing unasked for from $TARGET reaches the scanner.
        ip saddr $TARGET ip daddr 198.18.0.255 udp sport { 137, 138 } drop
    }
}
EOF
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
    # mstarget routes between msscan and msrate (forwarding is not rate
    # limited: only ICMP that mstarget itself sends would be).
    ip netns exec "$TGT_NS" sysctl -qw net.ipv4.ip_forward=1 || die "cannot enable forwarding in $TGT_NS"
    # msrate keeps the kernel's defaults: not set, only shown.
    local v k
    v=$(for k in icmp_ratelimit icmp_ratemask icmp_msgs_per_sec icmp_msgs_burst; do
        echo "$k=$(ip netns exec "$RATE_NS" sysctl -n "net.ipv4.$k" 2>/dev/null || echo '?')"
    done | paste -sd' ' -)
    log "$RATE_NS keeps the kernel's ICMP limits: $v"
}

# --- services ---------------------------------------------------------------

make_state() {
    mkdir -p "$STATE/www" "$STATE/nginx-tmp" "$STATE/redis" "$STATE/ftp" "$STATE/vsftpd-empty"
    chmod 755 "$STATE"
    mkdir -p /run/sshd && chmod 755 /run/sshd # sshd privilege separation dir
    echo '<!doctype html><html><head><title>moonscan lab</title></head><body>moonscan lab</body></html>' \
        >"$STATE/www/index.html"
    make_www
}

make_tls_cert() {
    [ -s "$STATE/tls.crt" ] && [ -s "$STATE/tls.key" ] && return 0
    log "generating self-signed TLS certificate"
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 \
        -keyout "$STATE/tls.key" -out "$STATE/tls.crt" \
        -subj "/CN=lab.moonscan.test/O=moonscan lab" \
        -addext "subjectAltName=DNS:lab.moonscan.test,DNS:www.lab.moonscan.test" 2>/dev/null
}

# A certificate of its own for each of NAMES: $STATE/NAME.crt and .key.
make_name_certs() {
    local n
    for n in "${NAMES[@]}"; do
        [ -s "$STATE/$n.crt" ] && [ -s "$STATE/$n.key" ] && continue
        openssl req -x509 -newkey rsa:2048 -nodes -days 3650 \
            -keyout "$STATE/$n.key" -out "$STATE/$n.crt" \
            -subj "/CN=$n/O=moonscan lab names" -addext "subjectAltName=DNS:$n" 2>/dev/null
    done
}

# nginx server blocks for NAMES on $NAMED: one site each, by Host and SNI;
# the default server refuses a TLS handshake that names no site.
named_servers() {
    local n
    mkdir -p "$STATE/www-none"
    echo '<!doctype html><html><head><title>no such site</title></head><body>no such site</body></html>' \
        >"$STATE/www-none/index.html"
    cat <<EOF
    server {
        listen $NAMED:$NAMED_HTTP default_server;
        listen $NAMED:$NAMED_TLS ssl default_server;
        ssl_reject_handshake on;
        root $STATE/www-none;
        index index.html;
    }
EOF
    for n in "${NAMES[@]}"; do
        mkdir -p "$STATE/www-$n"
        echo "<!doctype html><html><head><title>site ${n%%.*}</title></head><body>${n%%.*}</body></html>" \
            >"$STATE/www-$n/index.html"
        cat <<EOF
    server {
        listen $NAMED:$NAMED_HTTP;
        listen $NAMED:$NAMED_TLS ssl;
        server_name $n;
        ssl_certificate $STATE/$n.crt;
        ssl_certificate_key $STATE/$n.key;
        root $STATE/www-$n;
        index index.html;
    }
EOF
    done
}

# nginx server blocks for LEGACY_TLS, each the default server of its
# address's 443 (so its own protocols and suites apply).
legacy_tls_servers() {
    local l addr rest protocols ciphers dh
    for l in "${LEGACY_TLS[@]}"; do
        addr=${l%%:*} rest=${l#*:}
        protocols=${rest%%:*} rest=${rest#*:}
        ciphers=${rest%:dh} dh=
        [ "$rest" = "$ciphers" ] || dh="ssl_dhparam $STATE/dh1024.pem;"
        cat <<EOF
    server {
        listen $addr:443 ssl;
        ssl_protocols $protocols;
        ssl_ciphers "$ciphers:@SECLEVEL=0";
        ssl_prefer_server_ciphers on;
        $dh
        ssl_certificate $STATE/tls.crt;
        ssl_certificate_key $STATE/tls.key;
        root $STATE/www;
    }
EOF
    done
    cat <<EOF
    server {
        listen $LEGACY_WIDE_PORT ssl backlog=65535;
        ssl_protocols TLSv1;
        ssl_ciphers "DEFAULT:@SECLEVEL=0";
        ssl_certificate $STATE/tls.crt;
        ssl_certificate_key $STATE/tls.key;
        root $STATE/www;
    }
EOF
}

# The lab certificate as a daemon that drops privileges reads it:
# $STATE/tls-USER.crt and .key, owned by USER, the key mode 600.
tls_files_for() {
    make_tls_cert
    install -o "$1" -m 644 "$STATE/tls.crt" "$STATE/tls-$1.crt"
    install -o "$1" -m 600 "$STATE/tls.key" "$STATE/tls-$1.key"
}

start_nginx() {
    # Running with every server of this script's configuration: kept
    # (one started by an older lab.sh lacks the sites by name: restarted).
    if pid_alive "$STATE/nginx.pid" nginx; then
        port_open "$NAMED" "$NAMED_TLS" && return 0
        stop_service "$STATE/nginx.pid" nginx
    fi
    make_tls_cert
    make_name_certs
    # 1024-bit DH parameters for the DHE server (DSA-style: quick to make).
    [ -s "$STATE/dh1024.pem" ] || openssl dhparam -dsaparam -out "$STATE/dh1024.pem" 1024 2>/dev/null
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
$(legacy_tls_servers)
$(named_servers)
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

# vsftpd has no pid file and no daemon mode worth using: run it in the
# foreground, detached, and record its pid ("ip netns exec" and setsid exec).
start_vsftpd() {
    pid_alive "$STATE/vsftpd.pid" vsftpd && return 0
    # Anonymous read-only FTP; the chroot directories must not be writable.
    echo "moonscan lab" >"$STATE/ftp/README"
    chmod 755 "$STATE/ftp" "$STATE/vsftpd-empty"
    cat >"$STATE/vsftpd.conf" <<EOF
listen=YES
listen_ipv6=NO
listen_address=$TARGET2
listen_port=21
background=NO
anonymous_enable=YES
# AUTH TLS offered (the lab certificate), never required.
ssl_enable=YES
allow_anon_ssl=YES
force_local_data_ssl=NO
force_local_logins_ssl=NO
rsa_cert_file=$STATE/tls.crt
rsa_private_key_file=$STATE/tls.key
no_anon_password=YES
anon_root=$STATE/ftp
local_enable=NO
write_enable=NO
secure_chroot_dir=$STATE/vsftpd-empty
pam_service_name=vsftpd
xferlog_enable=NO
vsftpd_log_file=$STATE/vsftpd.log
max_clients=0
max_per_ip=0
EOF
    log "starting vsftpd"
    ip netns exec "$TGT_NS" setsid /usr/sbin/vsftpd "$STATE/vsftpd.conf" \
        </dev/null >>"$STATE/vsftpd.log" 2>&1 &
    echo $! >"$STATE/vsftpd.pid"
}

# Exim with a configuration of its own: an SMTP daemon that accepts nothing
# (every RCPT is refused), spool and logs under $STATE.
start_exim() {
    pid_alive "$STATE/exim.pid" exim && return 0
    tls_files_for Debian-exim
    cat >"$STATE/exim.conf" <<EOF
primary_hostname = lab.moonscan.test
local_interfaces = $TARGET2
# SMTP, SMTPS (TLS from the first byte) and submission (STARTTLS).
daemon_smtp_ports = 25 : 465 : 587
tls_on_connect_ports = 465
spool_directory = $STATE/exim
log_file_path = $STATE/exim/%slog
pid_file_path = $STATE/exim.pid
exim_user = Debian-exim
exim_group = Debian-exim
never_users = root
keep_environment =
host_lookup =
rfc1413_hosts =
# STARTTLS with the lab certificate (tests/lab/tls.rs reads its chain).
tls_advertise_hosts = *
tls_certificate = $STATE/tls-Debian-exim.crt
tls_privatekey = $STATE/tls-Debian-exim.key
smtp_accept_max = 1000
smtp_connect_backlog = 1024
acl_smtp_rcpt = acl_check_rcpt

begin acl

acl_check_rcpt:
  deny message = relay not permitted
EOF
    install -d -o Debian-exim -g Debian-exim -m 750 "$STATE/exim"
    log "starting exim"
    ip netns exec "$TGT_NS" /usr/sbin/exim4 -C "$STATE/exim.conf" -bd ||
        die "exim failed to start (see $STATE/exim)"
}

# PostgreSQL from Debian's packages, as the postgres user, data in $STATE/pg.
# Default pg_hba.conf: only loopback may log in, so the scanner is refused.
start_postgres() {
    pid_alive "$STATE/postgres.pid" postgres && return 0
    local bin pg=$STATE/pg
    bin=$(pg_bindir) || die "no PostgreSQL server under /usr/lib/postgresql"
    if [ ! -s "$pg/PG_VERSION" ]; then
        log "initdb $pg"
        rm -rf "$pg"
        install -d -o postgres -g postgres -m 700 "$pg"
        # From /: the postgres user may not be able to enter the current directory.
        (cd / && runuser -u postgres -- "$bin/initdb" -D "$pg" -A trust -E UTF8 --no-locale \
            --no-sync) >"$STATE/postgres-initdb.log" 2>&1 ||
            die "initdb failed (see $STATE/postgres-initdb.log)"
        cat >>"$pg/postgresql.conf" <<EOF
# moonscan lab
listen_addresses = '$TARGET2'
port = 5432
unix_socket_directories = ''
max_connections = 200
fsync = off
EOF
    fi
    clear_stale_postmaster "$pg"
    touch "$STATE/postgres.log" && chown postgres:postgres "$STATE/postgres.log"
    tls_files_for postgres
    log "starting postgres"
    # SSL on (the lab certificate): clients may ask for it with SSLRequest.
    (cd / && ip netns exec "$TGT_NS" runuser -u postgres -- "$bin/pg_ctl" -D "$pg" \
        -o "-c ssl=on -c ssl_cert_file=$STATE/tls-postgres.crt -c ssl_key_file=$STATE/tls-postgres.key" \
        -l "$STATE/postgres.log" -w -t 30 -s start) >&2 || die "postgres failed to start (see $STATE/postgres.log)"
    head -n 1 "$pg/postmaster.pid" >"$STATE/postgres.pid"
}

# A result store for `moonscan --db postgres://moonscan@198.18.0.3/moonscan_results`:
# role moonscan, trusted from 198.18.0.0/24 for that database only. Not
# database "moonscan": the PgStartup probe logs in as moonscan/moonscan and
# must still be refused. The superuser may log in from mstarget itself
# (to create them). Idempotent; reloads the server only when pg_hba changes.
setup_postgres_store() {
    local bin pg=$STATE/pg line added=0 i psql
    bin=$(pg_bindir) || die "no PostgreSQL server under /usr/lib/postgresql"
    for line in "host moonscan_results moonscan 198.18.0.0/24 trust" "host all postgres samehost trust"; do
        grep -qxF "$line" "$pg/pg_hba.conf" || { echo "$line" >>"$pg/pg_hba.conf"; added=1; }
    done
    [ "$added" -eq 0 ] || (cd / && runuser -u postgres -- "$bin/pg_ctl" -D "$pg" -s reload) >&2
    psql=(ip netns exec "$TGT_NS" "$bin/psql" -X -q -A -t -v ON_ERROR_STOP=1 -h "$TARGET2" -U postgres -d postgres)
    # The reload is asynchronous: wait until the superuser gets in.
    for ((i = 0; i < 50; i++)); do
        "${psql[@]}" -c 'SELECT 1' >/dev/null 2>&1 && break
        sleep 0.1
    done
    [ -n "$("${psql[@]}" -c "SELECT 1 FROM pg_roles WHERE rolname = 'moonscan'")" ] ||
        "${psql[@]}" -c 'CREATE ROLE moonscan LOGIN' || die "cannot create the moonscan role"
    [ -n "$("${psql[@]}" -c "SELECT 1 FROM pg_database WHERE datname = 'moonscan_results'")" ] ||
        "${psql[@]}" -c 'CREATE DATABASE moonscan_results OWNER moonscan' ||
        die "cannot create the moonscan_results database"
}

# A postmaster that was killed outright leaves its lock file, and for a moment
# its children and a zombie that postgres would take for a live server. Wait
# for the children to notice and exit, then remove the lock.
clear_stale_postmaster() {
    local lock=$1/postmaster.pid old pid i left
    [ -s "$lock" ] || return 0
    old=$(head -n 1 "$lock" | tr -dc 0-9)
    [ -n "$old" ] && proc_live "$old" && return 0
    for ((i = 0; i < 50; i++)); do
        left=0
        for pid in $(ip netns pids "$TGT_NS" 2>/dev/null); do
            proc_live "$pid" && grep -qx postgres "/proc/$pid/comm" 2>/dev/null && left=1
        done
        [ "$left" -eq 1 ] || break
        sleep 0.1
    done
    log "removing stale $lock"
    rm -f "$lock"
}

# In the foreground, like vsftpd: memcached writes its -P pid file only after
# dropping to the memcache user, who cannot write to $STATE.
start_memcached() {
    pid_alive "$STATE/memcached.pid" memcached && return 0
    log "starting memcached"
    ip netns exec "$TGT_NS" setsid /usr/bin/memcached -u memcache -l "$TARGET2" -p 11211 -U 0 \
        -c 4096 </dev/null >>"$STATE/memcached.log" 2>&1 &
    echo $! >"$STATE/memcached.pid"
}

# An RDP server with NLA (CredSSP): FreeRDP's shadow server, showing an
# Xvfb screen, both in the foreground inside mstarget. Its NTLM CHALLENGE
# is what rdp-ntlm-info reads (xrdp on the zoo offers no CredSSP). The SAM
# file holds one user whose password nobody knows: no one logs in.
start_rdp() {
    pid_alive "$STATE/rdp.pid" freerdp-shadow && return 0
    local d=$STATE/rdp
    mkdir -p "$d"
    echo "lab:::$(openssl rand -hex 16):::" >"$d/sam"
    if ! pid_alive "$STATE/rdp-x.pid" Xvfb; then
        # Display 78: its lock and socket in /tmp must not meet a real X server's.
        rm -f /tmp/.X78-lock /tmp/.X11-unix/X78
        ip netns exec "$TGT_NS" setsid /usr/bin/Xvfb :78 -nolisten tcp -screen 0 640x480x24 \
            </dev/null >>"$d/xvfb.log" 2>&1 &
        echo $! >"$STATE/rdp-x.pid"
        for _ in $(seq 50); do [ -e /tmp/.X11-unix/X78 ] && break; sleep 0.1; done
    fi
    # Xvfb's socket can appear before it takes clients: a shadow server that
    # finds no display exits at once, and is started again (5 tries).
    local try
    for try in 1 2 3 4 5; do
        log "starting freerdp-shadow-cli"
        # HOME: where it keeps the certificate it makes.
        ip netns exec "$TGT_NS" env DISPLAY=:78 HOME="$d" setsid /usr/bin/freerdp-shadow-cli \
            /bind-address:"$TARGET2" /port:3389 /sec:nla +auth /sam-file:"$d/sam" \
            </dev/null >>"$d/shadow.log" 2>&1 &
        echo $! >"$STATE/rdp.pid"
        for _ in $(seq 20); do
            port_open "$TARGET2" 3389 && return 0
            pid_alive "$STATE/rdp.pid" freerdp-shadow || break
            sleep 0.25
        done
        pid_alive "$STATE/rdp.pid" freerdp-shadow && return 0
        log "freerdp-shadow-cli exited (try $try; see $d/shadow.log)"
        sleep 0.5
    done
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
    for p in "${PORTS2[@]}"; do
        until port_open "$TARGET2" "$p"; do
            ((SECONDS < deadline)) ||
                die "$(service_of_port "$p") is not answering on $TARGET2:$p (logs in $STATE)"
            sleep 0.5
        done
    done
}

stop_service() { # pidfile name [signal]
    local pid i
    pid_alive "$1" "$2" || return 0
    pid=$(tr -dc 0-9 <"$1")
    log "stopping $2 (pid $pid)"
    kill -"${3:-TERM}" "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
        proc_live "$pid" || return 0
        sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null || true
}

# --- commands ---------------------------------------------------------------

cmd_up() {
    install_packages
    setup_namespaces
    os_setup
    setup_sysctls
    setup_firewall
    make_state
    start_nginx
    start_sshd
    start_redis
    start_vsftpd
    start_exim
    start_postgres
    setup_postgres_store
    start_memcached
    start_rdp
    zoo_start
    udp_start
    os_start
    wait_ports
    zoo_wait
    udp_wait
    os_wait
    log "up: scanner in netns $SCAN_NS, targets $TARGET, $TARGET2, $ZOO, $RATE (netns $RATE_NS), 2001:2::2, 198.19.0.0/16, 8 live hosts of 198.18.2.0/24"
}

cmd_down() {
    wan_down
    stop_service "$STATE/nginx.pid" nginx
    stop_service "$STATE/sshd.pid" sshd
    stop_service "$STATE/redis.pid" redis-server
    stop_service "$STATE/vsftpd.pid" vsftpd
    stop_service "$STATE/exim.pid" exim
    # SIGINT: "fast" shutdown, which does not wait for clients to leave.
    stop_service "$STATE/postgres.pid" postgres INT
    stop_service "$STATE/memcached.pid" memcached
    stop_service "$STATE/rdp.pid" freerdp-shadow
    stop_service "$STATE/rdp-x.pid" Xvfb
    rm -f /tmp/.X78-lock /tmp/.X11-unix/X78
    zoo_stop
    udp_stop
    os_stop
    local ns
    for ns in "$SCAN_NS" "$TGT_NS" "$RATE_NS"; do
        delete_ns "$ns"
    done
    rm -f "/etc/netns/$SCAN_NS/hosts" "/etc/netns/$SCAN_NS/resolv.conf"
    rmdir "/etc/netns/$SCAN_NS" /etc/netns 2>/dev/null || true
    rm -rf "$STATE"
    log "down"
}

cmd_status() {
    local ok=0 ns p svc
    for ns in "$SCAN_NS" "$TGT_NS" "$RATE_NS" $(os_ns_all); do
        if ns_exists "$ns"; then echo "namespace $ns: present"; else echo "namespace $ns: MISSING"; ok=1; fi
    done
    for svc in nginx sshd redis vsftpd exim postgres memcached rdp; do
        if pid_alive "$STATE/$svc.pid" "$svc"; then
            echo "$svc: running (pid $(tr -dc 0-9 <"$STATE/$svc.pid"))"
        else
            echo "$svc: not running"
        fi
    done
    for p in "${PORTS[@]}"; do
        if port_open "$TARGET" "$p"; then echo "port $TARGET:$p: open"; else echo "port $TARGET:$p: CLOSED"; ok=1; fi
    done
    for p in "${PORTS2[@]}"; do
        if port_open "$TARGET2" "$p"; then echo "port $TARGET2:$p: open"; else echo "port $TARGET2:$p: CLOSED"; ok=1; fi
    done
    zoo_status || ok=1
    udp_status || ok=1
    return $ok
}

# Bring the lab up only if it is not already fully working (or was brought
# up by an older lab.sh, with no msrate).
ensure_up() { { all_ports_open && ns_exists "$RATE_NS" && os_ready; } || cmd_up; }

# "up", "down" and the start of "exec" and "scan" run one at a time: parallel
# test runs all call "exec", and two "up"s at once would race (ssh-keygen,
# initdb). The script runs again under flock -o, which holds the lock itself,
# so the daemons started never inherit it.
locked() { # up|down|ensure-up|wan up ARGS...|wan down
    if [ -n "${MOONSCAN_LAB_LOCKED:-}" ]; then
        unset MOONSCAN_LAB_LOCKED
        case $1 in up) cmd_up ;; down) cmd_down ;; ensure-up) ensure_up ;; wan) cmd_wan "${@:2}" ;; esac
        return
    fi
    local rc=0
    MOONSCAN_LAB_LOCKED=1 flock -o -E 75 -w 600 "$LOCK" "$BASH" "${BASH_SOURCE[0]}" "$@" || rc=$?
    [ "$rc" -ne 75 ] || die "timed out waiting for $LOCK"
    return "$rc"
}

cmd_scan() {
    locked ensure-up
    # Builds (with cargo's progress) and puts moonscan, its man page and
    # completions on this machine (scripts/install.sh).
    "$REPO/scripts/install.sh" || die "scripts/install.sh failed"
    local target
    target=$("$REPO/scripts/cargo-target-dir.sh") || die "cannot tell where cargo builds"
    exec ip netns exec "$SCAN_NS" "$target/release/moonscan" "$@"
}

# "wan up" and "wan down" run under the lock (and touch only the WAN's
# namespaces); "wan up" builds the forwarder first, outside it.
cmd_wan() {
    case ${1:-} in
    up) wan_up "${@:2}" ;;
    down) wan_down ;;
    *) usage ;;
    esac
}

main() {
    [ $# -ge 1 ] || usage
    [ "$(id -u)" -eq 0 ] || die "must run as root"
    local cmd=$1
    shift
    case $cmd in
    up) locked up ;;
    down) locked down ;;
    ensure-up) # internal: "exec" and "scan" run it under the lock
        [ -n "${MOONSCAN_LAB_LOCKED:-}" ] || usage
        locked ensure-up
        ;;
    status) cmd_status ;;
    ports) # open ports: "ADDR:PORT,PORT..." per line for TCP (the targets of
        # service detection tests), "udp ADDR:PORT,PORT..." for UDP. Plain
        # "ports" prints the TCP lines only: tests/lab/daemons.rs and bench.sh
        # read every line as ADDR:PORTS.
        case ${1:-tcp} in
        tcp | all)
            echo "$TARGET2:$(IFS=,; echo "${PORTS2[*]}")"
            echo "$ZOO:$( (IFS=$'\n'; echo "${PORTS[*]}"; zoo_ports | tr , '\n') | sort -n | paste -sd, -)"
            ;;&
        udp | all) udp_ports ;;&
        tcp | udp | all) ;;
        *) usage ;;
        esac
        ;;
    exec)
        [ $# -ge 1 ] || usage
        locked ensure-up
        exec ip netns exec "$SCAN_NS" "$@"
        ;;
    scan) cmd_scan "$@" ;;
    wan)
        case ${1:-} in
        up)
            # Under the lock (the script runs again) the build is done.
            if [ -z "${MOONSCAN_LAB_LOCKED:-}" ]; then
                wan_build
                MOONSCAN_WAN_BIN=$(wan_bin)
                export MOONSCAN_WAN_BIN
            fi
            locked wan "$@"
            ;;
        down) locked wan down ;;
        status) wan_status ;;
        ports) wan_ports ;;
        *) usage ;;
        esac
        ;;
    *) usage ;;
    esac
}

main "$@"
