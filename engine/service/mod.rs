//! Service detection: what runs on an open port.
//!
//! In: open ports from discovery. Out: `service` events (service, product,
//! version, CPE, banner, TLS chain). What always holds: probes and match
//! rules come from the probe database in probes/*.yaml ([`probes`]), rules
//! are compiled once with size and nesting limits ([`rules`]), and nothing a
//! server sends can make memory grow past the fixed buffers.
//!
//! Status: the probe database and the match engine are here; the prober
//! that drives connections (and `-sV`) is still to come.

#[cfg(test)]
mod catalog;
pub mod import;
pub mod probes;
pub mod rules;

pub use probes::{Probe, ProbeDb};
pub use rules::{Identity, Rule};
