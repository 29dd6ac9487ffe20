//! Bytes and times as text, for every layer: hex digits ([`hex`],
//! [`hex_sep`], [`hex_upper_sep`]), a SHA-256 as hex ([`sha256_hex`]), a
//! server's text on one line ([`one_line`]) and the UTC date of any second
//! ([`utc`]). The one place each of these is written.
//!
//! In: bytes, strings and seconds. Out: text. What always holds: a leaf:
//! it imports nothing of the crate, so the wire side and the findings both
//! use it without importing each other; every function is total (any input
//! gives text, never a panic) and its output is fixed (lowercase hex unless
//! the name says upper, two digits a byte, the separator only between
//! bytes), since fingerprints, certificate fields and pack hashes are
//! compared as written.

use std::borrow::Cow;
use std::fmt::Write as _;

use sha2::{Digest, Sha256};

/// Lowercase hex, two digits a byte, nothing between them.
pub fn hex(bytes: &[u8]) -> String {
    hex_sep(bytes, "")
}

/// Lowercase hex, two digits a byte, `sep` between bytes.
pub fn hex_sep(bytes: &[u8], sep: &str) -> String {
    let mut s = String::with_capacity(bytes.len() * (2 + sep.len()));
    for (i, b) in bytes.iter().enumerate() {
        if i > 0 {
            s.push_str(sep);
        }
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// Uppercase hex, two digits a byte, `sep` between bytes (MAC addresses,
/// certificate fields as OpenSSL prints them).
pub fn hex_upper_sep(bytes: &[u8], sep: &str) -> String {
    hex_sep(bytes, sep).to_ascii_uppercase()
}

/// The SHA-256 of `bytes` in lowercase hex (64 digits).
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// One value on one line: every control character (C0 and C1, line
/// breaks and tabs included) written as a visible `\xNN`.
pub fn one_line(s: &str) -> Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if c.is_control() {
            let _ = write!(out, "\\x{:02X}", c as u32);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// The UTC date and time `secs` seconds after 1970, for any year an `i64`
/// reaches (certificates say 9999 and beyond): the year, and the date in a
/// 400-year cycle of the same calendar (dates and weekdays repeat every 400
/// years), so the `time` crate's -9999..9999 range never fails.
pub fn utc(secs: i64) -> (i64, time::OffsetDateTime) {
    const CYCLE: i64 = 146_097 * 86_400;
    // Years 1970 to 2369: always in range.
    let t =
        time::OffsetDateTime::from_unix_timestamp(secs.rem_euclid(CYCLE)).unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    (i64::from(t.year()) + 400 * secs.div_euclid(CYCLE), t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_is_two_digits_a_byte() {
        assert_eq!(hex(&[]), "");
        assert_eq!(hex(&[0x00, 0x0f, 0xab]), "000fab");
        assert_eq!(hex_sep(&[0x00, 0x0f, 0xab], ":"), "00:0f:ab");
        assert_eq!(hex_upper_sep(&[0x00, 0x0f, 0xab], ":"), "00:0F:AB");
        assert_eq!(hex_sep(&[0xab], ":"), "ab");
    }

    #[test]
    fn sha256_hex_is_lowercase() {
        assert_eq!(sha256_hex(b""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    }
}
