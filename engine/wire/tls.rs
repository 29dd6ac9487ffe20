//! What a TLS session shows: the negotiated version, cipher and ALPN, the
//! key exchange, the ServerHello's fingerprints and the certificate chain
//! ([`TlsInfo`], as service events and plugins see it).
//!
//! In: a finished rustls client session, and the ServerHello as read off
//! the wire. Out: [`TlsInfo`]. What always holds: the chain is kept and
//! summarised within [`crate::wire::cert`]'s bounds (see
//! [`keep_chain`]); names are IANA's ([`crate::wire::iana`]), whichever
//! code read the session.

use serde::{Deserialize, Serialize};

use crate::wire::cert::{is_zero_u32, keep_chain, CertSummary, MAX_CHAIN};
use crate::wire::hello::fingerprint::{ja3s, ja4s};
use crate::wire::hello::flight::Flight;
use crate::wire::iana::{group_bits, group_name, suite_name};

/// A TLS session: what was negotiated and the whole certificate chain.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TlsInfo {
    /// Which code read it: `rustls` (a whole handshake, one plugins can
    /// talk through) or `hello` (the server's first flight only, for the
    /// servers rustls refuses).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub path: String,
    /// `TLSv1.3`, `TLSv1.2`, `TLSv1.1`, `TLSv1.0`, `SSLv3`.
    pub version: String,
    /// IANA name of the cipher suite.
    pub cipher: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alpn: Option<String>,
    /// The STARTTLS exchange that came first (`smtp`, `imap`, `ldap`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starttls: Option<String>,
    /// Key exchange: `ecdhe`, `dhe`, `rsa`, `ecdh`, `dh`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kx: String,
    /// The named group of the key exchange (`x25519`, `secp256r1`, `ffdhe2048`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// The key exchange's size in bits (the group's, the DH prime's, or
    /// for RSA key exchange the certificate key's).
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub kx_bits: u32,
    /// JA3S and JA4S of the ServerHello (empty when it could not be seen).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ja3s: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ja4s: String,
    /// Leaf first, as the server sent it; at most the first sixteen
    /// certificates ([`MAX_CHAIN`]).
    pub chain: Vec<CertSummary>,
    /// Certificates the server sent past those kept.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub chain_cut: u32,
    /// The DER bytes of each certificate, in chain order (for plugins).
    #[serde(skip)]
    pub der: Vec<Vec<u8>>,
}

impl TlsInfo {
    /// This session with the chain whose first certificates are `der`,
    /// of `sent` the server sent: see [`keep_chain`].
    pub fn with_chain(mut self, der: Vec<Vec<u8>>, sent: usize) -> TlsInfo {
        (self.chain, self.der, self.chain_cut) = keep_chain(der, sent);
        self
    }
}

/// The session facts of a finished handshake, with the whole chain;
/// `hello`, the ServerHello as read off the wire, gives JA3S and JA4S.
pub fn session_info(conn: &rustls::ClientConnection, hello: Option<&Flight>) -> TlsInfo {
    let version = match conn.protocol_version() {
        Some(rustls::ProtocolVersion::TLSv1_3) => "TLSv1.3".to_string(),
        Some(rustls::ProtocolVersion::TLSv1_2) => "TLSv1.2".to_string(),
        Some(v) => format!("{v:?}"),
        None => String::new(),
    };
    // IANA's name, as the first-flight reader gives it (rustls calls TLS
    // 1.3's suites TLS13_*).
    let cipher = conn.negotiated_cipher_suite().map(|s| suite_name(u16::from(s.suite()))).unwrap_or_default();
    let alpn = conn.alpn_protocol().map(|p| String::from_utf8_lossy(p).into_owned());
    let certs = conn.peer_certificates().unwrap_or_default();
    let (der, sent) = (certs.iter().take(MAX_CHAIN).map(|c| c.to_vec()).collect(), certs.len());
    // rustls negotiates only ECDHE (TLS 1.2) and (EC)DHE groups (TLS 1.3).
    let group = conn.negotiated_key_exchange_group().map(|g| u16::from(g.name()));
    let kx = match group {
        Some(256..=260) => "dhe",
        Some(_) => "ecdhe",
        None => "",
    };
    TlsInfo {
        path: "rustls".into(),
        version,
        cipher,
        alpn,
        starttls: None,
        kx: kx.into(),
        group: group.map(group_name),
        kx_bits: group.map_or(0, group_bits),
        ja3s: hello.map(ja3s).unwrap_or_default(),
        ja4s: hello.map(ja4s).unwrap_or_default(),
        ..TlsInfo::default()
    }
    .with_chain(der, sent)
}
