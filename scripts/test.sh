#!/usr/bin/env bash
# Runs every moonscan test on a fresh machine (as root): installs what the
# tests need, brings the lab up (scripts/lab.sh), then runs the WAN
# forwarder's tests and, with cargo, the unit tests, the hermetic
# integration tests (tests/tests.rs: what a plain `cargo test` runs, with
# the doc tests), then the lab's (tests/lab/main.rs, `cargo test --test lab`,
# which needs the lab up).
#
# Usage: scripts/test.sh [extra cargo test arguments, given to both cargo runs]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

[ "$(id -u)" -eq 0 ] || { echo "test.sh: run as root (the lab needs network namespaces)" >&2; exit 1; }

# Debian packages the tests use beyond the lab's own (lab.sh installs those).
missing=()
command -v script >/dev/null || missing+=(bsdutils)
command -v nmap >/dev/null || missing+=(nmap) # its nmap-service-probes file feeds the probes-import test
command -v ss >/dev/null || missing+=(iproute2)
command -v cc >/dev/null || missing+=(gcc)
command -v g++ >/dev/null || missing+=(g++) # Luau (mlua) is C++
test -x /usr/bin/time || missing+=(time)               # peak RSS in the service tests
test -x /usr/bin/python3 || missing+=(python3)         # tests/hostile/*.py servers
# nmap's own clients read moonscan's -oX (tests/lab/outputs.rs): python-libnmap
# from Debian (Debian's Python refuses pip installs, PEP 668), ndiff, xmllint.
/usr/bin/python3 -c 'import libnmap.parser' 2>/dev/null || missing+=(python3-libnmap)
command -v ndiff >/dev/null || missing+=(ndiff)
command -v xmllint >/dev/null || missing+=(libxml2-utils)
command -v xsltproc >/dev/null || missing+=(xsltproc) # renders -oX with nmap's stylesheet (tests/outputs.rs)
command -v minisign >/dev/null || missing+=(minisign) # checks pack.sig files both ways (tests/packs.rs)
command -v sslscan >/dev/null || missing+=(sslscan)   # ssl-enum-ciphers is compared with it (tests/lab/tls.rs)
command -v zsh >/dev/null || missing+=(zsh)           # `zsh -n` and `fish -n` check the completions (tests/cli.rs)
command -v fish >/dev/null || missing+=(fish)
/usr/bin/python3 -c 'import ensurepip, venv' 2>/dev/null || missing+=(python3-venv) # for nmaptocsv below
if [ ${#missing[@]} -gt 0 ]; then
    apt=(apt-get -y -q -o DPkg::Lock::Timeout=300)
    DEBIAN_FRONTEND=noninteractive "${apt[@]}" update >&2
    DEBIAN_FRONTEND=noninteractive "${apt[@]}" install "${missing[@]}" >&2
fi

if ! command -v cargo >/dev/null; then
    # shellcheck disable=SC1091
    [ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
fi
command -v cargo >/dev/null || { echo "test.sh: cargo not found (install Rust with rustup)" >&2; exit 1; }
# cargo-deb builds the Debian package the tests unpack and run
# (tests/lab/installed.rs); cargo installs it where its own binaries go.
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
command -v cargo-deb >/dev/null || cargo install -q cargo-deb --locked --version 3.8.0

# From PyPI only, in a virtualenv of their own (Debian's Python refuses pip
# installs, PEP 668): nmaptocsv reads moonscan's -oN and -oX and jsonschema
# checks its SARIF (tests/lab/outputs.rs); IVRE imports its -oX into a TinyDB
# (tests/lab/nmap_layouts.rs). IVRE 0.9.20 calls X509.get_extension, gone from
# pyOpenSSL 24.3; rfc3987 lets jsonschema check URIs.
if ! target/pyvenv/bin/python -c 'import ivre, tinydb, jsonschema, rfc3987' 2>/dev/null ||
    [ ! -x target/pyvenv/bin/nmaptocsv ]; then
    /usr/bin/python3 -m venv target/pyvenv
    target/pyvenv/bin/pip install -q 'nmaptocsv==1.6' 'ivre==0.9.20' 'tinydb==4.9.0' \
        'pyOpenSSL==24.2.1' 'cryptography==43.0.3' 'jsonschema==4.23.0' 'rfc3987==1.3.8'
fi

bash scripts/lab.sh up
# The lab WAN's forwarder is a crate of its own (tests/wan-forwarder): its
# path model's unit tests.
cargo test -q --release --manifest-path tests/wan-forwarder/Cargo.toml \
    --target-dir "$(scripts/cargo-target-dir.sh)/wan-forwarder"
cargo build --all-targets # examples/ too: tests/lab/pipeline.rs runs examples/embed in the lab
cargo test --no-run --test lab # not in --all-targets (Cargo.toml: test = false)
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps -q
# Every test binary runs even after one fails, and the lab's run even when
# the first fails: a lab problem hides no doc test, a unit failure no lab one.
rc=0
# The unit tests, the binary's, the hermetic harness and the doc tests.
cargo test --no-fail-fast "$@" || rc=$?
# The lab harness, against the lab brought up above.
cargo test --no-fail-fast --test lab "$@" || rc=$?
exit "$rc"
