//! JA3S and JA4S: the fingerprints of a ServerHello, as read off the wire
//! in a [`Flight`].
//!
//! In: a flight. Out: the JA3S (MD5, 32 hex digits) and JA4S texts. What
//! always holds: GREASE values are left out of both; any flight gives a
//! fingerprint, never a panic.

use md5::Digest as _;

use crate::text::{hex, sha256_hex};
use crate::wire::hello::flight::Flight;
use crate::wire::iana::{SSL3, TLS10, TLS11, TLS12, TLS13};

/// GREASE values (RFC 8701) are left out of fingerprints.
fn grease(v: u16) -> bool {
    v & 0x0f0f == 0x0a0a && v >> 8 == v & 0xff
}

/// JA3S: MD5 of "version,cipher,extensions" in decimal, the extensions
/// dash-separated in the order sent.
pub fn ja3s(f: &Flight) -> String {
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
        sha256_hex(list.join(",").as_bytes())[..12].to_string()
    };
    format!("t{version}{:02}{alpn}_{:04x}_{hash}", ext.len().min(99), f.suite)
}
