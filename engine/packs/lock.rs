//! moonscan.lock: the packs a scan setup uses, pinned by name, version and
//! manifest hash (`moonscan pack lock`), and the check of the installed
//! packs against it.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{io_err, manifest, refuse, sign, InstalledPack};
use crate::error::Result;
use crate::files::write_atomic;

/// moonscan.lock.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Lock {
    pub packs: Vec<Pin>,
}

/// One pinned pack.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Pin {
    pub name: String,
    pub version: String,
    pub manifest_sha256: String,
}

/// Largest lock file read.
pub const MAX_LOCK: usize = 1024 * 1024;

/// Reads a lock file.
pub fn read_lock(lock: &Path) -> Result<Lock> {
    let what = lock.display().to_string();
    let bytes = sign::read_capped(lock, MAX_LOCK).map_err(|e| io_err(lock, e))?;
    let text = manifest::check_shape(&bytes, &what, MAX_LOCK)?;
    let l: Lock = serde_yaml::from_str(text).map_err(|e| refuse(format!("{what}: not a valid lock file: {e}")))?;
    let mut seen = std::collections::BTreeSet::new();
    for p in &l.packs {
        if !seen.insert(p.name.as_str()) {
            return Err(refuse(format!("{what}: pack {} is pinned twice", p.name)));
        }
    }
    Ok(l)
}

/// moonscan.lock: `packs: [ {name, version, manifest_sha256} ]`. Refuses
/// (an error naming every pack concerned) any installed pack that differs
/// from its pin or has none, and pins whose pack is missing.
pub fn check_lock(lock: &Path, packs: &[InstalledPack]) -> Result<()> {
    let l = read_lock(lock)?;
    let what = lock.display();
    let mut problems = Vec::new();
    for pin in &l.packs {
        match packs.iter().find(|p| p.name == pin.name) {
            None => problems.push(format!("pack {} {} is pinned but not installed", pin.name, pin.version)),
            Some(p) if p.version != pin.version => problems
                .push(format!("pack {}: version {} is installed, but {} is pinned", p.name, p.version, pin.version)),
            Some(p) if p.manifest_sha256 != pin.manifest_sha256 => problems.push(format!(
                "pack {} {}: pack.yaml's sha256 is {}, but {} is pinned (the pack changed without a new version)",
                p.name, p.version, p.manifest_sha256, pin.manifest_sha256
            )),
            Some(_) => {}
        }
    }
    for p in packs {
        if !l.packs.iter().any(|pin| pin.name == p.name) {
            problems.push(format!("pack {} {} is installed but not pinned", p.name, p.version));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(refuse(format!("{what} does not match the installed packs: {}", problems.join("; "))))
    }
}

/// Writes moonscan.lock pinning `packs` (sorted by name), atomically.
pub fn write_lock(lock: &Path, packs: &[InstalledPack]) -> Result<()> {
    let mut pins: Vec<Pin> = packs
        .iter()
        .map(|p| Pin { name: p.name.clone(), version: p.version.clone(), manifest_sha256: p.manifest_sha256.clone() })
        .collect();
    pins.sort_by(|a, b| a.name.cmp(&b.name));
    let yaml =
        serde_yaml::to_string(&Lock { packs: pins }).map_err(|e| refuse(format!("cannot write the lock: {e}")))?;
    let text =
        format!("# moonscan.lock: the plugin packs this scan setup uses, pinned (`moonscan pack lock`).\n{yaml}");
    write_atomic(lock, text.as_bytes())
}
