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
pub mod targets;

pub use error::{Error, ErrorKind, Result};
pub use scan::{run, ScanConfig};
