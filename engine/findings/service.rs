//! What detection found on one port: the [`Service`] event with its
//! [`Identity`], how it was found ([`ServiceMethod`], [`Tunnel`]), its
//! banner as text ([`banner_text`]) and its TLS session and certificate
//! chain ([`TlsInfo`], [`CertSummary`], defined by the wire side that
//! reads them, [`crate::wire::tls`] and [`crate::wire::cert`]).
//!
//! In: nothing; only types. Out: their NDJSON shape. What always holds:
//! optional fields are left out rather than written as `null`; a banner's
//! and a probe reply's bytes survive the round trip through text.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::{Proto, ScanId};
/// Made by the wire side, where the session is read; part of this event.
pub use crate::wire::{cert::CertSummary, tls::TlsInfo};

/// How a service was identified, as nmap's XML `method` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServiceMethod {
    /// A match rule matched a response.
    Probed,
    /// Only a soft match: the service is known, the product is not.
    Soft,
    /// Nothing matched; the service is the usual one for the port number.
    Table,
}

/// The tunnel a service was found in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tunnel {
    /// TLS from the first byte (`ssl/http`).
    Ssl,
    /// TLS after a STARTTLS exchange in the clear (the service keeps its name).
    Starttls,
}

impl Tunnel {
    pub fn as_str(self) -> &'static str {
        match self {
            Tunnel::Ssl => "ssl",
            Tunnel::Starttls => "starttls",
        }
    }

    pub fn parse(s: &str) -> Option<Tunnel> {
        match s {
            "ssl" => Some(Tunnel::Ssl),
            "starttls" => Some(Tunnel::Starttls),
            _ => None,
        }
    }
}

/// What a service says about itself: what a match rule gives (with `$1`
/// templates in a rule, filled in in a result), and the heart of a
/// [`Service`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// nmap's service name (`http`, `ssh`, ...); `unknown` when nothing matched.
    pub service: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub product: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub info: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpe: Vec<String>,
}

/// What one probe got back from a port no rule identified (nmap's
/// fingerprint-strings and `SF:` fingerprint): the probe's name and the
/// first bytes of its reply, at most [`ProbeReply::MAX`] of them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeReply {
    pub probe: String,
    #[serde(with = "banner_text")]
    pub data: Vec<u8>,
}

impl ProbeReply {
    /// Most bytes of one reply kept.
    pub const MAX: usize = 1024;
}

/// What runs on an open port: what service detection found, or (without
/// detection) what the port number suggests. The `service` event.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Service {
    pub scan_id: ScanId,
    pub ip: IpAddr,
    pub port: u16,
    pub proto: Proto,
    /// The name the user gave for the host (the target as typed, resolved
    /// to `ip`; nmap's `targetname`): the name its TLS handshakes send in
    /// SNI and its HTTP requests in `Host:`. Not `hostname`, which is the
    /// name the service says of itself (in [`Identity`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub targetname: Option<String>,
    /// The address's reverse DNS name as the plugins ran (nmap's
    /// `host.name`): what HTTP requests of a target given by address send
    /// in `Host:`. Not written: the `rdns` event carries it.
    #[serde(skip)]
    pub rdns: Option<String>,
    #[serde(flatten)]
    pub id: Identity,
    pub method: ServiceMethod,
    /// `ssl` when the service was found inside TLS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tunnel: Option<Tunnel>,
    /// The probe whose response identified it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<String>,
    /// What the service sent unprompted (its banner), raw; written with
    /// non-printable bytes as `\xHH`.
    #[serde(default, with = "banner_text", skip_serializing_if = "Vec::is_empty")]
    pub banner: Vec<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<Box<TlsInfo>>,
    /// On a port no rule identified: what each probe that got a reply got,
    /// in probe order (the NULL probe's named `NULL`), at most
    /// `service::detect::MAX_REPLIES` of at most [`ProbeReply::MAX`] bytes;
    /// written as the banner is. nmap's service fingerprint and
    /// fingerprint-strings are made from them
    /// ([`super::service_fp`]). Left out when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replies: Vec<ProbeReply>,
    /// Seconds since the scan started.
    pub t: f64,
}

impl Service {
    /// A port known only by its number: the port table's service, or
    /// `unknown`.
    pub fn bare(scan_id: ScanId, ip: IpAddr, port: u16, proto: Proto) -> Service {
        let service = crate::ports::service_name(port, proto.as_str()).unwrap_or("unknown");
        Service {
            scan_id,
            ip,
            port,
            proto,
            targetname: None,
            rdns: None,
            id: Identity { service: service.to_string(), ..Identity::default() },
            method: ServiceMethod::Table,
            tunnel: None,
            probe: None,
            banner: Vec::new(),
            tls: None,
            replies: Vec::new(),
            t: 0.0,
        }
    }

    /// The service name, unless nothing at all is known (`unknown`).
    pub fn known_service(&self) -> Option<&str> {
        (self.id.service != "unknown").then_some(self.id.service.as_str())
    }
}

/// Banners as text: printable ASCII kept, `\` and every other byte as `\xHH`.
pub mod banner_text {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn to_text(bytes: &[u8]) -> String {
        let mut s = String::with_capacity(bytes.len());
        for &b in bytes {
            match b {
                b'\\' => s.push_str("\\\\"),
                b'\r' => s.push_str("\\r"),
                b'\n' => s.push_str("\\n"),
                b'\t' => s.push_str("\\t"),
                0x20..=0x7e => s.push(b as char),
                _ => s.push_str(&format!("\\x{b:02x}")),
            }
        }
        s
    }

    /// The inverse of [`to_text`]; other text is taken as it is.
    pub fn from_text(s: &str) -> Vec<u8> {
        let b = s.as_bytes();
        let mut out = Vec::with_capacity(b.len());
        let mut i = 0;
        while i < b.len() {
            if b[i] == b'\\' && i + 1 < b.len() {
                let hex = |h: &[u8]| std::str::from_utf8(h).ok().and_then(|h| u8::from_str_radix(h, 16).ok());
                match b[i + 1] {
                    b'\\' => (out.push(b'\\'), i += 2),
                    b'r' => (out.push(b'\r'), i += 2),
                    b'n' => (out.push(b'\n'), i += 2),
                    b't' => (out.push(b'\t'), i += 2),
                    b'x' if i + 4 <= b.len() && hex(&b[i + 2..i + 4]).is_some() => {
                        (out.push(hex(&b[i + 2..i + 4]).unwrap_or(0)), i += 4)
                    }
                    _ => (out.push(b'\\'), i += 1),
                };
            } else {
                out.push(b[i]);
                i += 1;
            }
        }
        out
    }

    pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&to_text(v))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        Ok(from_text(&String::deserialize(d)?))
    }
}
