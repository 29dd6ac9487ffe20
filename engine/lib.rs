//! moonscan: a Lua-scriptable network scanner, as a library.
//!
//! The scan is a streaming pipeline of stages joined by bounded channels:
//! [`targets`] gives the scan order, [`discovery`] finds open ports, and
//! [`output`] sinks consume the [`findings`] events. [`scan::run`] drives one
//! scan from a validated [`scan::ScanConfig`]. The library never prints,
//! parses no command-line flags and keeps no global state.

#![deny(unsafe_code)]

pub mod discovery;
pub mod error;
pub mod findings;
pub mod net;
pub mod output;
pub mod scan;
pub mod service;
pub mod targets;

pub use error::{Error, ErrorKind, Result};
pub use scan::{run, ScanConfig};

/// Entry points for the fuzz targets in fuzz/ (one line each there).
#[doc(hidden)]
pub mod fuzz {
    /// Parses a received frame as the SYN scanner does, with and without checksum checks.
    pub fn syn_reply(frame: &[u8]) {
        use crate::discovery::syn::frame::parse;
        use crate::net::packet::Checksum;
        for sum in [Checksum::Unchecked, Checksum::Unfinished, Checksum::Valid] {
            let _ = parse(frame, sum);
        }
    }
}
