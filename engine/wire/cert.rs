//! What a certificate chain shows: a summary of every certificate
//! ([`CertSummary`]), as service events and plugins see it.
//!
//! In: certificate DER bytes. Out: [`CertSummary`]s. What always holds:
//! any bytes give a summary (a certificate x509-parser cannot read gets its
//! fingerprint and an `error`), never a panic; the work is linear in the
//! input. What a chain may cost is bounded whatever a server sends
//! ([`keep_chain`]): at most [`MAX_CHAIN`] certificates are kept and
//! summarised, and their summaries' names are bounded in count and length;
//! what was cut is counted (`chain_cut`, `san_cut`), never silently
//! dropped. A leaf of the wire side: it imports only [`crate::text`].

use serde::{Deserialize, Serialize};
use x509_parser::prelude::*;
use x509_parser::public_key::PublicKey;

use crate::text::{hex_sep, one_line, sha256_hex};

/// One certificate, as x509-parser reads it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CertSummary {
    pub subject: String,
    pub issuer: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub san: Vec<String>,
    /// Subject alternative names past those a chain keeps (1,000 in all).
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub san_cut: u32,
    /// RFC 3339, UTC.
    pub not_before: String,
    pub not_after: String,
    /// Hex, as encoded.
    pub serial: String,
    /// `rsa`, `ec`, `ed25519`, `dsa` or the algorithm's name.
    pub key_type: String,
    pub key_bits: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub curve: Option<String>,
    pub signature_algorithm: String,
    pub self_signed: bool,
    pub sha256: String,
    /// Set when the certificate could not be parsed; then only `sha256` is meaningful.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Most certificates of a chain kept and summarised: real chains hold two
/// to five (a misconfigured server's a few more). A server may send tens of
/// thousands of empty ones in one Certificate message; past this they are
/// only counted.
pub const MAX_CHAIN: usize = 16;
/// Most subject alternative names kept over a whole chain (public CAs
/// issue certificates with up to a few hundred).
pub const MAX_SANS: usize = 1000;
/// Longest subject alternative name kept, in characters (a DNS name is at
/// most 253).
const MAX_SAN_CHARS: usize = 256;
/// Longest subject or issuer kept, in characters.
const MAX_NAME_CHARS: usize = 1024;

/// The part of a chain that is kept: its first [`MAX_CHAIN`] certificates
/// of `der` (which holds the first of the `sent` the server sent), their
/// summaries (with [`MAX_SANS`] names in all), and how many were cut.
pub fn keep_chain(mut der: Vec<Vec<u8>>, sent: usize) -> (Vec<CertSummary>, Vec<Vec<u8>>, u32) {
    der.truncate(MAX_CHAIN);
    let cut = sent.max(der.len()) - der.len();
    let mut sans = MAX_SANS;
    let chain = der.iter().map(|d| summarise_within(d, &mut sans)).collect();
    (chain, der, u32::try_from(cut).unwrap_or(u32::MAX))
}

/// Summarises one certificate.
pub fn summarise(der: &[u8]) -> CertSummary {
    summarise_within(der, &mut MAX_SANS.clone())
}

/// The first `max` characters of `s`.
fn cut_chars(s: String, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((at, _)) => s[..at].to_string(),
        None => s,
    }
}

/// Summarises one certificate, keeping at most `sans` of its subject
/// alternative names (less what it keeps).
fn summarise_within(der: &[u8], sans: &mut usize) -> CertSummary {
    let sha256 = sha256_hex(der);
    let cert = match X509Certificate::from_der(der) {
        Ok((_, cert)) => cert,
        Err(e) => {
            return CertSummary { sha256, error: Some(format!("unparsable certificate: {e}")), ..Default::default() }
        }
    };
    let reg = oid_registry();
    let name_of =
        |oid: &x509_parser::der_parser::oid::Oid| oid2sn(oid, reg).map_or_else(|_| oid.to_id_string(), str::to_string);

    let (mut san, mut san_cut) = (Vec::new(), 0u32);
    if let Ok(Some(ext)) = cert.subject_alternative_name() {
        for name in &ext.value.general_names {
            if *sans == 0 {
                san_cut = san_cut.saturating_add(1);
                continue;
            }
            *sans -= 1;
            let text = match name {
                GeneralName::DNSName(s) => format!("DNS:{s}"),
                GeneralName::RFC822Name(s) => format!("email:{s}"),
                GeneralName::URI(s) => format!("URI:{s}"),
                GeneralName::IPAddress(b) => format!("IP:{}", ip_text(b)),
                other => format!("{other:?}").chars().take(200).collect(),
            };
            san.push(cut_chars(one_line(&text).into_owned(), MAX_SAN_CHARS));
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
        subject: cut_chars(one_line(&cert.subject().to_string()).into_owned(), MAX_NAME_CHARS),
        issuer: cut_chars(one_line(&cert.issuer().to_string()).into_owned(), MAX_NAME_CHARS),
        san,
        san_cut,
        not_before: rfc3339(cert.validity().not_before.timestamp()),
        not_after: rfc3339(cert.validity().not_after.timestamp()),
        serial: hex_sep(cert.raw_serial(), ""),
        key_type,
        key_bits,
        curve,
        signature_algorithm: name_of(&cert.signature_algorithm.algorithm),
        self_signed: cert.subject().as_raw() == cert.issuer().as_raw(),
        sha256,
        error: None,
    }
}

pub(crate) fn ip_text(b: &[u8]) -> String {
    match b.len() {
        4 => std::net::Ipv4Addr::new(b[0], b[1], b[2], b[3]).to_string(),
        16 => std::net::Ipv6Addr::from(<[u8; 16]>::try_from(b).unwrap_or_default()).to_string(),
        _ => hex_sep(b, ":"),
    }
}

/// Seconds since 1970 as RFC 3339 UTC, for any year a certificate can hold.
fn rfc3339(secs: i64) -> String {
    let (year, t) = crate::text::utc(secs);
    format!("{year:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z", u8::from(t.month()), t.day(), t.hour(), t.minute(), t.second())
}

/// For `skip_serializing_if`: a count of zero is left out.
pub(crate) fn is_zero_u32(n: &u32) -> bool {
    *n == 0
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
    fn a_chain_keeps_sixteen_certificates_and_a_thousand_names() {
        let pem = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tls/lab-cert.pem")).unwrap();
        let der = pem_to_der(&pem);
        // 600 copies of a certificate of two names: 1,000 names are kept.
        let (chain, kept, cut) = keep_chain(vec![der; 600], 600);
        assert_eq!((chain.len(), kept.len(), cut), (MAX_CHAIN, MAX_CHAIN, 584));
        let sans: usize = chain.iter().map(|c| c.san.len()).sum();
        assert_eq!(sans, 2 * MAX_CHAIN);
        assert_eq!(cut_chars("é".repeat(300), 256).chars().count(), 256);
        // The name budget spans the chain.
        let mut left = 3;
        let (a, b) = (summarise_within(&kept[0], &mut left), summarise_within(&kept[1], &mut left));
        assert_eq!((a.san.len(), a.san_cut, b.san.len(), b.san_cut, left), (2, 0, 1, 1, 0));
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
        assert_eq!(s.sha256, sha256_hex(&der));
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
