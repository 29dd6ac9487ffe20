#!/usr/bin/env bash
# Runs every cargo-fuzz target for a while (libFuzzer). Not part of
# scripts/test.sh: the parsers' unit tests already feed them truncated and
# random bytes; this digs deeper when there is time.
#
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET]   (default 60)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
secs=${1:-60}
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
# The machine has a stable toolchain only; cargo-fuzz needs a few unstable
# flags, which RUSTC_BOOTSTRAP allows on stable.
export RUSTC_BOOTSTRAP=1
for target in $(cargo fuzz list); do
    echo "== fuzzing $target for ${secs}s"
    cargo fuzz run "$target" -- -max_total_time="$secs" -max_len=512
done
