//! Loading and selection: plugin files read, checked and compiled into
//! [`Plugin`]s, the libraries their `require` searches, and the `--script`
//! expression that picks which of them run. Everything here is decided
//! before a scan's first plugin run; what happens during a run is
//! [`crate::plugins::sandbox`]'s.
//!
//! In: plugin files (plugins/*.lua, a pack folder, or paths named by
//! `--script`) and the selection expression. Out: checked plugins, the
//! selected ones. What always holds: a plugin is text compiled by the host
//! (never bytecode from a file), checked once when loaded (a missing or
//! mistyped field refuses the file, naming the field); its metadata comes
//! from one checked run in the sandbox (`sandbox::host::inspect`)
//! or from a cache entry keyed by the sha256 of its source.

mod code;
pub mod library;
pub mod meta;
pub mod plugin;
pub mod script_args;
pub mod select;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, ErrorKind, Result};
use crate::places::Places;

use code::Code;
pub use library::{Libraries, Library};
pub use plugin::Plugin;
pub use select::Selection;

/// The plugin folder (the pack core): the one `places` names, or the
/// plugins built into moonscan ([`crate::core_files`]).
pub fn default_dir(places: &Places) -> PathBuf {
    if let Some(d) = &places.plugins {
        return d.clone();
    }
    crate::core_files::dir(crate::core_files::Core::Plugins, places)
        .unwrap_or_else(|e| PathBuf::from(format!("(moonscan's built-in plugins, not written out: {e})")))
}

/// Largest plugin file read.
pub const MAX_FILE: u64 = 256 * 1024;

fn bad(path: &Path, what: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::Config, format!("{}: {what}", path.display()))
}

/// Reads, compiles and checks one plugin file (it may require modules of `libs`).
pub fn load_file(path: &Path, libs: &Libraries) -> Result<Plugin> {
    let bytes = crate::files::read_capped(path, MAX_FILE, "plugin")?;
    load_source_in(&bytes, path, None, libs)
}

/// Compiles and checks plugin source (`path` names it in errors), which
/// requires no module.
pub fn load_source(bytes: &[u8], path: &Path) -> Result<Plugin> {
    load_source_cached(bytes, path, None)
}

/// Largest metadata file read from a cache.
const MAX_META: u64 = 256 * 1024;

/// The cache file of some source: its sha256 and this engine's version
/// (another version may check plugin tables differently).
fn meta_path(cache: &Path, bytes: &[u8], libs: &Libraries) -> PathBuf {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    h.update(bytes);
    // The modules its top level may read: metadata made with others is stale.
    if !libs.0.iter().all(|l| l.is_empty()) {
        h.update(libs.fingerprint());
    }
    let hash = crate::text::hex(&h.finalize());
    cache.join(format!("{hash}-{}.json", env!("CARGO_PKG_VERSION")))
}

/// Records a checked plugin's metadata in `cache`, keyed by the sha256 of
/// its source, so that later loads of the same bytes need not run it.
pub fn store_meta(cache: &Path, bytes: &[u8], p: &Plugin) -> Result<()> {
    let json = serde_json::to_vec(&p.meta).map_err(|e| bad(cache, e))?;
    if json.len() as u64 > MAX_META {
        return Err(bad(&p.path, format!("its metadata is larger than {MAX_META} bytes")));
    }
    crate::files::make_dirs(cache).map_err(|e| bad(cache, e))?;
    crate::files::write_atomic(&meta_path(cache, bytes, &p.libs), &json)
}

/// As [`load_source`]; with a `cache` (see [`store_meta`]) the metadata of
/// source seen before is read from there and the plugin's code does not run
/// (a scan runs only the plugins it selects), and that of new source is
/// stored there after its one checked run.
pub fn load_source_cached(bytes: &[u8], path: &Path, cache: Option<&Path>) -> Result<Plugin> {
    load_source_in(bytes, path, cache, &Libraries::default())
}

/// As [`load_source_cached`], for a plugin that may require modules of
/// `libs` (checked now: each literal name must be there, without cycles).
pub fn load_source_in(bytes: &[u8], path: &Path, cache: Option<&Path>, libs: &Libraries) -> Result<Plugin> {
    // Text only: Lua and Luau bytecode start with a control byte, and no
    // file's bytes are ever handed to the VM as a binary chunk.
    if bytes.first().is_some_and(|&b| b < 0x09 || b == 0x1b) || std::str::from_utf8(bytes).is_err() {
        return Err(bad(path, "not a text file (precompiled chunks are refused)"));
    }
    let code = Code::new(bytes);
    let cached = cache.and_then(|c| {
        let text = crate::files::read_capped(&meta_path(c, bytes, libs), MAX_META, "plugin metadata").ok()?;
        // A cache entry is trusted no further than the checks it passed.
        serde_json::from_slice::<meta::Meta>(&text).ok().filter(meta::Meta::plausible)
    });
    let fresh = cached.is_none();
    let meta = match cached {
        // Cached under the source's and the libraries' hashes: the same
        // requires were checked when it was made.
        Some(m) => m,
        None => {
            libs.check(bytes, &path.display().to_string())?;
            crate::plugins::sandbox::host::inspect(code.bytecode().map_err(|e| bad(path, e))?, path, libs)
                .map_err(|e| bad(path, e))?
        }
    };
    let plugin = Plugin::new(meta, path.to_path_buf(), libs.clone(), code);
    if let (true, Some(c)) = (fresh, cache) {
        // A cache that cannot be written only costs the next load a run.
        let _ = store_meta(c, bytes, &plugin);
    }
    Ok(plugin)
}

/// Loads every `*.lua` file of a folder (not its subfolders), in name order.
pub fn load_dir(dir: &Path, libs: &Libraries) -> Result<Vec<Plugin>> {
    load_dir_cached(dir, None, libs)
}

fn load_dir_cached(dir: &Path, cache: Option<&Path>, libs: &Libraries) -> Result<Vec<Plugin>> {
    let mut out: Vec<Plugin> = Vec::new();
    for f in lua_files(dir)? {
        let bytes = crate::files::read_capped(&f, MAX_FILE, "plugin")?;
        add_unique(&mut out, load_source_in(&bytes, &f, cache, libs)?)?;
    }
    Ok(out)
}

/// The `*.lua` files of a folder (not its subfolders), in name order.
fn lua_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let entries = std::fs::read_dir(dir).map_err(|e| bad(dir, e))?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "lua") && p.is_file())
        .collect();
    files.sort();
    Ok(files)
}

/// The plugins of a plugin folder. A folder with a pack.yaml (plugins/ is
/// the pack `core`) is that pack: every plugin file must be listed there
/// with its sha256, and match it. A folder without one gives plugins of no
/// pack.
pub fn load_pack_dir(dir: &Path) -> Result<Vec<Plugin>> {
    load_pack_dir_cached(dir, None)
}

/// [`load_pack_dir`], with metadata cached in `cache` as for installed
/// packs (see [`load_source_cached`]): each file is read, checked and
/// compiled once, and run only if its source is new.
pub fn load_pack_dir_cached(dir: &Path, cache: Option<&Path>) -> Result<Vec<Plugin>> {
    let manifest_path = dir.join("pack.yaml");
    if !manifest_path.exists() {
        return load_dir_cached(dir, cache, &Libraries::default());
    }
    let m = FolderManifest::read(dir)?;
    let libs = Libraries(vec![m.library(dir)?]);
    libs.check_modules()?;
    let mut out = Vec::new();
    for path in lua_files(dir)? {
        let bytes = m.checked(dir, &path, MAX_FILE, "plugin")?;
        // Compiled from the bytes just checked.
        add_unique(&mut out, load_source_in(&bytes, &path, cache, &libs)?.in_pack(&m.name, true))?;
    }
    Ok(out)
}

/// The core library of a plugin folder: the `lib/*.lua` its pack.yaml
/// lists under `lib:` (empty without a pack.yaml or a `lib:`).
pub fn core_library(dir: &Path) -> Result<Arc<Library>> {
    if !dir.join("pack.yaml").exists() {
        return Ok(Arc::new(Library::new("core")));
    }
    let lib = FolderManifest::read(dir)?.library(dir)?;
    Libraries(vec![lib.clone()]).check_modules()?;
    Ok(lib)
}

/// What `require` finds for a plugin file on its own (`moonscan plugins
/// test FILE`): the library of the pack folder it stands in, if that
/// folder has a pack.yaml, then the core library of `core_dir`.
pub fn libraries_for(file: &Path, core_dir: &Path) -> Result<Libraries> {
    let core = core_library(core_dir)?;
    match file.parent().filter(|d| d.join("pack.yaml").exists()) {
        Some(dir) if dir.canonicalize().ok() != core_dir.canonicalize().ok() => {
            let own = FolderManifest::read(dir)?.library(dir)?;
            let libs = Libraries(vec![own]).then(&core);
            libs.check_modules()?;
            Ok(libs)
        }
        _ => Ok(Libraries(vec![core])),
    }
}

/// What a plugin folder's pack.yaml says of its files (the core pack: read
/// here without the checks of an installed pack, which has a signature).
struct FolderManifest {
    name: String,
    plugins: Vec<FolderEntry>,
    lib: Vec<FolderEntry>,
    path: PathBuf,
}

#[derive(serde::Deserialize)]
struct FolderEntry {
    file: String,
    sha256: String,
}

impl FolderManifest {
    fn read(dir: &Path) -> Result<FolderManifest> {
        #[derive(serde::Deserialize)]
        struct Raw {
            name: String,
            #[serde(default)]
            plugins: Vec<FolderEntry>,
            #[serde(default)]
            lib: Vec<FolderEntry>,
        }
        let path = dir.join("pack.yaml");
        let text = crate::files::read_text_capped(&path, 64 * 1024, "pack manifest")?;
        let m: Raw = serde_yaml::from_str(&text).map_err(|e| bad(&path, e))?;
        Ok(FolderManifest { name: m.name, plugins: m.plugins, lib: m.lib, path })
    }

    /// The bytes of `file` (of the folder `dir`), read once and checked
    /// against the sha256 pack.yaml lists for it.
    fn checked(&self, dir: &Path, file: &Path, max: u64, what: &str) -> Result<Vec<u8>> {
        let rel = file.strip_prefix(dir).unwrap_or(file).to_string_lossy().replace('\\', "/");
        let list = if rel.starts_with("lib/") { &self.lib } else { &self.plugins };
        let Some(entry) = list.iter().find(|e| e.file == rel) else {
            return Err(bad(file, format!("is not listed in {} (pack {})", self.path.display(), self.name)));
        };
        let bytes = crate::files::read_capped(file, max, what)?;
        let hash = crate::text::sha256_hex(&bytes);
        if !hash.eq_ignore_ascii_case(entry.sha256.trim()) {
            return Err(bad(file, format!("does not match its sha256 in {}", self.path.display())));
        }
        Ok(bytes)
    }

    /// The `lib/*.lua` modules, each listed and checked; a module file the
    /// manifest does not list is refused, as a plugin file is. What they
    /// require is checked by the caller, with the libraries searched after.
    fn library(&self, dir: &Path) -> Result<Arc<Library>> {
        let mut lib = Library::new(&self.name);
        let lib_dir = dir.join("lib");
        let files = if lib_dir.is_dir() { lua_files(&lib_dir)? } else { Vec::new() };
        for e in &self.lib {
            if !files.iter().any(|f| f.strip_prefix(dir).is_ok_and(|r| r.to_string_lossy() == e.file.as_str())) {
                return Err(bad(&dir.join(&e.file), format!("is listed in {} but missing", self.path.display())));
            }
        }
        for f in files {
            let bytes = self.checked(dir, &f, library::MAX_MODULE, "library module")?;
            let rel = f.strip_prefix(dir).unwrap_or(&f).to_string_lossy().replace('\\', "/");
            lib.add(&rel, &f.display().to_string(), &bytes)?;
        }
        Ok(Arc::new(lib))
    }
}

/// Adds a plugin; an id already present in the same pack is an error naming both files.
pub fn add_unique(list: &mut Vec<Plugin>, p: Plugin) -> Result<()> {
    if let Some(q) = list.iter().find(|q| q.meta.id == p.meta.id && q.pack == p.pack) {
        if q.path == p.path {
            return Ok(());
        }
        return Err(Error::new(
            ErrorKind::Config,
            format!("two plugins have the id {}: {} and {}", p.meta.id, q.path.display(), p.path.display()),
        ));
    }
    list.push(p);
    Ok(())
}

/// The plugins an expression selects: every plugin loaded from a path it
/// names, and those of `available` its terms select (by id, `pack:id`,
/// category, glob or `all`; plugins of untrusted packs only by their exact
/// id or `pack:id`). A term that matches nothing is an error, as in nmap,
/// and so is a bare id that selects plugins of two packs.
pub fn select(available: &[Plugin], expr: &str) -> Result<Vec<Plugin>> {
    let sel = Selection::parse(expr)?;
    let mut chosen: Vec<Plugin> = Vec::new();
    let mut from_paths: Vec<Plugin> = Vec::new();
    // A plugin named by its path may require the core library's modules.
    let core = available.iter().find(|p| p.pack.as_deref() == Some("core")).map(|p| p.libs.clone()).unwrap_or_default();
    for path in sel.paths() {
        if path.is_dir() {
            for p in load_dir(path, &core)? {
                add_unique(&mut from_paths, p)?;
            }
        } else if path.is_file() {
            add_unique(&mut from_paths, load_file(path, &core)?)?;
        } else {
            return Err(Error::new(
                ErrorKind::Config,
                format!("`scripts`: {} is not a file or folder", path.display()),
            ));
        }
    }
    let mut everything: Vec<Plugin> = available.to_vec();
    for p in &from_paths {
        add_unique(&mut everything, p.clone())?;
    }
    let names: Vec<Vec<String>> = everything.iter().map(Plugin::names).collect();
    let mut named: Vec<(&str, &[String])> = Vec::new();
    for (p, n) in everything.iter().zip(&names) {
        for name in n {
            named.push((name.as_str(), p.meta.categories.as_slice()));
        }
    }
    if let Some(term) = sel.unmatched(&named).first() {
        return Err(Error::new(
            ErrorKind::Config,
            format!("`scripts`: '{term}' did not match a category, plugin id or path"),
        ));
    }
    for mut p in from_paths {
        p.named = true;
        add_unique(&mut chosen, p)?;
    }
    for p in available {
        let n = p.names();
        let n: Vec<&str> = n.iter().map(String::as_str).collect();
        // An untrusted plugin is picked only by a term that is exactly its
        // `pack:id`: never by its bare id, which could equal a category or
        // a keyword (`default`, `all`) and so be picked by `-sC`.
        let picked = if p.trusted {
            sel.selects_names(&n, &p.meta.categories)
        } else {
            let full = p.name();
            let shadowed = available.iter().any(|q| q.trusted && q.meta.id == p.meta.id);
            if !shadowed && !sel.names_exactly(&[&full]) && sel.names_exactly(&[&p.meta.id]) {
                return Err(Error::new(
                    ErrorKind::Config,
                    format!(
                        "`scripts`: {} is a plugin of the untrusted pack {}; untrusted plugins run only when named in full: {full}",
                        p.meta.id,
                        p.pack.as_deref().unwrap_or("?")
                    ),
                ));
            }
            sel.names_exactly(&[&full]) && sel.selects_names(&[&full], &[])
        };
        if picked {
            let mut p = p.clone();
            p.named = sel.names_exactly(&n);
            add_unique(&mut chosen, p)?;
        }
    }
    // One bare id from two packs is ambiguous unless each was named in full.
    for (i, a) in chosen.iter().enumerate() {
        for b in &chosen[i + 1..] {
            let full =
                |p: &Plugin| p.pack.as_ref().is_some_and(|k| sel.names_exactly(&[&format!("{k}:{}", p.meta.id)]));
            if a.meta.id == b.meta.id && !(full(a) && full(b)) {
                let pack = |p: &Plugin| p.pack.clone().unwrap_or_else(|| p.path.display().to_string());
                return Err(Error::new(
                    ErrorKind::Config,
                    format!(
                        "`scripts`: plugin id {} is in both {} and {}; name one as {}:{} or {}:{}",
                        a.meta.id,
                        pack(a),
                        pack(b),
                        pack(a),
                        a.meta.id,
                        pack(b),
                        b.meta.id
                    ),
                ));
            }
        }
    }
    Ok(chosen)
}
