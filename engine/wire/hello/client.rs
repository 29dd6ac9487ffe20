//! ClientHellos of our own: any version from SSLv3 to TLS 1.3 and any
//! suites, including the ones no modern library offers (export, NULL, anon,
//! RC4, DES, static DH), to see what a server answers.
//!
//! In: a version, suites and an optional server name. Out: the bytes of
//! one TLS record holding the ClientHello. What always holds: the record is
//! well formed whatever is asked (suites are capped at [`SUITES_MAX`]); no
//! key is ever used, so the key share is random bytes.

use tls_parser::{TlsCipherAu, TlsCipherEnc, TlsCipherEncMode, TlsCipherKx, TlsCipherMac, TlsCipherSuite, CIPHERS};

use crate::wire::iana::{SSL3, TLS10, TLS11, TLS12, TLS13};

/// Most suites one hello offers (a record holds 2^14 bytes).
pub const SUITES_MAX: usize = 4096;

/// Named groups offered: the modern ones first, then every legacy curve
/// and the finite-field groups, so a server can pick whatever it has.
const GROUPS: [u16; 35] = [
    29, 23, 24, 25, 30, 256, 257, 258, 259, 260, 22, 21, 20, 19, 18, 17, 16, 15, 26, 27, 28, 14, 13, 12, 11, 10, 9, 8,
    7, 6, 5, 4, 3, 2, 1,
];

/// Signature algorithms offered (TLS 1.2 and 1.3), strongest first, then
/// SHA-1 and MD5 ones so an old server still finds its own.
const SIGNATURES: [u16; 22] = [
    0x0403, 0x0503, 0x0603, 0x0807, 0x0808, 0x0804, 0x0805, 0x0806, 0x0401, 0x0501, 0x0601, 0x0402, 0x0502, 0x0602,
    0x0303, 0x0203, 0x0201, 0x0202, 0x0301, 0x0302, 0x0101, 0x0102,
];

/// One ClientHello to build.
#[derive(Clone, Debug)]
pub struct ClientHello {
    /// The highest version offered (0x0300 SSLv3 .. 0x0304 TLS 1.3).
    pub version: u16,
    /// Suites in the order offered.
    pub suites: Vec<u16>,
    /// Server Name Indication (a host name; never an address).
    pub server_name: Option<String>,
    /// ALPN protocols offered.
    pub alpn: Vec<String>,
}

impl ClientHello {
    /// The record's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let legacy = self.version.min(TLS12);
        let mut body = Vec::with_capacity(128 + 2 * self.suites.len());
        body.extend_from_slice(&legacy.to_be_bytes());
        body.extend_from_slice(&random::<32>());
        if self.version >= TLS13 {
            // A session id, as TLS 1.3's middlebox compatibility mode sends.
            body.push(32);
            body.extend_from_slice(&random::<32>());
        } else {
            body.push(0);
        }
        let suites = &self.suites[..self.suites.len().min(SUITES_MAX)];
        let mut list: Vec<u16> = suites.to_vec();
        if self.version < TLS13 {
            // TLS_EMPTY_RENEGOTIATION_INFO_SCSV: said by every client today.
            list.push(0x00ff);
        }
        put_u16(&mut body, (list.len() * 2) as u16);
        for s in list {
            body.extend_from_slice(&s.to_be_bytes());
        }
        // Compression: null only.
        body.extend_from_slice(&[1, 0]);
        // SSLv3 had no extensions; a server of that age may choke on them.
        if self.version > SSL3 {
            let mut ext = self.extensions();
            // RFC 7685 padding: some servers (F5) hang on a ClientHello of
            // 256 to 511 bytes; pad it to 512.
            let message = 4 + body.len() + 2 + ext.len();
            if (256..512).contains(&message) {
                put_ext(&mut ext, 21, &vec![0; (512 - message).saturating_sub(4)]);
            }
            put_u16(&mut body, ext.len() as u16);
            body.extend_from_slice(&ext);
        }
        let mut hs = Vec::with_capacity(body.len() + 4);
        hs.push(1);
        hs.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
        hs.extend_from_slice(&body);
        let mut record = Vec::with_capacity(hs.len() + 5);
        record.push(22);
        // The record version stays at TLS 1.0 (SSLv3 for SSLv3), as clients
        // send it, so old servers do not drop the hello before reading it.
        record.extend_from_slice(&legacy.min(TLS10).to_be_bytes());
        put_u16(&mut record, hs.len() as u16);
        record.extend_from_slice(&hs);
        record
    }

    fn extensions(&self) -> Vec<u8> {
        let mut ext = Vec::with_capacity(256);
        if let Some(name) = &self.server_name {
            let name = name.as_bytes();
            let mut sni = Vec::with_capacity(name.len() + 5);
            put_u16(&mut sni, name.len() as u16 + 3);
            sni.push(0);
            put_u16(&mut sni, name.len() as u16);
            sni.extend_from_slice(name);
            put_ext(&mut ext, 0, &sni);
        }
        put_ext(&mut ext, 10, &list16(&GROUPS));
        put_ext(&mut ext, 11, &[3, 0, 1, 2]);
        if self.version >= TLS12 {
            put_ext(&mut ext, 13, &list16(&SIGNATURES));
        }
        if !self.alpn.is_empty() {
            let mut names = Vec::new();
            for p in &self.alpn {
                names.push(p.len().min(255) as u8);
                names.extend_from_slice(&p.as_bytes()[..p.len().min(255)]);
            }
            let mut alpn = Vec::with_capacity(names.len() + 2);
            put_u16(&mut alpn, names.len() as u16);
            alpn.extend_from_slice(&names);
            put_ext(&mut ext, 16, &alpn);
        }
        // extended_master_secret, session_ticket.
        put_ext(&mut ext, 23, &[]);
        put_ext(&mut ext, 35, &[]);
        if self.version >= TLS13 {
            // Only TLS 1.3 suites: a hello for TLS 1.3 alone (enumeration).
            let only13 =
                self.suites.iter().all(|&s| TlsCipherSuite::from_id(s).is_some_and(|s| s.kx == TlsCipherKx::Tls13));
            let versions: Vec<u16> = if only13 { vec![TLS13] } else { vec![TLS13, TLS12, TLS11, TLS10] };
            let mut sv = vec![(versions.len() * 2) as u8];
            for v in versions {
                sv.extend_from_slice(&v.to_be_bytes());
            }
            put_ext(&mut ext, 43, &sv);
            // psk_key_exchange_modes: psk_dhe_ke.
            put_ext(&mut ext, 45, &[1, 1]);
            // key_share: one x25519 share. Any 32 bytes are a valid point
            // and the handshake never goes far enough to need the key.
            let mut share = Vec::with_capacity(38);
            put_u16(&mut share, 36);
            put_u16(&mut share, 29);
            put_u16(&mut share, 32);
            share.extend_from_slice(&random::<32>());
            put_ext(&mut ext, 51, &share);
        }
        ext
    }
}

fn put_u16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_be_bytes());
}

fn put_ext(out: &mut Vec<u8>, kind: u16, data: &[u8]) {
    put_u16(out, kind);
    put_u16(out, data.len() as u16);
    out.extend_from_slice(data);
}

fn list16(items: &[u16]) -> Vec<u8> {
    let mut out = Vec::with_capacity(items.len() * 2 + 2);
    put_u16(&mut out, (items.len() * 2) as u16);
    for i in items {
        out.extend_from_slice(&i.to_be_bytes());
    }
    out
}

fn random<const N: usize>() -> [u8; N] {
    let mut b = [0u8; N];
    // Without randomness the hello is still valid: it is never used for keys.
    let _ = getrandom::fill(&mut b);
    b
}

/// Every known suite `version` can negotiate, in the order a careful
/// client prefers them: authenticated forward-secret AEAD first, then
/// weaker and weaker, anonymous and NULL suites last, so that a server
/// that follows the client's order picks one that sends a certificate.
pub fn suites_for(version: u16) -> Vec<u16> {
    let mut all: Vec<&TlsCipherSuite> = CIPHERS.values().filter(|s| usable(s, version)).collect();
    all.sort_by_key(|s| (rank(s), s.id.0));
    all.iter().map(|s| s.id.0).collect()
}

/// Whether `suite` exists at `version`.
pub fn usable(s: &TlsCipherSuite, version: u16) -> bool {
    let id = s.id.0;
    // Signalling values and NULL_WITH_NULL_NULL are not suites.
    if id == 0x0000 || id == 0x00ff || id == 0x5600 || s.name.contains("SCSV") {
        return false;
    }
    if s.kx == TlsCipherKx::Tls13 {
        return version >= TLS13;
    }
    if version >= TLS13 {
        return false;
    }
    // AEAD modes and SHA-2 MACs came with TLS 1.2.
    let tls12 = matches!(s.enc_mode, TlsCipherEncMode::Gcm | TlsCipherEncMode::Ccm)
        || s.enc == TlsCipherEnc::Chacha20_Poly1305
        || matches!(s.mac, TlsCipherMac::HmacSha256 | TlsCipherMac::HmacSha384 | TlsCipherMac::Aead);
    version >= TLS12 || !tls12
}

fn rank(s: &TlsCipherSuite) -> u32 {
    let mut r = 0;
    if s.au == TlsCipherAu::Null && s.kx != TlsCipherKx::Tls13 {
        r += 1000;
    }
    if s.enc == TlsCipherEnc::Null {
        r += 2000;
    }
    if s.name.contains("EXPORT") {
        r += 500;
    }
    r += match s.enc {
        TlsCipherEnc::Des | TlsCipherEnc::Rc2 | TlsCipherEnc::Rc4 => 300,
        TlsCipherEnc::TripleDes => 200,
        TlsCipherEnc::Aes | TlsCipherEnc::Chacha20_Poly1305 => 0,
        _ => 100,
    };
    r += match s.kx {
        TlsCipherKx::Ecdhe | TlsCipherKx::Tls13 => 0,
        TlsCipherKx::Dhe => 10,
        TlsCipherKx::Rsa => 20,
        TlsCipherKx::Ecdh | TlsCipherKx::Dh => 30,
        _ => 600,
    };
    if s.enc_mode == TlsCipherEncMode::Cbc {
        r += 5;
    }
    r
}
