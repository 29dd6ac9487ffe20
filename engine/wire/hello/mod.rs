//! TLS as far as the server's first flight, for every server: ClientHellos
//! of our own ([`client`]), a bounded reader of what comes back
//! ([`flight`]), its fingerprints ([`fingerprint`]) and why none was read
//! ([`error`]). This is how moonscan reads the certificate chain of the
//! servers rustls refuses (SSLv3, TLS 1.0 and 1.1, RSA key exchange, DHE,
//! export and anonymous suites) and how it enumerates versions and suites.
//! It never finishes a handshake and trusts nothing it reads.
//!
//! In: an address (or a connection already upgraded by STARTTLS) and a
//! deadline. Out: a [`Flight`], or the [`TlsInfo`] that service events and
//! plugins see, with JA3S and JA4S. What always holds: memory is bounded by
//! the reader's limits and time by the deadline; every failure is a
//! [`HelloError`] that says what the server did.

pub mod client;
pub mod enumerate;
pub mod error;
pub mod fingerprint;
pub mod flight;

use std::future::Future;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::{timeout_at, Instant};

pub use client::{suites_for, ClientHello};
pub use error::HelloError;
pub use fingerprint::{ja3s, ja4s};
pub use flight::{Flight, FlightReader, KeyExchange};

pub use crate::wire::iana::{group_bits, group_name, suite_name, version_name, SSL3, TLS10, TLS11, TLS12, TLS13};
use crate::wire::tls::TlsInfo;

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
    let (chain, der, chain_cut) = crate::wire::cert::keep_chain(f.chain.clone(), f.chain_sent);
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

#[cfg(test)]
mod tests;
