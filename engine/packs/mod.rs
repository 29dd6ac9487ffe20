//! Plugin packs: signed folders (or .tar.gz files) of plugins and probes.
//!
//! A pack holds `pack.yaml` (name, version, the engine versions it works
//! with, and every file it ships pinned by sha256), the files it lists, and
//! `pack.sig`, a minisign (Ed25519) signature over pack.yaml's exact bytes
//! whose trusted comment is `pack:NAME version:VERSION`.
//!
//! [`verify`] checks a pack in this order, and each refusal names the
//! problem and the file:
//!
//! 1. pack.yaml is a regular file of at most 64 KiB, UTF-8, nested at most
//!    [`manifest::MAX_INDENT`] columns / [`manifest::MAX_FLOW`] brackets deep;
//!    then pack.sig (exactly one signature) is checked over those exact bytes
//!    against the trusted keys. No signature, or a key not in the trust store,
//!    is an error unless [`Trust::allow_unsigned`]; a signature by a trusted
//!    key that does not match is always an error.
//! 2. pack.yaml is parsed: no anchors, aliases or tags, unknown fields
//!    denied, every value checked; the signature's trusted comment must name
//!    this name and version.
//! 3. Every listed file: a relative path without `..`, reached through real
//!    folders only (no link anywhere), a regular file, and its sha256 matches.
//! 4. Nothing else is in the pack: any file or folder the manifest does not
//!    list is refused, except `README.md` and a `tests/` folder at the top of
//!    a pack being verified or installed (they are for the pack's authors and
//!    users, are not signed, and are never installed). Links, devices and
//!    FIFOs are refused anywhere.
//! 5. Only then are the plugins compiled and the probe files loaded, from the
//!    very bytes that were hashed (nothing is read twice).
//!
//! The name `core` is reserved for the plugins that ship with moonscan
//! (`plugins/`): [`verify`], [`install`] and [`sign_dir`] refuse a pack that
//! takes it, and an installed pack named `core` is an error.
//!
//! Installed packs live in `DATA/packs/NAME/` (pack.yaml, pack.sig and the
//! listed files only) and trusted keys in `DATA/trusted/KEYID.pub`, where
//! DATA is [`data_dir`].

mod lock;
pub mod manifest;
pub mod sign;
mod sign_dir;
pub mod source;

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, ErrorKind, Result};
use crate::files::{make_dirs, write_atomic};
use crate::places::{DataDir, Places};
use crate::plugins::{self, Plugin};
use crate::service::ProbeDb;
use crate::text::{hex, sha256_hex};

pub use lock::{check_lock, read_lock, write_lock, Lock, Pin, MAX_LOCK};
pub use manifest::{FileEntry, FileKind, Manifest};
pub use sign::TrustedKey;
pub use sign_dir::{sign_dir, SignReport};

/// The one way packs refuse something; `kind` says what class of problem:
/// a signature or key ([`ErrorKind::Signature`]), files that do not match
/// the signed manifest ([`ErrorKind::Integrity`]), or a malformed pack or
/// request ([`ErrorKind::Config`]).
pub(crate) fn refuse_as(kind: ErrorKind, msg: impl Into<String>) -> Error {
    Error::new(kind, msg)
}

fn refuse(msg: impl Into<String>) -> Error {
    refuse_as(ErrorKind::Config, msg)
}

fn io_err(path: &Path, e: io::Error) -> Error {
    Error::with_source(ErrorKind::Io, format!("{}: {e}", path.display()), e)
}

/// moonscan's data folder, as `places` names it ([`Places::data`]; the
/// command's is `$MOONSCAN_HOME`, `$XDG_DATA_HOME/moonscan` or
/// `~/.local/share/moonscan`), or why there is none. Refused when another
/// user could write it or the folders in it (see [`check_private`]): keys,
/// packs and plugin metadata planted there would run. Its folders are made
/// by [`crate::files::make_dirs`] (never group writable).
pub fn data_dir(places: &Places) -> Result<PathBuf> {
    let dir = match &places.data {
        DataDir::At(d) => d.clone(),
        DataDir::Missing(why) => return Err(refuse(why.clone())),
        DataDir::None => return Err(refuse("no data folder is set (Places::data)")),
    };
    check_private(&dir)?;
    Ok(dir)
}

/// Refuses a data folder, or a folder of it that moonscan reads (packs,
/// trusted keys, the metadata cache), that belongs to another user (root
/// aside) or that its group or others may write. Folders not made yet pass.
pub fn check_private(dir: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let me = crate::raw::effective_uid();
    for d in [dir.to_path_buf(), packs_dir(dir), trust_dir(dir), dir.join("cache"), meta_cache_dir(dir)] {
        let m = match fs::metadata(&d) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(io_err(&d, e)),
        };
        let why = if m.uid() != me && m.uid() != 0 {
            format!("belongs to user {}", m.uid())
        } else if m.mode() & 0o022 != 0 {
            format!("can be written by its group or others (mode {:o})", m.mode() & 0o777)
        } else {
            continue;
        };
        return Err(refuse(format!(
            "data folder {}: {} {why}: another user could plant trusted keys, packs or plugin metadata there; \
             use a folder only you can write (chmod go-w, or set `places.data`)",
            dir.display(),
            d.display()
        )));
    }
    Ok(())
}

/// The pack name of the plugins that ship with moonscan (`plugins/`); no
/// other pack may take it.
pub const CORE: &str = "core";

/// Refuses the reserved name [`CORE`].
fn check_not_core(name: &str) -> Result<()> {
    if name == CORE {
        return Err(refuse(format!(
            "pack.yaml: the pack name {CORE:?} is reserved for the plugins that ship with moonscan (plugins/); give the pack another name"
        )));
    }
    Ok(())
}

/// Where installed packs live.
pub fn packs_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("packs")
}

/// Where trusted keys live.
pub fn trust_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("trusted")
}

/// The keys a pack may be signed with, and whether a pack that is not
/// signed by one of them is accepted (as untrusted).
#[derive(Clone, Debug, Default)]
pub struct Trust {
    pub keys: Vec<TrustedKey>,
    pub allow_unsigned: bool,
}

impl Trust {
    /// The trust store of a data folder.
    pub fn load(data_dir: &Path, allow_unsigned: bool) -> Result<Trust> {
        Ok(Trust { keys: sign::load_trust_store(&trust_dir(data_dir))?, allow_unsigned })
    }
}

/// One file a verified pack lists, with the bytes that were hashed.
#[derive(Clone, Debug)]
pub struct PackFile {
    pub path: String,
    pub kind: FileKind,
    pub bytes: Vec<u8>,
}

/// A pack that passed every check.
#[derive(Clone, Debug)]
pub struct VerifiedPack {
    pub manifest: Manifest,
    pub version: semver::Version,
    /// pack.yaml's exact bytes, and their sha256.
    pub manifest_bytes: Vec<u8>,
    pub manifest_sha256: String,
    /// pack.sig's bytes, if the pack is signed.
    pub signature: Option<Vec<u8>>,
    /// The key ID that signed it (trusted or not).
    pub signer: Option<String>,
    /// Signed by a key in the trust store, and the signature checked.
    pub trusted: bool,
    /// The trusted public key (base64) that checked the signature.
    pub signer_key: Option<String>,
    pub files: Vec<PackFile>,
    pub plugins: Vec<Plugin>,
    pub probes: ProbeDb,
    /// Files outside the manifest that were allowed (README.md, tests/); not installed.
    pub extras: Vec<String>,
}

/// How the signature is treated.
enum SigMode<'a> {
    Check(&'a Trust),
    /// While signing: the pack is about to get a new signature.
    Ignore,
}

/// Verifies a pack folder or .tar.gz (see the module documentation); its
/// plugins require from the core library of `core_dir` after their own.
pub fn verify(path: &Path, trust: &Trust, core_dir: &Path) -> Result<VerifiedPack> {
    let label = path.display().to_string();
    let src = source::open(path).map_err(|e| refuse(format!("pack {}", e)))?;
    verify_root(&src.root, SigMode::Check(trust), true, false, None, &plugins::core_library(core_dir)?)
        .map_err(|e| named(&label, e))
}

fn named(label: &str, e: Error) -> Error {
    Error::new(e.kind(), format!("pack {label}: {e}"))
}

/// Reads a file of the pack that must be a regular file reached through real
/// folders only, of at most `max` bytes.
fn read_in_pack(root: &Path, rel: &str, max: u64) -> Result<Vec<u8>> {
    use std::io::Read;
    let parts: Vec<&str> = rel.split('/').collect();
    let mut cur = root.to_path_buf();
    for (i, part) in parts.iter().enumerate() {
        cur.push(part);
        let so_far = parts[..=i].join("/");
        let meta = match fs::symlink_metadata(&cur) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(refuse_as(
                    ErrorKind::Integrity,
                    format!("{rel}: listed in pack.yaml but missing from the pack"),
                ))
            }
            Err(e) => return Err(refuse(format!("{rel}: {e}"))),
        };
        if meta.file_type().is_symlink() {
            return Err(refuse_as(
                ErrorKind::Integrity,
                format!("{so_far}: a symbolic link; packs may not hold links"),
            ));
        }
        let last = i + 1 == parts.len();
        if !last && !meta.is_dir() {
            return Err(refuse(format!("{so_far}: not a folder")));
        }
        if last && !meta.file_type().is_file() {
            return Err(refuse(format!("{rel}: not a regular file")));
        }
        if last && meta.len() > max {
            return Err(refuse(format!("{rel}: {} bytes, larger than the {max}-byte limit", meta.len())));
        }
    }
    let f = source::open_nofollow(&cur).map_err(|e| refuse(format!("{rel}: {e}")))?;
    let mut buf = Vec::new();
    f.take(max + 1).read_to_end(&mut buf).map_err(|e| refuse(format!("{rel}: {e}")))?;
    if buf.len() as u64 > max {
        return Err(refuse(format!("{rel}: larger than the {max}-byte limit")));
    }
    Ok(buf)
}

/// Reads pack.sig if there is one.
fn read_sig(root: &Path) -> Result<Option<Vec<u8>>> {
    match fs::symlink_metadata(root.join("pack.sig")) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        _ => read_in_pack(root, "pack.sig", sign::MAX_SIG as u64).map(Some),
    }
}

fn max_size(kind: FileKind) -> u64 {
    match kind {
        FileKind::Plugin => plugins::MAX_FILE,
        FileKind::Lib => plugins::load::library::MAX_MODULE,
        FileKind::Probes => crate::service::probes::MAX_FILE,
    }
}

/// `core_allowed`: the pack may be named [`CORE`] (only for checking the
/// repository's own `plugins/`); every other caller refuses that name.
/// With `meta_cache`, plugins whose metadata is cached there are not run
/// (see [`plugins::load_source_cached`]).
fn verify_root(
    root: &Path,
    mode: SigMode<'_>,
    extras_allowed: bool,
    core_allowed: bool,
    meta_cache: Option<&Path>,
    core: &Arc<plugins::Library>,
) -> Result<VerifiedPack> {
    // (1) pack.yaml's size and shape, then the signature over its exact bytes.
    let manifest_bytes = read_in_pack(root, "pack.yaml", manifest::MAX_MANIFEST as u64)?;
    manifest::check_shape(&manifest_bytes, "pack.yaml", manifest::MAX_MANIFEST)?;
    let sig_bytes = read_sig(root)?;
    let SigCheck { signer, signer_key, checked } = check_signature(mode, sig_bytes.as_deref(), &manifest_bytes)?;
    // (2) The manifest.
    let m = manifest::parse(&manifest_bytes, "pack.yaml", true)?;
    if !core_allowed {
        check_not_core(&m.name)?;
    }
    if let Some(sig) = &checked {
        if sig.trusted_comment != m.trusted_comment() {
            return Err(refuse_as(
                ErrorKind::Signature,
                format!(
                    "pack.sig: the trusted comment is {:?}, but this manifest needs {:?}",
                    sig.trusted_comment,
                    m.trusted_comment()
                ),
            ));
        }
    }
    // (3) Every listed file, hashed.
    let files = hashed_files(root, &m)?;
    // (4) Nothing unlisted.
    let extras = unlisted_extras(root, &m, extras_allowed)?;
    // (5) The library, then the plugins (which may require its modules and
    // the core library's), and the probes, from the hashed bytes.
    let (compiled, probes) = compile(&m.name, &files, meta_cache, core)?;
    Ok(VerifiedPack {
        version: m.semver(),
        manifest_sha256: sha256_hex(&manifest_bytes),
        manifest: m,
        manifest_bytes,
        signature: sig_bytes,
        trusted: checked.is_some(),
        signer,
        signer_key,
        files,
        plugins: compiled,
        probes,
        extras,
    })
}

/// What a pack's signature said: who signed it (the key ID, and the key
/// when it is trusted), and the signature when it checked out.
struct SigCheck {
    signer: Option<String>,
    signer_key: Option<String>,
    checked: Option<sign::Signature>,
}

/// (1) The signature `sig_bytes` over the manifest's exact bytes, against
/// the trust store (unsigned or unknown keys only with `allow_unsigned`).
fn check_signature(mode: SigMode<'_>, sig_bytes: Option<&[u8]>, manifest_bytes: &[u8]) -> Result<SigCheck> {
    let mut signer = None;
    let mut signer_key = None;
    let mut checked = None;
    if let SigMode::Check(trust) = mode {
        match sig_bytes {
            None if trust.allow_unsigned => {}
            None => {
                return Err(refuse_as(
                    ErrorKind::Signature,
                    "not signed (no pack.sig); sign it with `moonscan pack sign`, or pass `Trust::allow_unsigned` to accept it untrusted",
                ))
            }
            Some(bytes) => {
                let sig = sign::parse_signature(bytes)?;
                signer = Some(sig.key_id.clone());
                // The ID only picks the candidates; the public key decides.
                let candidates: Vec<&TrustedKey> = trust.keys.iter().filter(|k| k.id == sig.key_id).collect();
                match candidates.first() {
                    Some(_) => {
                        let by = candidates.iter().find(|k| sig.verify(&k.key, manifest_bytes).is_ok());
                        match by {
                            Some(k) => signer_key = Some(k.key.to_base64()),
                            None => sig.verify(&candidates[0].key, manifest_bytes)?,
                        }
                        checked = Some(sig);
                    }
                    None if trust.allow_unsigned => {}
                    None => {
                        return Err(refuse_as(ErrorKind::Signature, format!(
                            "pack.sig: signed by key {}, which is not in the trust store (if you trust it: `moonscan pack trust add KEYFILE`), or pass `Trust::allow_unsigned` to accept it untrusted",
                            sig.key_id
                        )))
                    }
                }
            }
        }
    }
    Ok(SigCheck { signer, signer_key, checked })
}

/// (3) Every file the manifest lists, read and checked against its hash.
fn hashed_files(root: &Path, m: &manifest::Manifest) -> Result<Vec<PackFile>> {
    let mut files = Vec::new();
    for (e, kind) in m.entries() {
        let bytes = read_in_pack(root, &e.file, max_size(kind))?;
        let h = sha256_hex(&bytes);
        if h != e.sha256 {
            return Err(refuse_as(ErrorKind::Integrity, format!(
                "{}: sha256 mismatch: pack.yaml says {}, the file hashes to {h}; the file changed after the manifest was made (or the manifest is wrong)",
                e.file, e.sha256
            )));
        }
        files.push(PackFile { path: e.file.clone(), kind, bytes });
    }
    Ok(files)
}

/// (4) Nothing unlisted: the files and folders the manifest does not list
/// are refused, but for README.md and tests/ when `extras_allowed` (those
/// are returned).
fn unlisted_extras(root: &Path, m: &manifest::Manifest, extras_allowed: bool) -> Result<Vec<String>> {
    let listed: std::collections::BTreeSet<&str> = m.entries().map(|(e, _)| e.file.as_str()).collect();
    let listed_dirs: std::collections::BTreeSet<String> = listed
        .iter()
        .flat_map(|f| {
            let parts: Vec<&str> = f.split('/').collect();
            (1..parts.len()).map(move |i| parts[..i].join("/"))
        })
        .collect();
    let extra_ok = |rel: &str| extras_allowed && (rel == "README.md" || rel == "tests" || rel.starts_with("tests/"));
    let mut extras = Vec::new();
    for f in source::walk(root)? {
        let rel = f.rel.as_str();
        if f.is_dir {
            if !listed_dirs.contains(rel) && !extra_ok(rel) {
                return Err(refuse_as(
                    ErrorKind::Integrity,
                    format!("{rel}/: a folder pack.yaml does not list any file in; remove it"),
                ));
            }
        } else if rel == "pack.yaml" || rel == "pack.sig" || listed.contains(rel) {
        } else if extra_ok(rel) {
            extras.push(rel.to_string());
        } else {
            return Err(refuse_as(
                ErrorKind::Integrity,
                format!("{rel}: a file pack.yaml does not list; list it in pack.yaml (and sign again) or remove it"),
            ));
        }
    }
    Ok(extras)
}

/// (5) The pack's library, then its plugins (which may require its
/// modules and the `core` library's), and its probes, from the hashed bytes.
fn compile(
    name: &str,
    files: &[PackFile],
    meta_cache: Option<&Path>,
    core: &Arc<plugins::Library>,
) -> Result<(Vec<Plugin>, ProbeDb)> {
    let mut lib = plugins::Library::new(name);
    for f in files.iter().filter(|f| f.kind == FileKind::Lib) {
        lib.add(&f.path, &f.path, &f.bytes)?;
    }
    // The core library (`core`): what `require` finds after the pack's own.
    let libs = plugins::Libraries(vec![Arc::new(lib)]).then(core);
    libs.check_modules()?;
    let mut compiled: Vec<Plugin> = Vec::new();
    let mut probes = ProbeDb::default();
    for f in files {
        match f.kind {
            FileKind::Plugin => {
                let p = plugins::load_source_in(&f.bytes, Path::new(&f.path), meta_cache, &libs)?;
                plugins::add_unique(&mut compiled, p)?
            }
            FileKind::Lib => {}
            FileKind::Probes => {
                let text = std::str::from_utf8(&f.bytes).map_err(|_| refuse(format!("{}: not UTF-8 text", f.path)))?;
                probes.add_str(text, Path::new(&f.path))?;
            }
        }
    }
    Ok((compiled, probes))
}

/// What [`install`] did.
#[derive(Debug)]
pub struct InstallReport {
    pub dir: PathBuf,
    /// The version it replaced, if one was installed.
    pub replaced: Option<String>,
}

fn random_hex() -> String {
    let mut b = [0u8; 8];
    if getrandom::fill(&mut b).is_err() {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        b = (t as u64 ^ u64::from(std::process::id())).to_le_bytes();
    }
    hex(&b)
}

/// The version of the pack installed in `dir`, if its pack.yaml can be read.
fn installed_version(dir: &Path) -> Option<semver::Version> {
    let bytes = read_in_pack(dir, "pack.yaml", manifest::MAX_MANIFEST as u64).ok()?;
    manifest::parse(&bytes, "pack.yaml", false).ok().map(|m| m.semver())
}

/// Installs a verified pack into `DATA/packs/NAME/`, all or nothing: the
/// files are written to a staging folder beside it, which is then renamed
/// into place. Installing a lower version than the installed one needs
/// `allow_downgrade`; the installed version again with other content (its
/// pack.yaml differs: a lock pinning it would no longer match) needs
/// `force`. Only pack.yaml, pack.sig and the listed files are installed.
pub fn install(data_dir: &Path, pack: &VerifiedPack, allow_downgrade: bool, force: bool) -> Result<InstallReport> {
    let name = &pack.manifest.name;
    check_not_core(name).map_err(|e| Error::new(e.kind(), format!("pack {name}: {e}")))?;
    let packs = packs_dir(data_dir);
    let dest = packs.join(name);
    let previous = match fs::symlink_metadata(&dest) {
        Ok(m) if m.is_dir() => Some(installed_version(&dest)),
        Ok(_) => return Err(refuse(format!("{}: exists and is not a folder; remove it first", dest.display()))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(io_err(&dest, e)),
    };
    if let Some(Some(prev)) = &previous {
        if pack.version == *prev && !force {
            let installed =
                read_in_pack(&dest, "pack.yaml", manifest::MAX_MANIFEST as u64).ok().map(|b| sha256_hex(&b));
            if let Some(old) = installed.filter(|old| *old != pack.manifest_sha256) {
                return Err(refuse(format!(
                    "pack {name} {prev} is installed with other content (pack.yaml sha256 {old}, this one's {}): give the changed pack a new version, or pass `install(force)` to replace it",
                    pack.manifest_sha256
                )));
            }
        }
        if pack.version < *prev && !allow_downgrade {
            return Err(refuse(format!(
                "pack {name}: {} is older than the installed {prev}; refusing to downgrade (pass `install(allow_downgrade)` to install it anyway)",
                pack.version
            )));
        }
    }
    make_dirs(&packs).map_err(|e| io_err(&packs, e))?;
    let staging = tempfile::Builder::new()
        .prefix(&format!(".staging-{name}-"))
        .tempdir_in(&packs)
        .map_err(|e| io_err(&packs, e))?;
    let write = |rel: &str, bytes: &[u8]| -> Result<()> {
        let path = staging.path().join(rel);
        if let Some(parent) = Path::new(rel).parent().filter(|p| !p.as_os_str().is_empty()) {
            fs::create_dir_all(staging.path().join(parent)).map_err(|e| io_err(&path, e))?;
        }
        let mut f = source::create_new(&path).map_err(|e| io_err(&path, e))?;
        f.write_all(bytes).and_then(|_| f.sync_all()).map_err(|e| io_err(&path, e))
    };
    write("pack.yaml", &pack.manifest_bytes)?;
    if let Some(sig) = &pack.signature {
        write("pack.sig", sig)?;
    }
    for f in &pack.files {
        write(&f.path, &f.bytes)?;
    }
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(staging.path(), fs::Permissions::from_mode(0o755))
            .map_err(|e| io_err(staging.path(), e))?;
    }
    let staged = staging.keep();
    let cleanup = |e: Error| {
        let _ = fs::remove_dir_all(&staged);
        e
    };
    if previous.is_some() {
        let old = packs.join(format!(".old-{name}-{}", random_hex()));
        fs::rename(&dest, &old).map_err(|e| cleanup(io_err(&dest, e)))?;
        if let Err(e) = fs::rename(&staged, &dest) {
            let _ = fs::rename(&old, &dest);
            return Err(cleanup(io_err(&dest, e)));
        }
        let _ = fs::remove_dir_all(&old);
    } else {
        fs::rename(&staged, &dest).map_err(|e| cleanup(io_err(&dest, e)))?;
    }
    if let Ok(d) = fs::File::open(&packs) {
        let _ = d.sync_all();
    }
    // The checks ran each plugin once; later scans read what they found.
    let cache = meta_cache_dir(data_dir);
    for (f, p) in pack.files.iter().filter(|f| f.kind == FileKind::Plugin).zip(&pack.plugins) {
        let _ = plugins::store_meta(&cache, &f.bytes, p);
    }
    Ok(InstallReport {
        dir: dest,
        replaced: previous.map(|p| p.map_or_else(|| "an unreadable pack".into(), |v| v.to_string())),
    })
}

/// Removes an installed pack.
pub fn remove(data_dir: &Path, name: &str) -> Result<()> {
    if !manifest::valid_name(name) {
        return Err(refuse(format!("{name:?} is not a pack name")));
    }
    let packs = packs_dir(data_dir);
    let dir = packs.join(name);
    match fs::symlink_metadata(&dir) {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(refuse(format!("no pack named {name} is installed (in {})", packs.display())))
        }
        Err(e) => return Err(io_err(&dir, e)),
    }
    let trash = packs.join(format!(".removed-{name}-{}", random_hex()));
    fs::rename(&dir, &trash).map_err(|e| io_err(&dir, e))?;
    fs::remove_dir_all(&trash).map_err(|e| io_err(&trash, e))
}

/// An installed pack, re-verified.
///
/// `plugins` and `probes` hold what was verified: use them, never the files
/// again (they could have changed since they were hashed). `plugin_files`
/// and `probe_files` are for display.
#[derive(Clone, Debug)]
pub struct InstalledPack {
    pub name: String,
    pub version: String,
    pub dir: PathBuf,
    pub manifest_sha256: String,
    /// Signed by a key in the trust store (and the signature checked).
    pub trusted: bool,
    pub plugin_files: Vec<PathBuf>,
    pub probe_files: Vec<PathBuf>,
    /// The plugins, compiled from the very bytes that were hashed, in
    /// pack.yaml's order; `path` is the installed file's, `pack` is None and
    /// `trusted` true, as [`plugins::load_source`] makes them (the caller
    /// applies [`Plugin::in_pack`]).
    pub plugins: Vec<Plugin>,
    /// Each probe file's installed path and its text, as hashed (for
    /// [`ProbeDb::add_str`]), in pack.yaml's order.
    pub probes: Vec<(PathBuf, String)>,
    /// The key ID in pack.sig, trusted or not.
    pub signer: Option<String>,
    /// The trusted public key (base64) that verified pack.sig: what
    /// identifies the signer, since anyone can make a key with any ID.
    pub signer_key: Option<String>,
}

/// Every folder of `DATA/packs/`, each re-verified: the signature checked if
/// it is by a trusted key, every hash, nothing unlisted, plugins compiled.
/// Folders starting with `.` (staging) are skipped. Their plugins require
/// from the core library of the plugin folder `core_dir` after their own.
pub fn scan_installed(data_dir: &Path, core_dir: &Path) -> Result<Vec<(String, Result<InstalledPack>)>> {
    scan_installed_with(data_dir, &plugins::core_library(core_dir)?)
}

/// [`scan_installed`], the packs' plugins requiring from `core` after their own library.
fn scan_installed_with(data_dir: &Path, core: &Arc<plugins::Library>) -> Result<Vec<(String, Result<InstalledPack>)>> {
    let packs = packs_dir(data_dir);
    let rd = match fs::read_dir(&packs) {
        Ok(rd) => rd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_err(&packs, e)),
    };
    let trust = Trust::load(data_dir, true)?;
    let mut names = Vec::new();
    for e in rd {
        let name = e.map_err(|e| io_err(&packs, e))?.file_name().to_string_lossy().into_owned();
        if !name.starts_with('.') {
            names.push(name);
        }
    }
    names.sort();
    Ok(names
        .into_iter()
        .map(|name| {
            let r = load_installed(&packs.join(&name), &name, &trust, &meta_cache_dir(data_dir), core).map_err(|e| {
                Error::new(e.kind(), format!("installed pack {name} ({}): {e}", packs.join(&name).display()))
            });
            (name, r)
        })
        .collect())
}

/// Where the metadata of installed plugins is kept (by the sha256 of their
/// source), so a scan runs no plugin it does not select.
pub fn meta_cache_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("cache").join("plugin-meta")
}

fn load_installed(
    dir: &Path,
    name: &str,
    trust: &Trust,
    meta_cache: &Path,
    core: &Arc<plugins::Library>,
) -> Result<InstalledPack> {
    let meta = fs::symlink_metadata(dir).map_err(|e| refuse(e.to_string()))?;
    if !meta.is_dir() {
        return Err(refuse("not a folder (a link or a file)"));
    }
    let v = verify_root(dir, SigMode::Check(trust), false, false, Some(meta_cache), core)?;
    if v.manifest.name != name {
        return Err(refuse(format!("pack.yaml names the pack {}, not {name}", v.manifest.name)));
    }
    let files = |k: FileKind| v.files.iter().filter(|f| f.kind == k).map(|f| dir.join(&f.path)).collect();
    let plugin_files = files(FileKind::Plugin);
    let probe_files = files(FileKind::Probes);
    // Compiled in step 5 from the hashed bytes, named by their relative path.
    let plugins = v
        .plugins
        .into_iter()
        .map(|mut p| {
            p.path = dir.join(&p.path);
            p
        })
        .collect();
    let mut probes = Vec::new();
    for f in v.files.into_iter().filter(|f| f.kind == FileKind::Probes) {
        // Step 5 loaded it as UTF-8 text already.
        let text = String::from_utf8(f.bytes).map_err(|_| refuse(format!("{}: not UTF-8 text", f.path)))?;
        probes.push((dir.join(&f.path), text));
    }
    Ok(InstalledPack {
        name: v.manifest.name,
        version: v.manifest.version,
        dir: dir.to_path_buf(),
        manifest_sha256: v.manifest_sha256,
        trusted: v.trusted,
        plugin_files,
        probe_files,
        plugins,
        probes,
        signer: v.signer,
        signer_key: v.signer_key,
    })
}

/// Every installed pack, each re-verified (signature if signed by a trusted
/// key, hashes) on load; a pack that fails is an error naming it. Their
/// plugins require from the core library of `core_dir` after their own.
pub fn installed(data_dir: &Path, core_dir: &Path) -> Result<Vec<InstalledPack>> {
    scan_installed(data_dir, core_dir)?.into_iter().map(|(_, r)| r).collect()
}

/// The installed packs, each re-verified, checked against a lock file
/// (`lock`, or ./moonscan.lock when there is one); their plugins require
/// from the core library of the plugin folder `core_dir` after their own.
/// Any problem is an error (`pack lock`, `plugins list`). The data folder
/// is the one `places` names.
pub fn installed_checked(lock: Option<&Path>, core_dir: &Path, places: &Places) -> Result<Vec<InstalledPack>> {
    let core = plugins::core_library(core_dir)?;
    let packs: Vec<InstalledPack> =
        scan_installed_with(&data_dir(places)?, &core)?.into_iter().map(|(_, r)| r).collect::<Result<_>>()?;
    if let Some(l) = lock_file(lock) {
        check_lock(&l, &packs)?;
    }
    Ok(packs)
}

/// The lock file a scan checks: `lock`, or ./moonscan.lock when there is one.
fn lock_file(lock: Option<&Path>) -> Option<PathBuf> {
    let default_lock = PathBuf::from("moonscan.lock");
    match lock {
        Some(l) => Some(l.to_path_buf()),
        None if default_lock.is_file() => Some(default_lock),
        None => None,
    }
}

/// What a scan may use of the installed packs.
#[derive(Debug, Default)]
pub struct Usable {
    /// Packs that verified and match the lock (if any).
    pub packs: Vec<InstalledPack>,
    /// Packs left out, by name, and why: a scan that selects one of their
    /// plugins is refused with that reason; others go on without them.
    pub left_out: Vec<(String, String)>,
    /// What the user should know (one line each).
    pub notes: Vec<String>,
}

/// The installed packs a scan may use: as [`installed_checked`], but a
/// lock or a pack only matters for what the scan selects. A pack that does
/// not verify, or differs from its pin, or is not pinned, is left out
/// (with why); a pin whose pack is not installed, or a packs folder that
/// cannot be read, is a note. A lock file that cannot be read is an error.
/// With no data folder set ([`DataDir::None`]) no pack is installed.
pub fn installed_usable(lock: Option<&Path>, core_dir: &Path, places: &Places) -> Result<Usable> {
    let core = plugins::core_library(core_dir)?;
    let data = match places.data {
        DataDir::None => None,
        _ => Some(data_dir(places)?),
    };
    let mut out = Usable::default();
    let loaded = match data.as_ref().map(|d| scan_installed_with(d, &core)) {
        None => Vec::new(),
        Some(Ok(l)) => l,
        Some(Err(e))
            if e.kind() == ErrorKind::Io && data.as_ref().is_some_and(|d| fs::read_dir(packs_dir(d)).is_err()) =>
        {
            out.notes.push(format!("installed packs are not used: {e}"));
            Vec::new()
        }
        Some(Err(e)) => return Err(e),
    };
    for (name, r) in loaded {
        match r {
            Ok(p) => out.packs.push(p),
            Err(e) => out.left_out.push((name, e.to_string())),
        }
    }
    let Some(l) = lock_file(lock) else { return Ok(out) };
    let pins = read_lock(&l)?;
    let what = l.display();
    for pin in &pins.packs {
        if !out.packs.iter().any(|p| p.name == pin.name) && !out.left_out.iter().any(|p| p.0 == pin.name) {
            out.notes.push(format!("{what}: pack {} {} is pinned but not installed", pin.name, pin.version));
        }
    }
    let (kept, mismatched): (Vec<InstalledPack>, Vec<InstalledPack>) =
        std::mem::take(&mut out.packs).into_iter().partition(|p| {
            pins.packs
                .iter()
                .any(|pin| pin.name == p.name && pin.version == p.version && pin.manifest_sha256 == p.manifest_sha256)
        });
    out.packs = kept;
    for p in mismatched {
        let why = match pins.packs.iter().find(|pin| pin.name == p.name) {
            None => format!("{what} does not pin it ({} is installed)", p.version),
            Some(pin) if pin.version != p.version => {
                format!("version {} is installed, but {what} pins {}", p.version, pin.version)
            }
            Some(pin) => format!(
                "pack.yaml's sha256 is {}, but {what} pins {} (the pack changed without a new version)",
                p.manifest_sha256, pin.manifest_sha256
            ),
        };
        out.left_out.push((p.name, why));
    }
    for (name, why) in &out.left_out {
        out.notes.push(format!("pack {name} is left out: {why}"));
    }
    Ok(out)
}

/// Adds a public key (a minisign .pub file's text, or its base64 line) to
/// the trust store; returns it.
///
/// Key IDs are chosen by whoever makes the key, so an ID proves nothing: a
/// key whose ID is already trusted with a different public key is refused
/// (it would replace that key, and its packs would pass as the first key's).
pub fn trust_add(data_dir: &Path, key_text: &str) -> Result<TrustedKey> {
    let key = TrustedKey::new(sign::parse_public_key(key_text)?);
    if let Some(old) = sign::load_trust_store(&trust_dir(data_dir))?.into_iter().find(|k| k.id == key.id) {
        if old.key.to_base64() == key.key.to_base64() {
            return Ok(old);
        }
        return Err(refuse_as(ErrorKind::Signature, format!(
            "key ID {} is already trusted with another public key ({}); a second key claiming the same ID is refused. If you mean to replace it: `moonscan pack trust remove {}` first",
            key.id,
            old.key.to_base64(),
            key.id
        )));
    }
    let dir = trust_dir(data_dir);
    make_dirs(&dir).map_err(|e| io_err(&dir, e))?;
    let path = dir.join(format!("{}.pub", key.id));
    write_atomic(&path, key.to_file_text().as_bytes())?;
    Ok(TrustedKey { file: path, ..key })
}

/// Removes a key from the trust store: named by its public key (a minisign
/// .pub file's text or its base64 line), or by its 16-hex-digit ID, which
/// names one key only because [`trust_add`] never trusts two with one ID.
pub fn trust_remove(data_dir: &Path, key: &str) -> Result<()> {
    let keys = sign::load_trust_store(&trust_dir(data_dir))?;
    let id = key.trim().to_ascii_uppercase();
    let found = if id.len() == 16 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
        keys.into_iter().find(|k| k.id == id)
    } else {
        let pk = sign::parse_public_key(key).map_err(|_| {
            refuse(format!(
                "{:?} is neither a public key nor a key ID (16 hex digits, as `moonscan pack trust list` shows)",
                crate::output::screen(key.trim())
            ))
        })?;
        keys.into_iter().find(|k| k.key.to_base64() == pk.to_base64())
    };
    let Some(k) = found else {
        return Err(refuse(format!("key {} is not in the trust store", crate::output::screen(key.trim()))));
    };
    fs::remove_file(&k.file).map_err(|e| io_err(&k.file, e))
}

#[cfg(test)]
mod tests;
