//! The core probes and plugins, built into the binary: one file is the
//! whole scanner, whatever became of the checkout it was built from.
//!
//! In: the files of probes/ and plugins/ (with plugins/lib/ and the core
//! pack's pack.yaml), embedded at build time. Out: a folder holding exactly
//! those bytes, written out once per build under the user's cache
//! (its `moonscan` folder, or a private folder in the temporary one), named by the hash of its contents and compared byte
//! for byte with the built-in copy each time it is used (a file damaged or
//! changed since is written again), so the loaders read it as they read
//! any folder (the core pack's pack.yaml hashes are verified as for a
//! checkout). A folder is used only when no other user could change it or
//! any folder above it (root never uses another user's home). The cache
//! and temporary folders are [`Places`] settings (the command takes them
//! from `$XDG_CACHE_HOME` or `$HOME`, and the system's temporary folder);
//! its plugin and probe folders, when set, are used instead.

use std::io;
use std::path::{Path, PathBuf};

use rust_embed::RustEmbed;

use crate::places::Places;
use sha2::{Digest, Sha256};

#[derive(RustEmbed)]
#[folder = "plugins/"]
struct Plugins;

#[derive(RustEmbed)]
#[folder = "probes/"]
struct Probes;

/// Which built-in folder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Core {
    Plugins,
    Probes,
}

impl Core {
    fn name(self) -> &'static str {
        match self {
            Core::Plugins => "plugins",
            Core::Probes => "probes",
        }
    }

    /// (path inside the folder, bytes) of every file, in name order.
    fn files(self) -> Vec<(String, std::borrow::Cow<'static, [u8]>)> {
        let mut out: Vec<_> = self.embedded().into_iter().map(|(n, f)| (n, f.data)).collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    fn embedded(self) -> Vec<(String, rust_embed::EmbeddedFile)> {
        match self {
            Core::Plugins => Plugins::iter().filter_map(|n| Plugins::get(&n).map(|f| (n.into_owned(), f))).collect(),
            Core::Probes => Probes::iter().filter_map(|n| Probes::get(&n).map(|f| (n.into_owned(), f))).collect(),
        }
    }

    /// The folder's name under the cache: its kind, moonscan's version and
    /// a hash of its files' names and contents (their sha256, taken at build time).
    fn leaf(self) -> String {
        let mut files = self.embedded();
        files.sort_by(|a, b| a.0.cmp(&b.0));
        let mut h = Sha256::new();
        for (name, f) in &files {
            h.update((name.len() as u64).to_le_bytes());
            h.update(name.as_bytes());
            h.update(f.metadata.sha256_hash());
        }
        let hash = crate::text::hex(&h.finalize()[..8]);
        format!("{}-{}-{hash}", self.name(), env!("CARGO_PKG_VERSION"))
    }
}

/// The folder holding the built-in `core` files, written out under the
/// user's cache, every file compared with the built-in copy (and written
/// again where it differs). Says why for each folder it could not use.
pub fn dir(core: Core, places: &Places) -> io::Result<PathBuf> {
    let leaf = core.leaf();
    let files = core.files();
    let mut why = Vec::new();
    for root in roots(places) {
        match private_dir(&root).and_then(|()| write_out(&root, &leaf, &files)) {
            Ok(d) => return Ok(d),
            Err(e) => why.push(format!("{}: {e}", root.display())),
        }
    }
    Err(io::Error::other(format!("no folder to write moonscan's built-in files in ({})", why.join("; "))))
}

/// Where the files may go, in order of preference: the user's cache, then
/// a folder of this user's in the temporary one.
fn roots(places: &Places) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(cache) = places.cache_home.as_ref().filter(|p| p.is_absolute()) {
        out.push(cache.join("moonscan"));
    }
    let uid = crate::raw::effective_uid();
    out.push(places.temp.join(format!("moonscan-{uid}")));
    out
}

/// `root/leaf` holding exactly `files` (each rewritten when it differs).
fn write_out(root: &Path, leaf: &str, files: &[(String, std::borrow::Cow<'static, [u8]>)]) -> io::Result<PathBuf> {
    private_dir(root)?;
    let dir = root.join(leaf);
    for (name, data) in files {
        let path = dir.join(name);
        if std::fs::read(&path).is_ok_and(|now| now == data.as_ref()) {
            continue;
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        // Written aside, then renamed: a scan reading it never sees half a file.
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let tmp = dir.join(format!(".{}.{}.{nanos}.tmp", name.replace('/', "_"), std::process::id()));
        std::fs::write(&tmp, data)?;
        std::fs::rename(&tmp, &path)?;
    }
    Ok(dir)
}

/// Makes `dir` if needed (0700), and refuses it when another user could
/// change it or any folder above it (own it, or write to it without the
/// sticky bit of /tmp): what a scan loads from it must be what this binary
/// wrote. Root accepts only folders of root's (never a user's home under
/// `sudo -E`).
fn private_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let uid = crate::raw::effective_uid();
    let foreign = |m: &std::fs::Metadata| m.uid() != uid && m.uid() != 0;
    // Every folder above it that exists, before anything is made there.
    for above in dir.ancestors().skip(1) {
        let Ok(meta) = std::fs::symlink_metadata(above) else { continue };
        let sticky = meta.mode() & 0o1000 != 0;
        if foreign(&meta) || (meta.mode() & 0o022 != 0 && !sticky) {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("{} could be changed by another user", above.display()),
            ));
        }
    }
    match std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let meta = std::fs::symlink_metadata(dir)?;
    if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o022 != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "not a folder of this user's that only it can write",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_files_are_written_out_once_and_mended() {
        let root = tempfile::tempdir().unwrap();
        let files = Core::Plugins.files();
        assert!(files.iter().any(|(n, _)| n == "pack.yaml") && files.iter().any(|(n, _)| n == "lib/text.lua"));
        let dir = write_out(root.path(), "plugins-x", &files).unwrap();
        let on_disk = |n: &str| std::fs::read(dir.join(n)).unwrap();
        assert_eq!(on_disk("pack.yaml"), Plugins::get("pack.yaml").unwrap().data.as_ref());
        // A file changed behind moonscan's back is written again.
        std::fs::write(dir.join("banner.lua"), "return 1").unwrap();
        write_out(root.path(), "plugins-x", &files).unwrap();
        assert_eq!(on_disk("banner.lua"), Plugins::get("banner.lua").unwrap().data.as_ref());
        // The core pack loads from it, its hashes verified.
        let plugins = crate::plugins::load_pack_dir(&dir).unwrap();
        assert!(plugins.iter().any(|p| p.meta.id == "ssl-cert"), "{}", plugins.len());
        let probes = write_out(root.path(), "probes-x", &Core::Probes.files()).unwrap();
        assert!(crate::service::ProbeDb::load_dir(&probes).unwrap().get("GetRequest").is_some());
    }

    #[test]
    fn a_folder_under_another_users_folder_or_a_link_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let root = tempfile::tempdir().unwrap();
        // Writable by others above it (not sticky): refused before anything is made.
        let open = root.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = private_dir(&open.join("cache").join("moonscan")).unwrap_err();
        assert!(e.to_string().contains("could be changed by another user"), "{e}");
        assert!(!open.join("cache").exists());
        // A link in its place is not a folder of this user's.
        let real = root.path().join("real");
        std::fs::create_dir(&real).unwrap();
        std::os::unix::fs::symlink(&real, root.path().join("link")).unwrap();
        assert!(private_dir(&root.path().join("link")).is_err());
        assert!(private_dir(&root.path().join("fine")).is_ok());
    }

    #[test]
    fn a_folder_others_can_write_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let root = tempfile::tempdir().unwrap();
        let open = root.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = write_out(&open, "plugins-x", &Core::Plugins.files()).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
    }
}
