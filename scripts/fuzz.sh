#!/usr/bin/env bash
# Runs cargo-fuzz targets for a while each (libFuzzer) and says, per target,
# how many inputs it ran and whether it found a crash. Not part of
# scripts/test.sh: the parsers' unit tests already feed them truncated and
# random bytes; this digs deeper when there is time.
#
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#   SECONDS_PER_TARGET  default 60
#   TARGET              default: every target of fuzz/Cargo.toml
#                       (syn_reply probe_yaml match_rules cert_summary
#                       udp_reply ping_reply server_flight starttls_reply)
# Exits 1 if any target crashed (or timed out, ran out of memory, leaked),
# 2 if a target could not be built or run.
#
# New inputs that add coverage go to fuzz/corpus/TARGET/, crashing ones to
# fuzz/artifacts/TARGET/ (both git-ignored). Seeds come from files the repo
# already has, passed as a second, read-only corpus folder:
#   probe_yaml    probes/http.yaml, probes/null.yaml
#   match_rules   tests/data/banners/*.bin as responses, a few patterns
#   cert_summary  tests/data/tls/*.pem as DER
#   server_flight a TLS 1.2 flight carrying tests/data/tls/lab-cert.pem
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
secs=60
if [[ ${1:-} =~ ^[0-9]+$ ]]; then
    secs=$1
    shift
fi
[[ :$PATH: == *":$HOME/.cargo/bin:"* ]] || PATH=$HOME/.cargo/bin:$PATH
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
# The machine has a stable toolchain only; cargo-fuzz needs a few unstable
# flags, which RUSTC_BOOTSTRAP allows on stable.
export RUSTC_BOOTSTRAP=1

mapfile -t known < <(cargo fuzz list)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${known[@]}")
for t in "${targets[@]}"; do
    [[ " ${known[*]} " == *" $t "* ]] || { echo "fuzz.sh: no target $t (have: ${known[*]})" >&2; exit 2; }
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Fills folder $2 with seed inputs for target $1.
seed() {
    mkdir -p "$2"
    case $1 in
    probe_yaml)
        cp probes/http.yaml probes/null.yaml "$2"/
        ;;
    match_rules)
        # No 0xff byte: the whole input is a response for the shipped rules.
        cp tests/data/banners/*.bin "$2"/
        printf '%s\xff%s' '^SSH-2\.0-OpenSSH_([\w._-]+)(?: (.*))?\r?\n' $'SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n' >"$2"/ssh
        printf '(?s-u)^\\x16\\x03[\\x00-\\x03](..)(.)\xff\x16\x03\x01\x00\x05\x02' >"$2"/binary
        printf '%s\xff%s' '^HTTP/1\.[01] (\d+) .*?\r\nServer: ([^\r\n]+)' $'HTTP/1.1 200 OK\r\nServer: nginx/1.25.3\r\n\r\n' >"$2"/http
        ;;
    cert_summary)
        for pem in tests/data/tls/*.pem; do
            openssl x509 -in "$pem" -outform der -out "$2/$(basename "$pem" .pem).der"
        done
        ;;
    server_flight)
        # A step byte, then a TLS 1.2 flight: ServerHello (renegotiation_info),
        # the lab certificate, ECDHE secp256r1 parameters, ServerHelloDone.
        openssl x509 -in tests/data/tls/lab-cert.pem -outform der -out "$2/lab.der"
        python3 - "$2" <<'PY'
import struct, sys
d = sys.argv[1]
der = open(f"{d}/lab.der", "rb").read()
def msg(t, b): return bytes([t]) + len(b).to_bytes(3, "big") + b
ext = struct.pack("!HHB", 0xFF01, 1, 0)
hello = struct.pack("!H32sBHBH", 0x0303, bytes(32), 0, 0xC02F, 0, len(ext)) + ext
certs = len(der).to_bytes(3, "big") + der
ske = bytes([3, 0, 23, 65, 4]) + bytes(64) + b"\x04\x01\x00\x00"
hs = msg(2, hello) + msg(11, len(certs).to_bytes(3, "big") + certs) + msg(12, ske) + msg(14, b"")
rec = b"".join(struct.pack("!BHH", 22, 0x0303, len(c)) + c for c in [hs[i:i + 700] for i in range(0, len(hs), 700)])
open(f"{d}/flight", "wb").write(b"\x07" + rec)
PY
        rm "$2/lab.der"
        ;;
    starttls_reply)
        printf '220-mail ESMTP\r\n220 ready\r\n250-mail\r\n250 STARTTLS\r\n220 go\r\n' >"$2"/smtp
        printf '* OK ready\r\nms1 OK begin\r\n' >"$2"/imap
        printf '\x30\x0c\x02\x01\x01\x78\x07\x0a\x01\x00\x04\x00\x04\x00' >"$2"/ldap
        printf "<stream:features><starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'/></stream:features><proceed/>" >"$2"/xmpp
        ;;
    esac
}

# Largest input per target: enough for its seeds, small enough to stay fast.
max_len() {
    case $1 in
    probe_yaml) echo 12288 ;; # probes/null.yaml is about 10 KiB
    match_rules | cert_summary | server_flight) echo 4096 ;;
    *) echo 512 ;;
    esac
}

cargo fuzz build >&2 || { echo "fuzz.sh: cargo fuzz build failed" >&2; exit 2; }

summary=()
status=0
for t in "${targets[@]}"; do
    echo "== fuzzing $t for ${secs}s" >&2
    seeds=$work/seeds-$t
    seed "$t" "$seeds"
    mkdir -p "fuzz/corpus/$t"
    log=$work/$t.log
    rc=0
    cargo fuzz run "$t" "fuzz/corpus/$t" "$seeds" -- \
        -max_total_time="$secs" -max_len="$(max_len "$t")" -print_final_stats=1 2>&1 | tee "$log" >&2 ||
        rc=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    [ -n "$runs" ] || runs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$log" | tail -n 1)
    # libFuzzer names what it stopped on: crash-, timeout-, oom-, leak-…
    artifact=$(sed -n 's/.*Test unit written to \(.*\/\(crash\|timeout\|oom\|leak\)-[0-9a-f]*\)$/\1/p' "$log" | tail -n 1)
    if [ -n "$artifact" ]; then
        result="CRASH: $artifact"
        status=1
    elif [ "$rc" -ne 0 ]; then
        result="ERROR: cargo fuzz run exited $rc without a crash input (see the log above)"
        [ "$status" -ne 0 ] || status=2
    else
        result="no crash"
    fi
    summary+=("$(printf '%-14s %12s runs in %ss  %s' "$t" "${runs:-?}" "$secs" "$result")")
done

echo "== fuzz summary"
printf '%s\n' "${summary[@]}"
exit "$status"
