//! Integration tests: one binary, one module per area.
//!
//! `util` starts commands and the lab; `cli` checks flags and errors;
//! `loopback` scans listeners on 127.0.0.1; `lab` scans the lab's
//! namespaces with connect scans and `syn` with raw SYN scans (root
//! required: these tests fail, never skip, without it); `wan` checks the
//! lab's WAN (scripts/lab.sh wan) that later tests scan through.

mod cli;
mod core_plugins;
mod daemons;
mod durability;
mod hardening;
mod hosts;
mod installed;
mod lab;
mod libraries;
mod loopback;
mod names;
mod nmap_layouts;
mod os;
mod outputs;
mod packs;
mod pipeline;
mod plugins;
mod recordings;
mod renames;
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
mod udp_payloads;
mod util;
mod wan;
mod wan_scans;
