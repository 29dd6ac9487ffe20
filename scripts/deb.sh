#!/usr/bin/env bash
# Builds moonscan's Debian package with cargo-deb (cargo install cargo-deb
# --locked): the binary, its man pages and bash, zsh and fish completions
# (made by the binary itself, as scripts/install.sh makes them, under
# target/deb-root), README. Prints the package's path.
#
# Usage: scripts/deb.sh [--profile release|dev] [--output DIR]
#   --profile dev  package the debug build as it is (the tests do; no build)
#   --output DIR   where the .deb goes (default: cargo-deb's target/debian)
set -euo pipefail

profile=release
out=
while [ $# -gt 0 ]; do
    case $1 in
    --profile) profile=${2:?--profile needs release or dev}; shift 2 ;;
    --output) out=$(realpath -m -- "${2:?--output needs a folder}"); shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "deb.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
case $profile in
release) build_dir=release ;;
dev) build_dir=debug ;;
*) echo "deb.sh: --profile is release or dev, not $profile" >&2; exit 2 ;;
esac
cd "$(dirname "${BASH_SOURCE[0]}")/.."
command -v cargo-deb >/dev/null || { echo "deb.sh: cargo-deb not found (cargo install cargo-deb --locked)" >&2; exit 1; }
if [ "$profile" = release ]; then
    cargo build --release --bin moonscan >&2
fi
binary=$(scripts/cargo-target-dir.sh)/$build_dir/moonscan
[ -x "$binary" ] || { echo "deb.sh: $binary is not built" >&2; exit 1; }
rm -rf target/deb-root
scripts/install.sh --binary "$binary" --prefix target/deb-root 2>/dev/null
mkdir -p "${out:-target/debian}"
cargo deb --no-build --quiet --profile "$profile" --output "${out:-target/debian}"
