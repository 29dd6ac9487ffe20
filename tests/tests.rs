//! The hermetic integration tests: one binary, one module per area, run by
//! a plain `cargo test` as any user, without root or the lab. They start
//! moonscan on this machine's loopback, on recorded replies and on files,
//! and may bind 127.0.0.1 listeners; nothing here needs root, enters a
//! network namespace or sends to the lab's 198.18.0.0/15 (its addresses
//! appear only in arguments refused before anything is sent).
//!
//! `util` starts commands and reads their events; `cli` checks flags and
//! errors; `loopback` scans listeners on 127.0.0.1. The tests that need the
//! lab or root (network namespaces, raw packets: scripts/lab.sh) are the
//! other harness, tests/lab/main.rs, which scripts/test.sh runs after
//! bringing the lab up. What both halves of an area share is in
//! tests/AREA/common.rs.

mod cli;
mod core_plugins;
mod hardening;
mod hosts;
mod libraries;
mod loopback;
mod outputs;
mod packs;
mod plugins;
mod recordings;
mod renames;
mod secrets;
mod service;
mod ssh_plugins;
mod stores;
mod udp;
mod udp_payloads;
mod util;
