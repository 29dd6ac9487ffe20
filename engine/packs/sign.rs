//! Keys, signatures and the trust store, in minisign's own formats (the
//! `minisign` tool makes and checks the same files).
//!
//! A key ID is minisign's: the key number as 16 uppercase hex digits. A
//! signature file holds exactly one signature (four lines); anything more is
//! refused rather than read up to the first. Only prehashed (`ED`)
//! signatures are accepted, as minisign makes by default.

use std::io::Cursor;
use std::path::{Path, PathBuf};

use minisign::{PublicKey, SecretKey, SecretKeyBox, SignatureBox};

use super::refuse_as;
use crate::error::{Error, ErrorKind, Result};

/// Largest signature file read.
pub const MAX_SIG: usize = 4096;
/// Largest key file read.
pub const MAX_KEY: usize = 4096;

/// minisign's key ID for a key number: 16 uppercase hex digits.
pub fn key_id(keynum: &[u8]) -> String {
    let mut b = [0u8; 8];
    b.copy_from_slice(&keynum[..8.min(keynum.len())]);
    format!("{:016X}", u64::from_le_bytes(b))
}

/// A public key the user trusts to sign packs.
#[derive(Clone, Debug)]
pub struct TrustedKey {
    pub id: String,
    pub key: PublicKey,
    /// Where it is stored (empty for a key given in memory).
    pub file: PathBuf,
}

impl TrustedKey {
    pub fn new(key: PublicKey) -> TrustedKey {
        TrustedKey { id: key_id(key.keynum()), key, file: PathBuf::new() }
    }

    /// The key as a minisign public key file.
    pub fn to_file_text(&self) -> String {
        format!("untrusted comment: minisign public key {}\n{}\n", self.id, self.key.to_base64())
    }
}

/// Parses a public key: a minisign .pub file (comment line, base64 line) or
/// the base64 line alone (what `minisign -P` takes).
pub fn parse_public_key(text: &str) -> Result<PublicKey> {
    if text.len() > MAX_KEY {
        return Err(refuse_as(ErrorKind::Signature, "not a minisign public key (too long)"));
    }
    let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    let b64 = match lines.as_slice() {
        [one] => *one,
        [comment, key] if comment.starts_with("untrusted comment:") => *key,
        _ => {
            return Err(refuse_as(
                ErrorKind::Signature,
                "not a minisign public key (expected a comment line and a base64 line, or the base64 line)",
            ))
        }
    };
    let pk = PublicKey::from_base64(b64)
        .map_err(|e| refuse_as(ErrorKind::Signature, format!("not a minisign public key: {e}")))?;
    if pk.to_bytes().get(..2) != Some(b"Ed") {
        return Err(refuse_as(ErrorKind::Signature, "not a minisign Ed25519 public key (its algorithm is not Ed)"));
    }
    Ok(pk)
}

/// A freshly generated key pair as file texts.
pub struct KeyFiles {
    pub id: String,
    pub secret: String,
    pub public: String,
    pub encrypted: bool,
}

/// Makes a new key pair; the secret key is encrypted (minisign's scrypt)
/// with `password` when one is given, and stored unencrypted otherwise.
pub fn generate(password: Option<String>) -> Result<KeyFiles> {
    let encrypted = password.is_some();
    let pair = match password {
        Some(pw) => minisign::KeyPair::generate_encrypted_keypair(Some(pw)),
        None => minisign::KeyPair::generate_unencrypted_keypair(),
    }
    .map_err(|e| refuse_as(ErrorKind::Signature, format!("cannot generate a key: {e}")))?;
    let id = key_id(pair.pk.keynum());
    let comment = format!("moonscan pack secret key {id}");
    let secret = pair
        .sk
        .to_box(Some(&comment))
        .map_err(|e| refuse_as(ErrorKind::Signature, format!("cannot write the key: {e}")))?;
    let public = TrustedKey::new(pair.pk).to_file_text();
    Ok(KeyFiles { id, secret: secret.into_string(), public, encrypted })
}

/// Reads a minisign secret key file; an encrypted one needs `password`.
pub fn load_secret_key(path: &Path, password: Option<String>) -> Result<SecretKey> {
    let at = |m: String| refuse_as(ErrorKind::Signature, format!("{}: {m}", path.display()));
    let bytes = read_capped(path, MAX_KEY).map_err(|e| at(e.to_string()))?;
    let text = String::from_utf8(bytes).map_err(|_| at("not a minisign secret key (not text)".into()))?;
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.len() != 2 || !lines[0].starts_with("untrusted comment:") {
        return Err(at("not a minisign secret key (expected a comment line and a base64 line)".into()));
    }
    let boxed = || SecretKeyBox::from_string(&text).expect("from_string never fails");
    // The key's own bytes say whether it is encrypted: its KDF algorithm
    // (bytes 2-3 after the signature algorithm) is zero when it is not.
    let encrypted = {
        use base64::Engine;
        let raw = base64::engine::general_purpose::STANDARD.decode(lines[1].trim()).unwrap_or_default();
        raw.get(2..4).is_some_and(|kdf| kdf != [0, 0])
    };
    match (encrypted, password) {
        (false, _) => {
            boxed().into_unencrypted_secret_key().map_err(|e| at(format!("not a usable minisign secret key: {e}")))
        }
        (true, Some(pw)) => {
            SecretKey::from_box(boxed(), Some(pw)).map_err(|e| at(format!("cannot decrypt the key: {e}")))
        }
        (true, None) => Err(at("the secret key is encrypted; put its password in `key_password`".into())),
    }
}

/// The key ID of a secret key.
pub fn secret_key_id(sk: &SecretKey) -> String {
    key_id(sk.keynum())
}

/// Signs `data` (pack.yaml's exact bytes) with the trusted comment; returns
/// pack.sig's text.
pub fn sign_bytes(sk: &SecretKey, data: &[u8], trusted_comment: &str) -> Result<String> {
    let pk =
        PublicKey::from_secret_key(sk).map_err(|e| refuse_as(ErrorKind::Signature, format!("cannot sign: {e}")))?;
    let id = key_id(pk.keynum());
    let untrusted = format!("signature from moonscan pack key {id}");
    let sig = minisign::sign(Some(&pk), sk, Cursor::new(data), Some(trusted_comment), Some(&untrusted))
        .map_err(|e| refuse_as(ErrorKind::Signature, format!("cannot sign: {e}")))?;
    Ok(sig.into_string())
}

/// A parsed pack.sig.
pub struct Signature {
    pub key_id: String,
    pub trusted_comment: String,
    sig: SignatureBox,
}

/// Parses a signature file strictly: exactly one minisign signature, four
/// LF-terminated lines, nothing before or after it.
pub fn parse_signature(bytes: &[u8]) -> Result<Signature> {
    if bytes.len() > MAX_SIG {
        return Err(refuse_as(
            ErrorKind::Signature,
            format!("pack.sig: {} bytes, larger than the {MAX_SIG}-byte limit", bytes.len()),
        ));
    }
    let text = std::str::from_utf8(bytes).map_err(|_| refuse_as(ErrorKind::Signature, "pack.sig: not UTF-8 text"))?;
    if text.contains('\r') {
        return Err(refuse_as(
            ErrorKind::Signature,
            "pack.sig: holds carriage returns (a minisign signature has LF line ends)",
        ));
    }
    let mut lines: Vec<&str> = text.split('\n').collect();
    if lines.last() == Some(&"") {
        lines.pop();
    }
    let sigs = lines.iter().filter(|l| l.starts_with("untrusted comment:")).count();
    if sigs > 1 {
        return Err(refuse_as(
            ErrorKind::Signature,
            format!("pack.sig: holds {sigs} signatures; exactly one is allowed"),
        ));
    }
    if lines.len() != 4 || lines.iter().any(|l| l.trim().is_empty()) {
        return Err(refuse_as(ErrorKind::Signature, format!(
            "pack.sig: {} lines; a minisign signature is exactly 4 (untrusted comment, signature, trusted comment, global signature)",
            lines.len()
        )));
    }
    if !lines[0].starts_with("untrusted comment: ") || !lines[2].starts_with("trusted comment: ") {
        return Err(refuse_as(ErrorKind::Signature, "pack.sig: not a minisign signature (comment lines missing)"));
    }
    let comment = &lines[2]["trusted comment: ".len()..];
    if comment.trim() != comment {
        return Err(refuse_as(ErrorKind::Signature, "pack.sig: the trusted comment has leading or trailing spaces"));
    }
    let sig = SignatureBox::from_string(text)
        .map_err(|e| refuse_as(ErrorKind::Signature, format!("pack.sig: not a minisign signature: {e}")))?;
    if !sig.is_prehashed() {
        return Err(refuse_as(
            ErrorKind::Signature,
            "pack.sig: a legacy (non-prehashed) minisign signature; sign again with a current minisign",
        ));
    }
    let trusted_comment =
        sig.trusted_comment().map_err(|e| refuse_as(ErrorKind::Signature, format!("pack.sig: {e}")))?;
    Ok(Signature { key_id: key_id(sig.keynum()), trusted_comment, sig })
}

impl Signature {
    /// Checks the signature and its trusted comment against `key`.
    pub fn verify(&self, key: &PublicKey, data: &[u8]) -> Result<()> {
        minisign::verify(key, &self.sig, Cursor::new(data), true, false, false).map_err(|e| {
            refuse_as(ErrorKind::Signature, format!(
                "pack.sig: the signature by key {} does not match pack.yaml's bytes ({e}); was pack.yaml changed after signing?",
                self.key_id
            ))
        })
    }
}

/// The trusted keys kept in `dir` (`KEYID.pub` files).
pub fn load_trust_store(dir: &Path) -> Result<Vec<TrustedKey>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::new(ErrorKind::Io, format!("{}: {e}", dir.display()))),
    };
    let mut keys = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| Error::with_source(ErrorKind::Io, format!("{}: {e}", dir.display()), e))?.path();
        if path.extension().is_none_or(|x| x != "pub") {
            continue;
        }
        let at = |m: String| refuse_as(ErrorKind::Signature, format!("trusted key {}: {m}", path.display()));
        let meta = std::fs::symlink_metadata(&path).map_err(|e| at(e.to_string()))?;
        if !meta.file_type().is_file() {
            return Err(at("not a regular file".into()));
        }
        let bytes = read_capped(&path, MAX_KEY).map_err(|e| at(e.to_string()))?;
        let text = String::from_utf8(bytes).map_err(|_| at("not text".into()))?;
        let key = parse_public_key(&text).map_err(|e| at(e.to_string()))?;
        let k = TrustedKey { file: path.clone(), ..TrustedKey::new(key) };
        if path.file_stem().is_none_or(|s| s != k.id.as_str()) {
            return Err(at(format!("the file name does not match the key's ID {}", k.id)));
        }
        keys.push(k);
    }
    keys.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(keys)
}

/// Reads a file of at most `max` bytes (larger is an error).
pub fn read_capped(path: &Path, max: usize) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let f = std::fs::File::open(path)?;
    let mut buf = Vec::new();
    f.take(max as u64 + 1).read_to_end(&mut buf)?;
    if buf.len() > max {
        return Err(std::io::Error::other(format!("larger than the {max}-byte limit")));
    }
    Ok(buf)
}
