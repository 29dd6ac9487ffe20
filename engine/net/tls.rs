//! What a TLS session shows: the negotiated version, cipher and ALPN, and a
//! summary of every certificate of the chain.
//!
//! In: a finished rustls client session, or certificate DER bytes. Out:
//! [`TlsInfo`] and [`CertSummary`]. What always holds: any bytes give a
//! summary (a certificate x509-parser cannot read gets its fingerprint and
//! an `error`), never a panic; the work is linear in the input.

#![deny(unsafe_code)]

use std::fmt::Write as _;

use sha2::{Digest, Sha256};
use x509_parser::prelude::*;
use x509_parser::public_key::PublicKey;

use crate::findings::script_text::one_line;
use crate::findings::{CertSummary, TlsInfo};

/// The session facts of a finished handshake, with the whole chain;
/// `hello`, the ServerHello as read off the wire, gives JA3S and JA4S.
pub fn session_info(conn: &rustls::ClientConnection, hello: Option<&super::hello::Flight>) -> TlsInfo {
    let version = match conn.protocol_version() {
        Some(rustls::ProtocolVersion::TLSv1_3) => "TLSv1.3".to_string(),
        Some(rustls::ProtocolVersion::TLSv1_2) => "TLSv1.2".to_string(),
        Some(v) => format!("{v:?}"),
        None => String::new(),
    };
    // IANA's name, as the first-flight reader gives it (rustls calls TLS
    // 1.3's suites TLS13_*).
    let cipher =
        conn.negotiated_cipher_suite().map(|s| super::hello::suite_name(u16::from(s.suite()))).unwrap_or_default();
    let alpn = conn.alpn_protocol().map(|p| String::from_utf8_lossy(p).into_owned());
    let der: Vec<Vec<u8>> = conn.peer_certificates().unwrap_or_default().iter().map(|c| c.to_vec()).collect();
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
        group: group.map(super::hello::group_name),
        kx_bits: group.map_or(0, super::hello::group_bits),
        ja3s: hello.map(super::hello::ja3s).unwrap_or_default(),
        ja4s: hello.map(super::hello::ja4s).unwrap_or_default(),
        chain: der.iter().map(|d| summarise(d)).collect(),
        der,
    }
}

/// Summarises one certificate.
pub fn summarise(der: &[u8]) -> CertSummary {
    let sha256 = hex(&Sha256::digest(der), "");
    let cert = match X509Certificate::from_der(der) {
        Ok((_, cert)) => cert,
        Err(e) => {
            return CertSummary { sha256, error: Some(format!("unparsable certificate: {e}")), ..Default::default() }
        }
    };
    let reg = oid_registry();
    let name_of =
        |oid: &x509_parser::der_parser::oid::Oid| oid2sn(oid, reg).map_or_else(|_| oid.to_id_string(), str::to_string);

    let mut san = Vec::new();
    if let Ok(Some(ext)) = cert.subject_alternative_name() {
        for name in &ext.value.general_names {
            san.push(match name {
                GeneralName::DNSName(s) => format!("DNS:{s}"),
                GeneralName::RFC822Name(s) => format!("email:{s}"),
                GeneralName::URI(s) => format!("URI:{s}"),
                GeneralName::IPAddress(b) => format!("IP:{}", ip_text(b)),
                other => format!("{other:?}").chars().take(200).collect(),
            });
        }
    }

    let spki = cert.public_key();
    let (key_type, curve) = match spki.parsed() {
        Ok(PublicKey::RSA(_)) => ("rsa".to_string(), None),
        Ok(PublicKey::EC(_)) => {
            let curve = spki.algorithm.parameters.as_ref().and_then(|p| p.as_oid().ok()).map(|o| name_of(&o));
            ("ec".to_string(), curve)
        }
        Ok(PublicKey::DSA(_)) => ("dsa".to_string(), None),
        _ => (name_of(&spki.algorithm.algorithm).to_ascii_lowercase(), None),
    };
    let key_bits = match spki.parsed() {
        Ok(k) if k.key_size() > 0 => k.key_size() as u32,
        _ if key_type == "ed25519" => 256,
        _ if key_type == "ed448" => 456,
        _ => 0,
    };

    CertSummary {
        // Names are the server's text: each on one line (a line break in a
        // CN written `\x0A`), so no output can show it as a line of its own.
        subject: one_line(&cert.subject().to_string()).into_owned(),
        issuer: one_line(&cert.issuer().to_string()).into_owned(),
        san: san.iter().map(|s| one_line(s).into_owned()).collect(),
        not_before: rfc3339(cert.validity().not_before.timestamp()),
        not_after: rfc3339(cert.validity().not_after.timestamp()),
        serial: hex(cert.raw_serial(), ""),
        key_type,
        key_bits,
        curve,
        signature_algorithm: name_of(&cert.signature_algorithm.algorithm),
        self_signed: cert.subject().as_raw() == cert.issuer().as_raw(),
        sha256,
        error: None,
    }
}

pub(crate) fn hex(bytes: &[u8], sep: &str) -> String {
    let mut s = String::with_capacity(bytes.len() * (2 + sep.len()));
    for (i, b) in bytes.iter().enumerate() {
        if i > 0 {
            s.push_str(sep);
        }
        let _ = write!(s, "{b:02x}");
    }
    s
}

pub(crate) fn ip_text(b: &[u8]) -> String {
    match b.len() {
        4 => std::net::Ipv4Addr::new(b[0], b[1], b[2], b[3]).to_string(),
        16 => std::net::Ipv6Addr::from(<[u8; 16]>::try_from(b).unwrap_or_default()).to_string(),
        _ => hex(b, ":"),
    }
}

/// Seconds since 1970 as RFC 3339 UTC, for any year a certificate can hold.
fn rfc3339(secs: i64) -> String {
    let (year, t) = crate::findings::utc(secs);
    format!("{year:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z", u8::from(t.month()), t.day(), t.hour(), t.minute(), t.second())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn dates_convert_for_any_year() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(rfc3339(-1), "1969-12-31T23:59:59Z");
        assert_eq!(rfc3339(253_402_300_799), "9999-12-31T23:59:59Z");
    }

    #[test]
    fn dates_beyond_the_time_crate_range_convert_too() {
        assert_eq!(rfc3339(253_402_300_800), "10000-01-01T00:00:00Z");
        assert_eq!(rfc3339(-62_167_219_201), "-001-12-31T23:59:59Z");
        assert_eq!(rfc3339(-377_705_116_801), "-10000-12-31T23:59:59Z");
        assert_eq!(rfc3339(i64::MAX), "292277026596-12-04T15:30:07Z");
        assert_eq!(rfc3339(i64::MIN), "-292277022657-01-27T08:29:52Z");
    }

    #[test]
    fn garbage_gets_a_fingerprint_and_an_error() {
        for bytes in [&b""[..], b"\x30", b"\x30\x82\xff\xff", &[0x30; 64]] {
            let s = summarise(bytes);
            assert!(s.error.is_some());
            assert_eq!(s.sha256.len(), 64);
        }
    }

    #[test]
    fn the_lab_certificate_is_summarised() {
        let pem = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tls/lab-cert.pem")).unwrap();
        let der = pem_to_der(&pem);
        let s = summarise(&der);
        assert_eq!(s.error, None);
        assert_eq!(s.subject, "CN=lab.moonscan.test, O=moonscan lab");
        assert_eq!(s.issuer, s.subject);
        assert!(s.self_signed);
        assert_eq!(s.san, ["DNS:lab.moonscan.test", "DNS:www.lab.moonscan.test"]);
        assert_eq!((s.key_type.as_str(), s.key_bits), ("rsa", 2048));
        assert_eq!(s.signature_algorithm, "sha256WithRSAEncryption");
        assert_eq!(s.sha256, hex(&Sha256::digest(&der), ""));
        assert!(s.not_before.ends_with('Z') && s.not_after > s.not_before);
    }

    #[test]
    fn an_ec_certificate_names_its_curve() {
        let pem = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tls/ec-cert.pem")).unwrap();
        let s = summarise(&pem_to_der(&pem));
        assert_eq!((s.key_type.as_str(), s.key_bits, s.curve.as_deref()), ("ec", 256, Some("prime256v1")));
        assert_eq!(s.signature_algorithm, "ecdsa-with-SHA256");
        assert_eq!(s.san, ["DNS:ec.moonscan.test", "IP:198.18.0.2", "IP:2001:2::2"]);
    }

    /// Base64 PEM body to DER, for the tests' fixed certificates.
    pub(crate) fn pem_to_der(pem: &str) -> Vec<u8> {
        let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
        let val = |c: u8| match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            _ => 63,
        };
        let (mut out, mut acc, mut n) = (Vec::new(), 0u32, 0);
        for c in body.bytes().filter(|&c| c != b'=') {
            acc = (acc << 6) | u32::from(val(c));
            n += 6;
            if n >= 8 {
                n -= 8;
                out.push((acc >> n) as u8);
            }
        }
        out
    }
}
