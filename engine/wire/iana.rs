//! The IANA registry's names for what a TLS server says: protocol
//! versions ([`SSL3`] to [`TLS13`]), cipher suites, named groups (and the
//! strength TLS scanners grade them at) and alerts, as OpenSSL, nmap and
//! the other TLS scanners print them.
//!
//! In: the numbers off the wire. Out: names and bits. What always holds:
//! a leaf of the wire side (it imports nothing of the crate); every number
//! has a name, an unknown one its value in hex, never a panic.

use tls_parser::TlsCipherSuite;

pub const SSL3: u16 = 0x0300;
pub const TLS10: u16 = 0x0301;
pub const TLS11: u16 = 0x0302;
pub const TLS12: u16 = 0x0303;
pub const TLS13: u16 = 0x0304;

/// A version's name as TLS scanners print it.
pub fn version_name(v: u16) -> String {
    match v {
        0x0002 => "SSLv2".into(),
        SSL3 => "SSLv3".into(),
        TLS10 => "TLSv1.0".into(),
        TLS11 => "TLSv1.1".into(),
        TLS12 => "TLSv1.2".into(),
        TLS13 => "TLSv1.3".into(),
        v => format!("0x{v:04x}"),
    }
}

/// A suite's IANA name, or its number in hex.
pub fn suite_name(id: u16) -> String {
    TlsCipherSuite::from_id(id).map_or_else(|| format!("0x{id:04x}"), |s| s.name.to_string())
}

/// A named group's name, as OpenSSL and nmap print it.
pub fn group_name(g: u16) -> String {
    let known = match g {
        1 => "sect163k1",
        2 => "sect163r1",
        3 => "sect163r2",
        4 => "sect193r1",
        5 => "sect193r2",
        6 => "sect233k1",
        7 => "sect233r1",
        8 => "sect239k1",
        9 => "sect283k1",
        10 => "sect283r1",
        11 => "sect409k1",
        12 => "sect409r1",
        13 => "sect571k1",
        14 => "sect571r1",
        15 => "secp160k1",
        16 => "secp160r1",
        17 => "secp160r2",
        18 => "secp192k1",
        19 => "secp192r1",
        20 => "secp224k1",
        21 => "secp224r1",
        22 => "secp256k1",
        23 => "secp256r1",
        24 => "secp384r1",
        25 => "secp521r1",
        26 => "brainpoolP256r1",
        27 => "brainpoolP384r1",
        28 => "brainpoolP512r1",
        29 => "x25519",
        30 => "x448",
        256 => "ffdhe2048",
        257 => "ffdhe3072",
        258 => "ffdhe4096",
        259 => "ffdhe6144",
        260 => "ffdhe8192",
        0x11eb => "SecP256r1MLKEM768",
        0x11ec => "X25519MLKEM768",
        _ => return format!("0x{g:04x}"),
    };
    known.to_string()
}

/// A named group's strength in bits, as TLS scanners grade it.
pub fn group_bits(g: u16) -> u32 {
    match g {
        1..=3 => 163,
        4 | 5 => 193,
        6 | 7 => 233,
        8 => 239,
        9 | 10 => 283,
        11 | 12 => 409,
        13 | 14 => 571,
        25 => 521,
        15..=17 => 160,
        18 | 19 => 192,
        20 | 21 => 224,
        22 | 23 | 26 => 256,
        24 | 27 => 384,
        28 => 512,
        29 | 0x11ec => 253,
        30 => 448,
        256 => 2048,
        257 => 3072,
        258 => 4096,
        259 => 6144,
        260 => 8192,
        0x11eb => 256,
        _ => 0,
    }
}

/// An alert description's name.
pub fn alert_name(d: u8) -> &'static str {
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
