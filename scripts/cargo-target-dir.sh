#!/usr/bin/env bash
# Prints the folder cargo builds moonscan into: $CARGO_TARGET_DIR, a cargo
# config's build.target-dir, or target/ of the repository, as cargo itself
# resolves it. scripts/install.sh, lab.sh and bench.sh find the binary there.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if ! command -v cargo >/dev/null; then
    # shellcheck disable=SC1091
    [ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
fi
command -v cargo >/dev/null || { echo "cargo-target-dir.sh: cargo not found (install Rust with rustup)" >&2; exit 1; }
meta=$(cargo metadata --no-deps --format-version 1 --offline 2>/dev/null || cargo metadata --no-deps --format-version 1)
dir=$(sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p' <<<"$meta")
[ -n "$dir" ] || { echo "cargo-target-dir.sh: cargo metadata gave no target_directory" >&2; exit 1; }
echo "$dir"
