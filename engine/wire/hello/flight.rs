//! Reads a server's first flight (ServerHello, Certificate,
//! ServerKeyExchange, ServerHelloDone) from the bytes it sends, without
//! taking part in a handshake.
//!
//! In: bytes as they arrive, in any split. Out: a [`Flight`] once the flight
//! is complete (ServerHelloDone, or the ServerHello of TLS 1.3, after which
//! everything is encrypted), or a [`HelloError`]. What always holds: at most
//! one record and one handshake message are kept ([`RECORD_MAX`],
//! [`MESSAGE_MAX`]), so memory is bounded whatever a server claims; a
//! message longer than that is refused from its header, before its body
//! arrives; any bytes give a result or a need for more, never a panic.

use tls_parser::{
    parse_dh_params, parse_ecdh_params, parse_tls_handshake_server_hello, ECParametersContent, TlsCipherAu,
};

use crate::wire::cert::MAX_CHAIN;
use crate::wire::hello::error::HelloError;
use crate::wire::iana::suite_name;

/// Longest record body TLS allows (2^14 plus the expansion compression and
/// encryption may add).
pub const RECORD_MAX: usize = (1 << 14) + 2048;

/// Longest handshake message kept: a certificate chain larger than this is
/// not one a real server sends.
pub const MESSAGE_MAX: usize = 256 * 1024;

/// The random of a HelloRetryRequest (RFC 8446 4.1.3).
const RETRY_RANDOM: [u8; 32] = [
    0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91, 0xc2, 0xa2, 0x11,
    0x16, 0x7a, 0xbb, 0x8c, 0x5e, 0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c,
];

/// What a server's first flight says.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Flight {
    /// The ServerHello's version field (0x0303 for TLS 1.3 too).
    pub legacy_version: u16,
    /// The version negotiated: supported_versions if present, else the field.
    pub version: u16,
    pub suite: u16,
    pub compression: u8,
    /// Extension types in the order the server sent them.
    pub extensions: Vec<u16>,
    /// The protocol ALPN chose, if the server chose one.
    pub alpn: Option<String>,
    /// A HelloRetryRequest (TLS 1.3): version and suite are accepted, but
    /// the server wants another key share.
    pub retry: bool,
    /// Certificates, leaf first (TLS 1.2 and older only: TLS 1.3 encrypts
    /// them): the first [`MAX_CHAIN`] the
    /// server sent.
    pub chain: Vec<Vec<u8>>,
    /// How many certificates the server sent.
    pub chain_sent: usize,
    /// The key exchange the server's parameters show.
    pub kx: Option<KeyExchange>,
    /// The ServerHello's random (its first four bytes were the server's
    /// clock, `gmt_unix_time`, before TLS 1.3; many servers now send noise).
    pub random: [u8; 32],
}

/// Server key exchange parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyExchange {
    /// A named group (ECDHE in TLS 1.2, any key share in TLS 1.3).
    Group(u16),
    /// Finite-field Diffie-Hellman with a prime of this many bits.
    Dh(u32),
    /// Explicit elliptic-curve parameters (no named group).
    ExplicitCurve,
    /// A temporary RSA key of this many bits (export suites).
    Rsa(u32),
}

/// A first flight read piece by piece.
#[derive(Debug, Default)]
pub struct FlightReader {
    /// Bytes of the record being read (header included).
    record: Vec<u8>,
    /// Handshake bytes not yet read as whole messages.
    handshake: Vec<u8>,
    flight: Flight,
    hello: bool,
    records: usize,
}

impl FlightReader {
    pub fn new() -> FlightReader {
        FlightReader::default()
    }

    /// Takes the next bytes the server sent. `Ok(Some)` once the flight is
    /// complete (bytes after it are ignored), `Ok(None)` while it needs more.
    pub fn push(&mut self, mut data: &[u8]) -> Result<Option<Flight>, HelloError> {
        while !data.is_empty() {
            // The header first, then exactly the body it announces.
            let want = if self.record.len() < 5 { 5 } else { 5 + record_len(&self.record) };
            let take = (want - self.record.len()).min(data.len());
            self.record.extend_from_slice(&data[..take]);
            data = &data[take..];
            if self.record.len() == 5 {
                self.check_header()?;
            }
            if self.record.len() >= 5 && self.record.len() == 5 + record_len(&self.record) {
                let record = std::mem::take(&mut self.record);
                self.records += 1;
                if let Some(done) = self.on_record(record[0], &record[5..])? {
                    return Ok(Some(done));
                }
            }
        }
        Ok(None)
    }

    /// What the bytes so far say when the server stops sending.
    pub fn closed(&self) -> HelloError {
        if self.records == 0 && self.record.is_empty() {
            HelloError::Closed
        } else {
            HelloError::Malformed(format!("the server closed the connection in the middle of its {}", self.where_()))
        }
    }

    fn where_(&self) -> &'static str {
        if self.hello {
            "first flight"
        } else {
            "ServerHello"
        }
    }

    fn check_header(&self) -> Result<(), HelloError> {
        let h = &self.record;
        if self.records == 0 && h[0] & 0x80 != 0 && h[2] == 4 {
            // A two-byte SSLv2 header whose message type is SERVER-HELLO.
            return Err(HelloError::Sslv2);
        }
        if !(20..=23).contains(&h[0]) || h[1] != 3 {
            return Err(if self.records == 0 {
                HelloError::NotTls
            } else {
                HelloError::Malformed(format!("record type {} version {}.{} inside the flight", h[0], h[1], h[2]))
            });
        }
        let len = record_len(h);
        if len > RECORD_MAX {
            return Err(HelloError::TooLarge { what: "TLS record", claimed: len, limit: RECORD_MAX });
        }
        Ok(())
    }

    fn on_record(&mut self, kind: u8, body: &[u8]) -> Result<Option<Flight>, HelloError> {
        match kind {
            // ChangeCipherSpec: TLS 1.3's middlebox compatibility (ignored).
            20 => Ok(None),
            21 => {
                let (level, description) = (body.first().copied().unwrap_or(0), body.get(1).copied().unwrap_or(0));
                // A warning (unrecognized_name) may come before the hello.
                if level == 1 && description != 0 {
                    return Ok(None);
                }
                Err(HelloError::Alert { level, description })
            }
            22 => {
                // The tail of one message and a record more: anything beyond
                // is a message over MESSAGE_MAX, refused from its header.
                let held = self.handshake.len() + body.len();
                if held > MESSAGE_MAX + 4 + RECORD_MAX {
                    return Err(HelloError::TooLarge { what: "handshake", claimed: held, limit: MESSAGE_MAX });
                }
                self.handshake.extend_from_slice(body);
                self.messages()
            }
            _ => Err(HelloError::Malformed(format!("application data before the {} ended", self.where_()))),
        }
    }

    /// Reads every whole handshake message buffered.
    fn messages(&mut self) -> Result<Option<Flight>, HelloError> {
        let mut at = 0;
        let mut done = None;
        while self.handshake.len() - at >= 4 {
            let h = &self.handshake[at..];
            let len = (usize::from(h[1]) << 16) | (usize::from(h[2]) << 8) | usize::from(h[3]);
            if len > MESSAGE_MAX {
                return Err(HelloError::TooLarge { what: message_name(h[0]), claimed: len, limit: MESSAGE_MAX });
            }
            if h.len() < 4 + len {
                break;
            }
            let kind = h[0];
            let body = self.handshake[at + 4..at + 4 + len].to_vec();
            at += 4 + len;
            if self.on_message(kind, &body)? {
                done = Some(std::mem::take(&mut self.flight));
                break;
            }
        }
        self.handshake.drain(..at);
        Ok(done)
    }

    /// Reads one handshake message; true when it ends the flight.
    fn on_message(&mut self, kind: u8, body: &[u8]) -> Result<bool, HelloError> {
        if !self.hello && kind != 2 && kind != 0 {
            return Err(HelloError::Malformed(format!("a {} before the ServerHello", message_name(kind))));
        }
        match kind {
            2 if self.hello => Err(HelloError::Malformed("a second ServerHello".into())),
            2 => {
                self.hello = true;
                self.flight = server_hello(body)?;
                Ok(self.flight.version >= 0x0304 || self.flight.retry)
            }
            11 => {
                let unreadable = || HelloError::Malformed("an unreadable Certificate message".into());
                let (chain, sent) = certificates(body).ok_or_else(unreadable)?;
                (self.flight.chain, self.flight.chain_sent) = (chain, sent);
                Ok(false)
            }
            12 => {
                self.flight.kx = key_exchange(self.flight.suite, body);
                Ok(false)
            }
            14 => {
                // Every suite but anonymous and PSK ones authenticates with a
                // certificate: a flight without one is not a real server's.
                let au = tls_parser::TlsCipherSuite::from_id(self.flight.suite).map(|s| &s.au);
                let anonymous = matches!(au, Some(TlsCipherAu::Null | TlsCipherAu::Psk) | None);
                if self.flight.chain.is_empty() && !anonymous {
                    return Err(HelloError::Malformed(format!(
                        "no Certificate for {}, which needs one",
                        suite_name(self.flight.suite)
                    )));
                }
                Ok(true)
            }
            // HelloRequest, CertificateRequest, CertificateStatus and the rest.
            _ => Ok(false),
        }
    }
}

/// A Certificate message's body (TLS 1.2 and older): its first
/// [`MAX_CHAIN`] certificates, and how many it
/// holds. The rest are counted without being copied (a message of empty
/// certificates holds 87,000 in 256 KiB). None when the lengths do not add
/// up.
fn certificates(body: &[u8]) -> Option<(Vec<Vec<u8>>, usize)> {
    let u24 = |b: &[u8]| (usize::from(b[0]) << 16) | (usize::from(b[1]) << 8) | usize::from(b[2]);
    let list = body.get(..3).map(u24)?;
    let mut rest = body.get(3..)?;
    if rest.len() != list {
        return None;
    }
    let (mut chain, mut sent) = (Vec::new(), 0);
    while !rest.is_empty() {
        let len = rest.get(..3).map(u24)?;
        let cert = rest.get(3..3 + len)?;
        if chain.len() < MAX_CHAIN {
            chain.push(cert.to_vec());
        }
        sent += 1;
        rest = &rest[3 + len..];
    }
    Some((chain, sent))
}

/// A ServerHello message's body as a flight of its own (no chain yet).
pub fn server_hello(body: &[u8]) -> Result<Flight, HelloError> {
    let unreadable = || HelloError::Malformed("an unreadable ServerHello".into());
    let (rest, sh) = parse_tls_handshake_server_hello(body).map_err(|_| unreadable())?;
    let mut f = Flight {
        legacy_version: sh.version.0,
        version: sh.version.0,
        suite: sh.cipher.0,
        compression: sh.compression.0,
        retry: sh.random == RETRY_RANDOM,
        random: sh.random.try_into().unwrap_or([0; 32]),
        ..Flight::default()
    };
    // tls-parser reads no extensions after an SSLv3 hello; servers send
    // renegotiation_info there all the same.
    let ssl3_ext = || {
        let n = usize::from(u16::from_be_bytes([*rest.first()?, *rest.get(1)?]));
        rest.get(2..2 + n)
    };
    let mut ext = sh.ext.or_else(|| if sh.version.0 == 0x0300 { ssl3_ext() } else { None }).unwrap_or_default();
    while !ext.is_empty() {
        if ext.len() < 4 {
            return Err(unreadable());
        }
        let kind = u16::from_be_bytes([ext[0], ext[1]]);
        let len = usize::from(u16::from_be_bytes([ext[2], ext[3]]));
        let data = ext.get(4..4 + len).ok_or_else(unreadable)?;
        f.extensions.push(kind);
        match kind {
            // supported_versions: the version chosen.
            43 if len == 2 => f.version = u16::from_be_bytes([data[0], data[1]]),
            // key_share: the group (a HelloRetryRequest names only the group).
            51 if len >= 2 => f.kx = Some(KeyExchange::Group(u16::from_be_bytes([data[0], data[1]]))),
            // ALPN: a list holding the one protocol chosen.
            16 if len >= 3 => {
                let n = usize::from(data[2]).min(len - 3);
                f.alpn = Some(String::from_utf8_lossy(&data[3..3 + n]).into_owned());
            }
            _ => {}
        }
        ext = &ext[4 + len..];
    }
    Ok(f)
}

fn record_len(header: &[u8]) -> usize {
    usize::from(u16::from_be_bytes([header[3], header[4]]))
}

/// The key exchange a ServerKeyExchange shows for `suite`.
fn key_exchange(suite: u16, body: &[u8]) -> Option<KeyExchange> {
    use tls_parser::TlsCipherKx;
    let kx = tls_parser::TlsCipherSuite::from_id(suite).map(|s| &s.kx);
    match kx {
        Some(TlsCipherKx::Dhe | TlsCipherKx::Dh) => {
            let (_, p) = parse_dh_params(body).ok()?;
            Some(KeyExchange::Dh(bits(p.dh_p)))
        }
        Some(TlsCipherKx::Ecdhe | TlsCipherKx::Ecdh | TlsCipherKx::Aecdh) => {
            let (_, p) = parse_ecdh_params(body).ok()?;
            Some(match p.curve_params.params_content {
                ECParametersContent::NamedGroup(g) => KeyExchange::Group(g.0),
                ECParametersContent::ExplicitPrime(_) => KeyExchange::ExplicitCurve,
            })
        }
        // Export RSA: a temporary modulus, then its exponent.
        Some(TlsCipherKx::Rsa) => {
            let len = usize::from(u16::from_be_bytes([*body.first()?, *body.get(1)?]));
            Some(KeyExchange::Rsa(bits(body.get(2..2 + len)?)))
        }
        _ => None,
    }
}

/// Bits of a big-endian unsigned number (leading zeros not counted).
pub fn bits(n: &[u8]) -> u32 {
    let n = &n[n.iter().position(|&b| b != 0).unwrap_or(n.len())..];
    match n.first() {
        None => 0,
        Some(&b) => (n.len() as u32 - 1) * 8 + (8 - b.leading_zeros()),
    }
}

fn message_name(kind: u8) -> &'static str {
    match kind {
        1 => "ClientHello",
        2 => "ServerHello",
        4 => "NewSessionTicket",
        8 => "EncryptedExtensions",
        11 => "Certificate message",
        12 => "ServerKeyExchange",
        13 => "CertificateRequest",
        14 => "ServerHelloDone",
        15 => "CertificateVerify",
        20 => "Finished",
        22 => "CertificateStatus",
        _ => "handshake message",
    }
}
