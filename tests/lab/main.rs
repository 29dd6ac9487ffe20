//! The lab tests: one binary, one module per area, run by scripts/test.sh
//! once it has brought the lab up (scripts/lab.sh up: network namespaces,
//! real services, 198.18.0.0/15), never by a plain `cargo test` (Cargo.toml
//! sets `test = false`; `cargo test --test lab` runs it). They need root and
//! fail, never skip, without it or without the lab (`util::lab_is_up`). A
//! few need root but not the lab (`loopback`: a mount namespace; one of
//! `packs`: a folder given to another user).
//!
//! `util` checks the lab and runs commands in it; `connect` scans the lab's
//! namespaces with connect scans and `syn` with raw SYN scans; `wan` checks
//! the lab's WAN (scripts/lab.sh wan) that `wan_scans` scans through. Tests
//! of the same areas that need no lab are in tests/tests.rs's modules of the
//! same names; what both halves of an area share is in tests/AREA/common.rs.

mod connect;
mod core_plugins;
mod daemons;
mod durability;
mod hardening;
mod hosts;
mod installed;
mod loopback;
mod names;
mod nmap_layouts;
mod os;
mod outputs;
mod packs;
mod pipeline;
mod plugins;
mod recordings;
mod reports;
mod routes;
mod scan_types;
mod secrets;
mod service;
mod ssh_plugins;
mod stores;
mod syn;
mod tls;
mod udp;
mod util;
mod wan;
mod wan_scans;
