//! The engine's error type, and the one kind of failure that errors and
//! `error` events both name.
//!
//! In: nothing; this module only defines types. Out: [`Error`] (a kind, a
//! message for people, its cause) and [`ErrorKind`]. What always holds:
//! callers match on [`ErrorKind`], never on message text; an error keeps the
//! error that caused it, if any, as its [`std::error::Error::source`]; a
//! kind is written in events by its snake_case name ([`ErrorKind::as_str`],
//! the same through serde), which never changes once written. A message
//! names the library's settings as the builder does, in backticks
//! (`` `max_rate` ``, `` `os_detection.max_tries` ``), never a front end's
//! flags: the command says them as its options ([`Error::reword`]). The binary
//! turns a usage-class error (bad target, bad port spec, bad configuration)
//! into exit status 2 and everything else into a reported failure. This
//! module imports nothing of the crate.

use std::fmt;

use serde::{Deserialize, Serialize};

/// What went wrong, coarsely, so callers can decide what to do about it:
/// the kind of an [`Error`], and of an `error` event
/// ([`crate::findings::ErrorEvent`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorKind {
    /// A target specification (address, CIDR, range, hostname, list file) is invalid.
    TargetSpec,
    /// A port specification is invalid.
    PortSpec,
    /// A hostname could not be resolved, or DNS was disabled.
    Resolve,
    /// Some other option or combination of options is invalid, or a file
    /// the user named (plugin, probes, pack) is malformed.
    Config,
    /// An I/O error: reading a list file, opening an output, or a probe or
    /// lookup that failed (an `error` event of one target).
    Io,
    /// A pack's signature is missing, made by a key that is not trusted, or
    /// does not match; or a key is refused.
    Signature,
    /// A pack's files do not match what its signed manifest pins (a hash,
    /// a file not listed, a path that leaves the pack).
    Integrity,
    /// A results database (SQLite, PostgreSQL) failed or is not usable.
    Store,
    /// A limit was reached: a plugin run's budget, or a search that would
    /// cost more than a host call may.
    Budget,
    /// The sandbox refused what a plugin asked for (a connection elsewhere).
    Sandbox,
    /// A network operation did not finish in its time.
    Timeout,
    /// A peer broke its protocol (a malformed reply, a failed handshake).
    Protocol,
    /// Something handed over could not be read (a plugin returned
    /// something that is not data).
    Parse,
    /// A plugin raised an error.
    Plugin,
}

impl ErrorKind {
    /// Every kind, in declaration order.
    const ALL: [ErrorKind; 14] = [
        ErrorKind::TargetSpec,
        ErrorKind::PortSpec,
        ErrorKind::Resolve,
        ErrorKind::Config,
        ErrorKind::Io,
        ErrorKind::Signature,
        ErrorKind::Integrity,
        ErrorKind::Store,
        ErrorKind::Budget,
        ErrorKind::Sandbox,
        ErrorKind::Timeout,
        ErrorKind::Protocol,
        ErrorKind::Parse,
        ErrorKind::Plugin,
    ];

    /// The kind's name as events write it (`timeout`, `port_spec`).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::TargetSpec => "target_spec",
            ErrorKind::PortSpec => "port_spec",
            ErrorKind::Resolve => "resolve",
            ErrorKind::Config => "config",
            ErrorKind::Io => "io",
            ErrorKind::Signature => "signature",
            ErrorKind::Integrity => "integrity",
            ErrorKind::Store => "store",
            ErrorKind::Budget => "budget",
            ErrorKind::Sandbox => "sandbox",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Protocol => "protocol",
            ErrorKind::Parse => "parse",
            ErrorKind::Plugin => "plugin",
        }
    }

    /// The kind [`ErrorKind::as_str`] names, if any.
    pub fn parse(name: &str) -> Option<ErrorKind> {
        ErrorKind::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<ErrorKind> for String {
    fn from(v: ErrorKind) -> String {
        v.as_str().to_string()
    }
}

/// An error from the engine: a kind, a message for people, and its cause.
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl Error {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error { kind, message: message.into(), source: None }
    }

    /// An error caused by `source` (kept, and named by [`std::error::Error::source`]).
    pub fn with_source(
        kind: ErrorKind,
        message: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Error {
        Error { kind, message: message.into(), source: Some(source.into()) }
    }

    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The same error (kind and source) with its message rewritten: how a
    /// front end says the settings the message names (`` `max_rate` ``).
    pub fn reword(self, f: impl FnOnce(&str) -> String) -> Error {
        Error { message: f(&self.message), ..self }
    }

    /// The same error with `context: ` before its message (kind and source kept).
    pub fn context(self, context: impl fmt::Display) -> Error {
        Error { message: format!("{context}: {}", self.message), ..self }
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

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_deref().map(|e| e as &(dyn std::error::Error + 'static))
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        let kind = if e.kind() == std::io::ErrorKind::TimedOut { ErrorKind::Timeout } else { ErrorKind::Io };
        Error { kind, message: e.to_string(), source: Some(Box::new(e)) }
    }
}

pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cause_is_kept_and_context_keeps_the_kind() {
        let io = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "denied");
        let e = Error::with_source(ErrorKind::Store, "opening x.db", io).context("--db x.db");
        assert_eq!(e.kind(), ErrorKind::Store);
        assert_eq!(e.to_string(), "--db x.db: opening x.db");
        let src = std::error::Error::source(&e).unwrap();
        assert_eq!(src.to_string(), "denied");
        assert!(!e.is_usage());
    }

    #[test]
    fn a_kind_is_written_as_serde_writes_it_and_read_back() {
        for k in ErrorKind::ALL {
            assert_eq!(serde_json::to_value(k).unwrap(), serde_json::json!(k.as_str()), "{k:?}");
            assert_eq!(ErrorKind::parse(k.as_str()), Some(k));
            assert_eq!(serde_json::from_value::<ErrorKind>(serde_json::json!(k.as_str())).unwrap(), k);
        }
        // The names error events have always carried.
        let names: Vec<&str> = [
            ErrorKind::Timeout,
            ErrorKind::Budget,
            ErrorKind::Sandbox,
            ErrorKind::Io,
            ErrorKind::Parse,
            ErrorKind::Plugin,
        ]
        .map(ErrorKind::as_str)
        .to_vec();
        assert_eq!(names, ["timeout", "budget", "sandbox", "io", "parse", "plugin"]);
        assert_eq!(ErrorKind::parse("nonsense"), None);
    }
}
