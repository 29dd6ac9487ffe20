# shellcheck shell=bash
# The lab's addresses that both the lab and its benchmarks name, written
# once: sourced by scripts/lab.sh (which builds them; see its header for
# what listens where) and scripts/bench.sh (and so scripts/bench-wan.sh,
# which scan them).
#
# In: nothing. Out: the variables below.
# What always holds: assignments only (no command runs, nothing is read),
# so sourcing it under set -euo pipefail cannot fail; a shell variable of
# the same name in the sourcing script is overwritten.
# shellcheck disable=SC2034 # used by the scripts that source this file

SCAN_ADDR=198.18.0.1 # msscan's address on ms-scan0: the scanner's source
TARGET=198.18.0.2    # nginx 80/443, sshd 22, redis 6379 (PORTS), the UDP daemons
PORTS=(22 80 443 6379)
TARGET2=198.18.0.3 # PORTS2 besides the wildcard listeners of TARGET
PORTS2=(21 25 465 587 3389 5432 11211)
RATE=198.18.1.2 # in msrate: the kernel's default ICMP rate limit
# The live hosts of 198.18.2.0/24 (host discovery tests and benchmarks).
LIVE8="3 17 42 77 100 128 200 254"
# The OS personalities (scripts/lab-os.sh).
OS_TARGETS=(198.18.6.2 198.18.7.2 198.18.8.2)
# Either end of the opt-in WAN (scripts/lab-wan.sh).
WAN_SCAN_ADDR=198.18.4.1
WAN_TARGET=198.18.4.2
