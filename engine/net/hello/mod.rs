//! TLS as far as the server's first flight, for every server: ClientHellos
//! of our own ([`client`]) and a bounded reader of what comes back
//! ([`flight`]). This is how moonscan reads the certificate chain of the
//! servers rustls refuses (SSLv3, TLS 1.0 and 1.1, RSA key exchange, DHE,
//! export and anonymous suites) and how it enumerates versions and suites.
//! It never finishes a handshake and trusts nothing it reads.
//!
//! In: an address (or a connection already upgraded by STARTTLS) and a
//! deadline. Out: a [`Flight`], or the [`TlsInfo`] that service events and
//! plugins see, with JA3S and JA4S. What always holds: memory is bounded by
//! the reader's limits and time by the deadline; every failure is a
//! [`HelloError`] that says what the server did.

#![deny(unsafe_code)]

pub mod client;
pub mod enumerate;
pub mod flight;

use std::fmt::Write as _;
use std::future::Future;

use sha2::{Digest, Sha256};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::{timeout_at, Instant};

pub use client::{
    group_bits, group_name, suite_name, suites_for, version_name, ClientHello, SSL3, TLS10, TLS11, TLS12, TLS13,
};
pub use flight::{Flight, FlightReader, KeyExchange};

use crate::findings::TlsInfo;

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

fn alert_name(d: u8) -> &'static str {
    match d {
        0 => "close_notify",
        10 => "unexpected_message",
        20 => "bad_record_mac",
        40 => "handshake_failure",
        42 => "bad_certificate",
        47 => "illegal_parameter",
        50 => "decode_error",
        51 => "decrypt_error",
        70 => "protocol_version",
        71 => "insufficient_security",
        80 => "internal_error",
        86 => "inappropriate_fallback",
        90 => "user_canceled",
        109 => "missing_extension",
        110 => "unsupported_extension",
        112 => "unrecognized_name",
        120 => "no_application_protocol",
        _ => "unknown",
    }
}

/// Sends `hello` on `io` and reads the server's first flight, by `until`.
pub async fn exchange<S>(io: &mut S, hello: &ClientHello, until: Instant) -> Result<Flight, HelloError>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let work = async {
        io.write_all(&hello.to_bytes()).await.map_err(HelloError::Io)?;
        let mut reader = FlightReader::new();
        let mut buf = vec![0u8; 8192];
        loop {
            let n = io.read(&mut buf).await.map_err(HelloError::Io)?;
            if n == 0 {
                return Err(reader.closed());
            }
            if let Some(flight) = reader.push(&buf[..n])? {
                return offered(hello, flight);
            }
        }
    };
    timeout_at(until, work).await.map_err(|_| HelloError::Timeout)?
}

/// The flight, if what the server chose is among what `hello` offered.
fn offered(hello: &ClientHello, flight: Flight) -> Result<Flight, HelloError> {
    if !(SSL3..=hello.version).contains(&flight.version) {
        return Err(HelloError::Malformed(format!(
            "the server chose {}, which the ClientHello did not offer (at most {})",
            version_name(flight.version),
            version_name(hello.version)
        )));
    }
    if !hello.suites.contains(&flight.suite) {
        return Err(HelloError::Malformed(format!(
            "the server chose {}, which the ClientHello did not offer",
            suite_name(flight.suite)
        )));
    }
    Ok(flight)
}

/// The chain and session facts of a server rustls cannot talk to: a hello
/// offering TLS 1.2 down to TLS 1.0 with every suite, then, if the server
/// refuses it, TLS 1.0 alone and SSLv3 alone (servers that choke on a newer
/// version or on extensions). `connect` opens a fresh connection ready for
/// a ClientHello (a TCP connect, or one upgraded by STARTTLS).
pub async fn legacy_chain<S, F, Fut>(
    connect: F,
    server_name: Option<&str>,
    until: Instant,
) -> Result<TlsInfo, HelloError>
where
    S: AsyncRead + AsyncWrite + Unpin,
    F: Fn() -> Fut,
    Fut: Future<Output = Result<S, HelloError>>,
{
    let mut first = None;
    for version in [TLS12, TLS10, SSL3] {
        let hello = ClientHello {
            version,
            suites: suites_for(version),
            server_name: server_name.filter(|n| n.parse::<std::net::IpAddr>().is_err()).map(str::to_string),
            alpn: Vec::new(),
        };
        let result = match connect().await {
            Ok(mut io) => exchange(&mut io, &hello, until).await,
            Err(e) => Err(e),
        };
        match result {
            Ok(flight) => return Ok(info(&flight, "hello")),
            Err(e) if e.refused() && Instant::now() < until => first = first.or(Some(e)),
            Err(e) => return Err(first.unwrap_or(e)),
        }
    }
    Err(first.unwrap_or(HelloError::Closed))
}

/// What a flight says, as service events and plugins see it; `path` names
/// the code that read it (`rustls` or `hello`).
pub fn info(f: &Flight, path: &str) -> TlsInfo {
    use tls_parser::TlsCipherKx;
    let (chain, der, chain_cut) = super::tls::keep_chain(f.chain.clone(), f.chain_sent);
    let kx_kind = tls_parser::TlsCipherSuite::from_id(f.suite).map(|s| &s.kx);
    let mut kx = match kx_kind {
        Some(TlsCipherKx::Ecdhe | TlsCipherKx::Aecdh) => "ecdhe",
        Some(TlsCipherKx::Dhe) => "dhe",
        Some(TlsCipherKx::Rsa) => "rsa",
        Some(TlsCipherKx::Ecdh) => "ecdh",
        Some(TlsCipherKx::Dh) => "dh",
        Some(TlsCipherKx::Tls13) => "ecdhe",
        Some(TlsCipherKx::Psk) => "psk",
        Some(TlsCipherKx::Srp) => "srp",
        Some(TlsCipherKx::Krb5) => "krb5",
        _ => "",
    }
    .to_string();
    let (mut group, mut kx_bits) = (None, 0);
    match f.kx {
        Some(KeyExchange::Group(g)) => {
            if (256..=260).contains(&g) {
                kx = "dhe".into();
            }
            group = Some(group_name(g));
            kx_bits = group_bits(g);
        }
        Some(KeyExchange::Dh(bits)) | Some(KeyExchange::Rsa(bits)) => kx_bits = bits,
        Some(KeyExchange::ExplicitCurve) => group = Some("explicit".into()),
        None if kx == "rsa" || kx == "dh" || kx == "ecdh" => kx_bits = chain.first().map_or(0, |c| c.key_bits),
        None => {}
    }
    TlsInfo {
        path: path.to_string(),
        version: version_name(f.version),
        cipher: suite_name(f.suite),
        alpn: f.alpn.clone(),
        starttls: None,
        kx,
        group,
        kx_bits,
        ja3s: ja3s(f),
        ja4s: ja4s(f),
        chain,
        chain_cut,
        der,
    }
}

/// GREASE values (RFC 8701) are left out of fingerprints.
fn grease(v: u16) -> bool {
    v & 0x0f0f == 0x0a0a && v >> 8 == v & 0xff
}

/// JA3S: MD5 of "version,cipher,extensions" in decimal, the extensions
/// dash-separated in the order sent.
pub fn ja3s(f: &Flight) -> String {
    use md5::Digest as _;
    let ext: Vec<String> = f.extensions.iter().filter(|&&e| !grease(e)).map(u16::to_string).collect();
    let text = format!("{},{},{}", f.legacy_version, f.suite, ext.join("-"));
    hex(&md5::Md5::digest(text.as_bytes()))
}

/// JA4S (FoxIO's specification): t, version, extension count, ALPN's
/// first and last characters, the suite in hex, and the first 12 hex
/// digits of SHA-256 over the extensions in the order sent.
pub fn ja4s(f: &Flight) -> String {
    let version = match f.version {
        TLS13 => "13",
        TLS12 => "12",
        TLS11 => "11",
        TLS10 => "10",
        SSL3 => "s3",
        0x0002 => "s2",
        _ => "00",
    };
    let ext: Vec<u16> = f.extensions.iter().copied().filter(|&e| !grease(e)).collect();
    let alpn = match f.alpn.as_deref().map(str::as_bytes) {
        Some([first, .., last]) | Some([first @ last]) => {
            if first.is_ascii_alphanumeric() && last.is_ascii_alphanumeric() {
                format!("{}{}", *first as char, *last as char)
            } else {
                format!("{:02x}", first).chars().take(1).chain(format!("{:02x}", last).chars().skip(1)).collect()
            }
        }
        _ => "00".into(),
    };
    let hash = if ext.is_empty() {
        "000000000000".to_string()
    } else {
        let list: Vec<String> = ext.iter().map(|e| format!("{e:04x}")).collect();
        hex(&Sha256::digest(list.join(",").as_bytes()))[..12].to_string()
    };
    format!("t{version}{:02}{alpn}_{:04x}_{hash}", ext.len().min(99), f.suite)
}

fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

#[cfg(test)]
mod tests;
