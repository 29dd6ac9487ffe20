#!/usr/bin/env bash
# Builds moonscan (release, with cargo's progress) and installs it: the
# binary on PATH, its man page, and bash, zsh and fish completions, all made
# from the command line's own definitions (moonscan man, moonscan
# completions SHELL). The probes and core plugins are built into the
# binary ($MOONSCAN_PLUGINS, $MOONSCAN_PROBES choose other folders).
#
# Usage: scripts/install.sh [--prefix DIR] [--binary FILE]
#   --prefix DIR   install under DIR (default /usr/local): DIR/bin,
#                  DIR/share/man/man1, DIR/share/{bash-completion/completions,
#                  zsh/site-functions,fish/vendor_completions.d}
#   --binary FILE  install FILE instead of building one
set -euo pipefail

prefix=/usr/local
binary=
# Paths given are the caller's, before the cd to the repository below.
while [ $# -gt 0 ]; do
    case $1 in
    --prefix) prefix=$(realpath -m -- "${2:?--prefix needs a folder}"); shift 2 ;;
    --binary) binary=$(realpath -- "${2:?--binary needs a file}"); shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "install.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [ -z "$binary" ]; then
    if ! command -v cargo >/dev/null; then
        # shellcheck disable=SC1091
        [ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
    fi
    command -v cargo >/dev/null || { echo "install.sh: cargo not found (install Rust with rustup)" >&2; exit 1; }
    echo "install.sh: building moonscan (release; the first build takes several minutes)" >&2
    cargo build --release --bin moonscan >&2
    # Where cargo put it: CARGO_TARGET_DIR and build.target-dir are honoured.
    binary=$(scripts/cargo-target-dir.sh)/release/moonscan
fi
[ -x "$binary" ] || { echo "install.sh: $binary is not an executable" >&2; exit 1; }

install -d "$prefix/bin" "$prefix/share/man/man1" "$prefix/share/bash-completion/completions" \
    "$prefix/share/zsh/site-functions" "$prefix/share/fish/vendor_completions.d"
# Each file whole or not at all: written into a new file beside it (mktemp:
# a random name, created only if nothing has it, so a link planted under a
# prefix someone else can write to is never followed), then renamed over it
# (mv -T: a link or folder at the target is replaced, not entered).
put() { # target command...
    local target=$1 tmp
    shift
    tmp=$(mktemp "$target.XXXXXXXX")
    if ! "$@" >"$tmp"; then
        rm -f -- "$tmp"
        return 1
    fi
    chmod 644 -- "$tmp"
    mv -fT -- "$tmp" "$target"
}
install -m 755 "$binary" "$prefix/bin/moonscan"
put "$prefix/share/man/man1/moonscan.1" "$binary" man
for page in pack db probes plugins; do
    put "$prefix/share/man/man1/moonscan-$page.1" "$binary" man "$page"
done
put "$prefix/share/bash-completion/completions/moonscan" "$binary" completions bash
put "$prefix/share/zsh/site-functions/_moonscan" "$binary" completions zsh
put "$prefix/share/fish/vendor_completions.d/moonscan.fish" "$binary" completions fish
echo "install.sh: installed $prefix/bin/moonscan, its man pages and bash/zsh/fish completions" >&2
