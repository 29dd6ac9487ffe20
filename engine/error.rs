//! The engine's error type.
//!
//! Callers match on [`ErrorKind`], never on message text. The binary turns a
//! usage-class error (bad target, bad port spec, bad configuration) into exit
//! status 2 and everything else into a reported failure.

use std::fmt;

/// What went wrong, coarsely, so callers can decide what to do about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A target specification (address, CIDR, range, hostname, list file) is invalid.
    TargetSpec,
    /// A port specification is invalid.
    PortSpec,
    /// A hostname could not be resolved, or DNS was disabled.
    Resolve,
    /// Some other option or combination of options is invalid.
    Config,
    /// An I/O error outside of a single probe (reading a list file, opening an output).
    Io,
}

/// An error from the engine: a kind plus a message for people.
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    message: String,
}

impl Error {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error { kind, message: message.into() }
    }

    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// True for errors caused by what the user asked for (exit status 2).
    pub fn is_usage(&self) -> bool {
        matches!(self.kind, ErrorKind::TargetSpec | ErrorKind::PortSpec | ErrorKind::Resolve | ErrorKind::Config)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;
