//! Why no first flight was read: the one error of the hello side, saying
//! what the server did (nothing, an alert, not TLS, too much) or what the
//! connection did (an I/O error, the deadline).
//!
//! In: nothing; a type. Out: [`HelloError`], printable. What always holds:
//! [`HelloError::refused`] tells a server that refused what was offered
//! (another hello may still be accepted) from one that does not speak TLS.

use crate::wire::iana::alert_name;

/// Why no flight was read.
#[derive(Debug)]
pub enum HelloError {
    Io(std::io::Error),
    Timeout,
    /// Closed without a byte.
    Closed,
    /// The reply is not a TLS record.
    NotTls,
    /// An SSLv2 SERVER-HELLO (the server speaks only SSLv2).
    Sslv2,
    /// The server refused the hello.
    Alert {
        level: u8,
        description: u8,
    },
    /// A length beyond what the reader keeps.
    TooLarge {
        what: &'static str,
        claimed: usize,
        limit: usize,
    },
    Malformed(String),
}

impl HelloError {
    /// The server refused what was offered (rather than failing to speak
    /// TLS at all): another hello may still be accepted.
    pub fn refused(&self) -> bool {
        matches!(self, HelloError::Alert { .. } | HelloError::Closed)
            || matches!(self, HelloError::Io(e) if e.kind() == std::io::ErrorKind::ConnectionReset)
    }
}

impl std::fmt::Display for HelloError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HelloError::Io(e) => write!(f, "{e}"),
            HelloError::Timeout => f.write_str("no ServerHello before the time-out"),
            HelloError::Closed => f.write_str("the server closed the connection without answering the ClientHello"),
            HelloError::NotTls => f.write_str("the server's reply is not TLS"),
            HelloError::Sslv2 => f.write_str("the server speaks only SSLv2"),
            HelloError::Alert { level, description } => {
                let level = if *level == 1 { "warning" } else { "fatal" };
                write!(
                    f,
                    "the server refused the ClientHello: {level} alert {} ({description})",
                    alert_name(*description)
                )
            }
            HelloError::TooLarge { what, claimed, limit } => {
                write!(f, "the server's {what} claims {claimed} bytes, more than the {limit} this scanner reads")
            }
            HelloError::Malformed(m) => write!(f, "malformed TLS from the server: {m}"),
        }
    }
}

impl std::error::Error for HelloError {}
