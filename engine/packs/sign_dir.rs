//! Signing a pack folder (`moonscan pack sign`): the listed files' hashes
//! written into pack.yaml when asked, the whole pack checked as
//! [`super::verify`] checks it, then pack.sig written and checked.

use std::path::Path;

use super::*;

/// What [`sign_dir`] did.
#[derive(Debug)]
pub struct SignReport {
    pub name: String,
    pub version: String,
    pub key_id: String,
    pub trusted_comment: String,
    /// Files whose hash was written into pack.yaml.
    pub updated: Vec<String>,
    /// pack.yaml had to be rewritten in canonical form (its comments are gone).
    pub rewritten: bool,
}

/// Signs a pack folder: with `update_hashes`, first writes every listed
/// file's sha256 into pack.yaml (else they must already match); then checks
/// the whole pack as [`verify`] would, writes pack.sig with the trusted
/// comment `pack:NAME version:VERSION`, and checks the new signature. Its
/// plugins require from the core library of `core_dir` after their own.
pub fn sign_dir(dir: &Path, sk: &minisign::SecretKey, update_hashes: bool, core_dir: &Path) -> Result<SignReport> {
    let label = dir.display().to_string();
    let inner = || -> Result<SignReport> {
        if !dir.is_dir() {
            return Err(refuse("not a folder (sign the folder, then make the .tar.gz)"));
        }
        let original = read_in_pack(dir, "pack.yaml", manifest::MAX_MANIFEST as u64)?;
        // Refused before pack.yaml is touched (verify_root refuses it too).
        if let Ok(m) = manifest::parse(&original, "pack.yaml", false) {
            check_not_core(&m.name)?;
        }
        let mut bytes = original.clone();
        let mut updated = Vec::new();
        let mut rewritten = false;
        if update_hashes {
            let m = manifest::parse(&bytes, "pack.yaml", false)?;
            let (new, upd, canon) = rewrite_hashes(dir, &bytes, &m)?;
            if new != bytes {
                write_atomic(&dir.join("pack.yaml"), &new)?;
                bytes = new;
            }
            updated = upd;
            rewritten = canon;
        }
        // A pack that would not verify is not signed, and its pack.yaml is left as it was.
        let v = match verify_root(dir, SigMode::Ignore, true, false, None, &plugins::core_library(core_dir)?) {
            Ok(v) => v,
            Err(e) => {
                if bytes != original {
                    write_atomic(&dir.join("pack.yaml"), &original)?;
                }
                return Err(e);
            }
        };
        let comment = v.manifest.trusted_comment();
        let text = sign::sign_bytes(sk, &bytes, &comment)?;
        write_atomic(&dir.join("pack.sig"), text.as_bytes())?;
        let pk = minisign::PublicKey::from_secret_key(sk).map_err(|e| refuse(e.to_string()))?;
        let own = Trust { keys: vec![TrustedKey::new(pk)], allow_unsigned: false };
        verify_root(dir, SigMode::Check(&own), true, false, None, &plugins::core_library(core_dir)?)?;
        Ok(SignReport {
            name: v.manifest.name.clone(),
            version: v.manifest.version.clone(),
            key_id: sign::secret_key_id(sk),
            trusted_comment: comment,
            updated,
            rewritten,
        })
    };
    inner().map_err(|e| named(&label, e))
}

/// pack.yaml with every listed file's sha256 written in: edited in place
/// where each entry is a `file:` line followed by its `sha256:` line (the
/// author's layout and comments kept), else rewritten in canonical form.
/// Returns the new bytes, the files whose hash changed, and whether it was
/// rewritten.
fn rewrite_hashes(dir: &Path, bytes: &[u8], m: &Manifest) -> Result<(Vec<u8>, Vec<String>, bool)> {
    let mut hashes = std::collections::BTreeMap::new();
    let mut updated = Vec::new();
    for (e, kind) in m.entries() {
        let h = sha256_hex(&read_in_pack(dir, &e.file, max_size(kind))?);
        if h != e.sha256 {
            updated.push(e.file.clone());
        }
        hashes.insert(e.file.clone(), h);
    }
    let text = std::str::from_utf8(bytes).map_err(|_| refuse("pack.yaml: not UTF-8"))?;
    let file_re =
        regex::Regex::new(r##"^(\s*(?:-\s+)?)file:\s*['"]?([^'"#\s]+)['"]?\s*(#.*)?$"##).expect("valid regex");
    let sha_re = regex::Regex::new(r"^(\s*(?:-\s+)?)sha256:.*$").expect("valid regex");
    let mut current: Option<String> = None;
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let (body, end) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        if let Some(c) = file_re.captures(body) {
            current = Some(c[2].to_string());
        } else if let Some(c) = sha_re.captures(body) {
            if let Some(h) = current.take().and_then(|f| hashes.get(&f)) {
                out.push_str(&format!("{}sha256: {h}{end}", &c[1]));
                continue;
            }
        }
        out.push_str(line);
    }
    let edited = out.into_bytes();
    if let Ok(m2) = manifest::parse(&edited, "pack.yaml", true) {
        if m2.entries().all(|(e, _)| hashes.get(&e.file) == Some(&e.sha256)) {
            return Ok((edited, updated, false));
        }
    }
    let mut m2 = m.clone();
    for e in m2.plugins.iter_mut().chain(m2.lib.iter_mut()).chain(m2.probes.iter_mut()) {
        e.sha256 = hashes[&e.file].clone();
    }
    let yaml = serde_yaml::to_string(&m2).map_err(|e| refuse(format!("cannot write pack.yaml: {e}")))?;
    Ok((yaml.into_bytes(), updated, true))
}
