# shellcheck shell=bash
# The lab's UDP daemons, sourced by scripts/lab.sh (after lab-daemons.sh).

# --- UDP daemons --------------------------------------------------------------
#
# Real Debian daemons answering UDP, for UDP scans (-sU): on 198.18.0.2 in
# mstarget (no TCP listener of theirs is reachable there: see lab.sh's
# firewall for dnsmasq's TCP 53), and on 198.18.1.2 in msrate, the target
# whose kernel keeps Linux's default ICMP rate limit. Same conventions as the
# zoo: own configuration under $UDP_DIR, in the foreground, detached with
# setsid, pid in $UDP_DIR/NAME.pid; "down" stops exactly those.
#
# tftpd answers from a new port (as TFTP does), so a scanner that matches
# replies by port sees 69 as open|filtered; nmbd also listens on udp/138,
# where it answers nothing (open|filtered too).

UDP_DIR=$STATE/udp

# name:comm:address:ports (ports: those that answer a probe; the namespace
# follows from the address, see udp_ns).
UDP_DAEMONS=(
    "dnsmasq:dnsmasq:$TARGET:53"
    "tftpd:in.tftpd:$TARGET:69"
    "chronyd:chronyd:$TARGET:123"
    "nmbd:nmbd:$TARGET:137"
    "snmpd:snmpd:$TARGET:161"
    "memcached-udp:memcached:$TARGET:11211"
    "rate-dnsmasq:dnsmasq:$RATE:53"
    "rate-chronyd:chronyd:$RATE:123"
    "rate-snmpd:snmpd:$RATE:161"
)

# Debian packages of the UDP daemons. chrony is not installed: as a package
# it conflicts with every other time daemon (systemd-timesyncd, Debian's
# default, among them), which apt would remove from the host. It is unpacked
# like the zoo's FTP daemons and needs only its libraries.
udp_missing_packages() {
    local -A need=(
        [/usr/sbin/dnsmasq]=dnsmasq-base [/usr/sbin/snmpd]=snmpd [/usr/sbin/in.tftpd]=tftpd-hpa
        [/usr/sbin/nmbd]=samba [/usr/bin/python3]=python3
        [/usr/lib/x86_64-linux-gnu/libedit.so.2]=libedit2 [/usr/lib/x86_64-linux-gnu/libseccomp.so.2]=libseccomp2
        [/usr/lib/x86_64-linux-gnu/libcap.so.2]=libcap2 [/usr/lib/x86_64-linux-gnu/libgnutls.so.30]=libgnutls30
        [/usr/lib/x86_64-linux-gnu/libnettle.so.8]=libnettle8
    )
    local f
    for f in "${!need[@]}"; do [ -e "$f" ] || echo "${need[$f]}"; done | sort -u
}

udp_addr() { # name:comm:address:ports -> address
    local rest=${1#*:}
    rest=${rest#*:}
    echo "${rest%%:*}"
}

udp_ns() { # address -> the namespace that holds it
    if [ "$1" = "$RATE" ]; then echo "$RATE_NS"; else echo "$TGT_NS"; fi
}

# Runs a daemon in the foreground inside a namespace, detached, its output in
# $UDP_DIR/NAME.log, its pid in $UDP_DIR/NAME.pid.
udp_run() { # name namespace cmd...
    local name=$1 ns=$2
    shift 2
    ip netns exec "$ns" setsid "$@" </dev/null >>"$UDP_DIR/$name.log" 2>&1 &
    echo $! >"$UDP_DIR/$name.pid"
}

# DNS with a few local records and no upstream (no DHCP: no --dhcp-range):
# the lab's resolver (msscan's resolv.conf names 198.18.0.2). Forward and
# reverse zones: each --host-record is an A record and its PTR (the first
# name's: 198.18.0.12 is alpha), the live hosts of 198.18.2.0/24 are
# liveN, dead host 198.18.2.5 is dead5 (for -R), two.lab.moonscan.test
# has two IPv4 addresses (--resolve-all) and six.lab.moonscan.test only
# an IPv6 one (-6); any other address of the lab's blocks has no name
# (NXDOMAIN at once: --local, never "refused"). dnsmasq opens TCP 53 on the address
# too; lab.sh's firewall resets it on 198.18.0.2.
udp_start_dnsmasq() { # name address
    local live=() h
    for h in $LIVE8; do live+=("--host-record=live$h.lab.moonscan.test,198.18.2.$h"); done
    udp_run "$1" "$(udp_ns "$2")" /usr/sbin/dnsmasq --keep-in-foreground --conf-file=/dev/null --pid-file= \
        --log-facility="$UDP_DIR/$1-own.log" --user=nobody --group=nogroup \
        --listen-address="$2" --bind-interfaces --port=53 --no-resolv --no-hosts --no-poll \
        --local=/lab.moonscan.test/ --domain=lab.moonscan.test \
        --local=/18.198.in-addr.arpa/ --local=/19.198.in-addr.arpa/ --local=/0.0.0.0.2.0.0.0.1.0.0.2.ip6.arpa/ \
        --host-record=target.lab.moonscan.test,198.18.0.2,2001:2::2 --host-record=target2.lab.moonscan.test,198.18.0.3 \
        --host-record=alpha.lab.moonscan.test,198.18.0.12 --host-record=beta.lab.moonscan.test,198.18.0.12 \
        --host-record=rate.lab.moonscan.test,198.18.1.2 --host-record=dead5.lab.moonscan.test,198.18.2.5 \
        --address=/two.lab.moonscan.test/198.18.0.2 --address=/two.lab.moonscan.test/198.18.0.3 \
        --address=/six.lab.moonscan.test/2001:2::2 \
        --txt-record=lab.moonscan.test,"moonscan lab" "${live[@]}"
}

# SNMP v1/v2c (read-only community "public") and v3 (engine discovery; one
# authPriv user). -C: no configuration file but ours; MIBS= : no MIB loaded
# (Debian's few fail to load without the non-free ones, a page of noise);
# -I -smux: no SMUX listener (TCP 199 on every address).
udp_start_snmpd() { # name address
    local d=$UDP_DIR/$1 host=target
    [ "$2" != "$RATE" ] || host=rate
    install -d -o Debian-snmp -g Debian-snmp "$d"
    cat >"$UDP_DIR/$1.conf" <<EOF
[snmp] persistentDir $d
agentaddress udp:$2:161
rocommunity public default
sysDescr moonscan lab SNMP agent (Net-SNMP on Linux)
sysName $host.lab.moonscan.test
sysLocation moonscan lab
sysContact lab@lab.moonscan.test
sysServices 72
createUser labuser SHA moonscan-lab-auth AES moonscan-lab-priv
rouser labuser priv
EOF
    # -LF w: warnings and worse only, not a line per request.
    udp_run "$1" "$(udp_ns "$2")" env MIBS= /usr/sbin/snmpd -f -LF w "$UDP_DIR/$1-own.log" \
        -u Debian-snmp -g Debian-snmp -I -smux,mteTrigger,mteTriggerConf -C -c "$UDP_DIR/$1.conf"
}

# An NTP server on its own clock (local stratum 10, no sources). -x: chronyd
# never touches the clock, which the namespaces share with the host.
# cmdport 0 and bindcmdaddress /: no command sockets at all.
udp_start_chronyd() { # name address
    local root
    root=$(zoo_unpacked chrony)
    cat >"$UDP_DIR/$1.conf" <<EOF
bindaddress $2
port 123
cmdport 0
bindcmdaddress /
allow 198.18.0.0/15
local stratum 10
user nobody
pidfile $UDP_DIR/$1.pid.own
EOF
    udp_run "$1" "$(udp_ns "$2")" "$root/usr/sbin/chronyd" -x -d -f "$UDP_DIR/$1.conf"
}

# Read-only TFTP of one small file, chrooted (--secure) in $UDP_DIR/tftp.
udp_start_tftpd() { # name address
    local t=$UDP_DIR/tftp
    mkdir -p "$t"
    echo "moonscan lab" >"$t/README.txt"
    chmod 755 "$t"
    chmod 644 "$t/README.txt"
    udp_run "$1" "$(udp_ns "$2")" /usr/sbin/in.tftpd --listen --foreground --address "$2:69" --secure \
        --user nobody "$t"
}

# A second memcached, UDP only: -p 0 opens no TCP socket (lab.sh's memcached
# on 198.18.0.3 is TCP only).
udp_start_memcached-udp() { # name address
    udp_run "$1" "$(udp_ns "$2")" /usr/bin/memcached -u memcache -l "$2" -p 0 -U 11211
}

# NetBIOS name service: nmbd on the address (and its subnet's broadcast
# address) only, never a wildcard socket (nbt client socket address), with
# directories of its own (its "unexpected" socket too: nmbd:socket dir). It
# opens no TCP socket. Never a browse master; its broadcasts (name
# registrations, host announcements) are dropped inside mstarget by lab.sh's
# firewall, so the scanner gets nothing it did not ask for (nmbd logs the
# failed sends).
udp_start_nmbd() { # name address
    local s=$UDP_DIR/$1
    mkdir -p "$s/private" "$s/lock" "$s/state" "$s/cache" "$s/pid" "$s/nmbd"
    cat >"$s/smb.conf" <<EOF
[global]
  workgroup = MOONSCAN
  netbios name = TARGET
  server role = standalone server
  interfaces = $2/24
  bind interfaces only = yes
  nbt client socket address = $2
  local master = no
  domain master = no
  preferred master = no
  os level = 0
  private dir = $s/private
  lock directory = $s/lock
  state directory = $s/state
  cache directory = $s/cache
  pid directory = $s/pid
  ncalrpc dir = $s/ncalrpc
  nmbd:socket dir = $s/nmbd
  log file = $UDP_DIR/$1-own.log
  load printers = no
  printing = bsd
  printcap name = /dev/null
EOF
    udp_run "$1" "$(udp_ns "$2")" /usr/sbin/nmbd --foreground --no-process-group -s "$s/smb.conf"
}

udp_alive() { # name:comm:address:ports
    local rest=${1#*:}
    pid_alive "$UDP_DIR/${1%%:*}.pid" "${rest%%:*}"
}

udp_start() {
    local d name addr
    mkdir -p "$UDP_DIR"
    chmod 755 "$UDP_DIR"
    for d in "${UDP_DAEMONS[@]}"; do
        udp_alive "$d" && continue
        name=${d%%:*}
        addr=$(udp_addr "$d")
        log "starting $name on $addr"
        # rate-dnsmasq runs udp_start_dnsmasq, and so on.
        "udp_start_${name#rate-}" "$name" "$addr"
    done
}

# One probe a service answers, as hex: DNS A query, TFTP read request, NTP
# client request, NetBIOS node status, SNMPv2c get sysDescr.0 (public),
# memcached "version" in its UDP frame.
udp_probe() { # port
    case $1 in
    53) echo 12340100000100000000000006746172676574036c6162086d6f6f6e7363616e04746573740000010001 ;;
    69) echo 0001524541444d452e747874006f6374657400 ;;
    123) printf '1b%094d\n' 0 ;;
    137) echo 12340000000100000000000020434b4141414141414141414141414141414141414141414141414141414141410000210001 ;;
    161) echo 302902010104067075626c6963a01c020400000001020100020100300e300c06082b060102010101000500 ;;
    11211) echo 000100000001000076657273696f6e0d0a ;;
    esac
}

# True if $1:$2 answers its probe, from any port of that address (tftpd
# answers from a new one, and is told the transfer is over), within a
# second, seen from inside msscan.
udp_answers() { # address port
    ns_exists "$SCAN_NS" || return 1
    ip netns exec "$SCAN_NS" timeout 3 /usr/bin/python3 -c '
import socket, sys
addr, port, probe = sys.argv[1], int(sys.argv[2]), bytes.fromhex(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(1)
s.sendto(probe, (addr, port))
try:
    while True:
        data, peer = s.recvfrom(65535)
        if peer[0] == addr and data:
            if peer[1] != port and data[:2] == b"\x00\x03":
                s.sendto(b"\x00\x05\x00\x00done\x00", peer)  # TFTP ERROR: end the transfer
            sys.exit(0)
except OSError:
    sys.exit(1)
' "$1" "$2" "$(udp_probe "$2")" 2>/dev/null
}

# Wait (up to 20 s in total) until every UDP daemon answers. As with the zoo,
# one that does not is a warning: "lab.sh status" fails on it.
udp_wait() {
    wait_answering 60 udp_answers udp_addr "$UDP_DIR" "${UDP_DAEMONS[@]}"
}

udp_stop() {
    local d rest
    for d in "${UDP_DAEMONS[@]}"; do
        rest=${d#*:}
        stop_service "$UDP_DIR/${d%%:*}.pid" "${rest%%:*}"
    done
}

udp_ports() { # "udp ADDR:PORT,PORT..." per address, ports ascending
    local d addr
    for addr in "$TARGET" "$RATE"; do
        echo "udp $addr:$(for d in "${UDP_DAEMONS[@]}"; do
            [ "$(udp_addr "$d")" != "$addr" ] || echo "${d##*:}"
        done | tr , '\n' | sort -n | paste -sd, -)"
    done
}

udp_status() {
    local d p addr ok=0
    for d in "${UDP_DAEMONS[@]}"; do
        addr=$(udp_addr "$d")
        for p in $(echo "${d##*:}" | tr , ' '); do
            if udp_answers "$addr" "$p"; then
                echo "udp port $addr:$p (${d%%:*}): open"
            else
                echo "udp port $addr:$p (${d%%:*}): CLOSED"
                ok=1
            fi
        done
    done
    return $ok
}
