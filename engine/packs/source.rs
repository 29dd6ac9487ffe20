//! Where a pack's files come from: a folder, or a .tar.gz extracted into a
//! temporary folder under caps.
//!
//! Extraction never creates a link, device or anything but plain files and
//! folders, writes every file with `O_EXCL` and never follows a link, and
//! refuses (naming the entry) `..`, absolute paths, links of either kind,
//! devices, FIFOs, sparse files, more than [`MAX_FILES`] entries or more
//! than [`MAX_TOTAL`] bytes of content. The decompressed stream itself is
//! capped too, so no header trick makes it read without end.

use std::fs;
use std::io::{self, Read, Write};
use std::path::{Component, Path, PathBuf};

use super::refuse;
use crate::error::{Error, ErrorKind, Result};

/// Most bytes of file content a pack may hold.
pub const MAX_TOTAL: u64 = 16 * 1024 * 1024;
/// Most entries (files and folders) a pack may hold.
pub const MAX_FILES: usize = 1000;
/// Deepest folder nesting inside a pack.
pub const MAX_DEPTH: usize = 16;
/// Largest .tar.gz read.
pub const MAX_ARCHIVE: u64 = MAX_TOTAL;
/// Most decompressed bytes read from a .tar.gz (content, headers, padding).
const MAX_STREAM: u64 = MAX_TOTAL + 4 * 1024 * 1024;

/// A pack's folder, with the temporary folder it was extracted to (if it was).
pub struct Source {
    pub root: PathBuf,
    _tmp: Option<tempfile::TempDir>,
}

/// Opens a pack folder, or extracts a .tar.gz.
pub fn open(path: &Path) -> Result<Source> {
    let meta = fs::metadata(path).map_err(|e| refuse(format!("{}: {e}", path.display())))?;
    if meta.is_dir() {
        return Ok(Source { root: path.to_path_buf(), _tmp: None });
    }
    if !meta.is_file() {
        return Err(refuse(format!("{}: not a folder or a .tar.gz file", path.display())));
    }
    if meta.len() > MAX_ARCHIVE {
        return Err(refuse(format!("{}: larger than the {MAX_ARCHIVE}-byte limit for a pack archive", path.display())));
    }
    let tmp = tempfile::Builder::new()
        .prefix("moonscan-pack-")
        .tempdir()
        .map_err(|e| Error::with_source(ErrorKind::Io, format!("cannot make a temporary folder: {e}"), e))?;
    extract(path, tmp.path())?;
    let root = find_root(tmp.path()).map_err(|e| e.context(path.display()))?;
    Ok(Source { root, _tmp: Some(tmp) })
}

/// pack.yaml at the top of the archive, or in its one top-level folder.
fn find_root(dir: &Path) -> Result<PathBuf> {
    if dir.join("pack.yaml").exists() {
        return Ok(dir.to_path_buf());
    }
    let entries: Vec<PathBuf> =
        fs::read_dir(dir).map_err(|e| refuse(e.to_string()))?.filter_map(|e| e.ok().map(|e| e.path())).collect();
    match entries.as_slice() {
        [one] if one.is_dir() && one.join("pack.yaml").exists() => Ok(one.clone()),
        _ => Err(refuse("no pack.yaml at the top of the archive or in its single top-level folder")),
    }
}

/// A reader that fails once more than `left` bytes were asked of it.
struct Capped<R> {
    inner: R,
    left: u64,
}

impl<R: Read> Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.left == 0 {
            return Err(io::Error::other(format!(
                "the archive decompresses to more than {MAX_STREAM} bytes (size cap; a compression bomb?)"
            )));
        }
        let want = buf.len().min(self.left.min(usize::MAX as u64) as usize);
        let n = self.inner.read(&mut buf[..want])?;
        self.left -= n as u64;
        Ok(n)
    }
}

/// A tar entry's path as checked relative components.
fn entry_path(raw: &[u8]) -> Result<PathBuf> {
    let bad = |m: String| super::refuse_as(ErrorKind::Integrity, m);
    let shown = String::from_utf8_lossy(raw).into_owned();
    let text = std::str::from_utf8(raw).map_err(|_| bad(format!("entry {shown:?}: the name is not UTF-8")))?;
    if text.split(['/', '\\']).any(|c| c == "..") {
        return Err(bad(format!("entry {shown:?}: the path contains '..'")));
    }
    if text.starts_with('/') || text.starts_with('\\') {
        return Err(bad(format!("entry {shown:?}: the path is absolute")));
    }
    let mut out = PathBuf::new();
    for c in Path::new(text).components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::CurDir => {}
            _ => return Err(bad(format!("entry {shown:?}: not a plain relative path"))),
        }
    }
    if out.components().count() > MAX_DEPTH {
        return Err(bad(format!("entry {shown:?}: more than {MAX_DEPTH} folders deep")));
    }
    Ok(out)
}

/// Extracts a .tar.gz into `dest` under the caps.
pub fn extract(archive: &Path, dest: &Path) -> Result<()> {
    let at = |m: String| refuse(format!("{}: {m}", archive.display()));
    let f = fs::File::open(archive).map_err(|e| at(e.to_string()))?;
    let mut magic = [0u8; 2];
    {
        let mut probe = &f;
        probe.read_exact(&mut magic).map_err(|_| at("not a .tar.gz (too short)".into()))?;
    }
    if magic != [0x1f, 0x8b] {
        return Err(at("not a .tar.gz (no gzip header); give a pack folder or a .tar.gz of one".into()));
    }
    let f = fs::File::open(archive).map_err(|e| at(e.to_string()))?;
    let gz = flate2::read::GzDecoder::new(io::BufReader::new(f));
    let mut tar = tar::Archive::new(Capped { inner: gz, left: MAX_STREAM });
    let entries = tar.entries().map_err(|e| at(format!("not a tar archive: {e}")))?;
    let mut count = 0usize;
    let mut total = 0u64;
    for entry in entries {
        let mut entry = entry.map_err(|e| at(format!("unreadable archive: {e}")))?;
        count += 1;
        if count > MAX_FILES {
            return Err(at(format!("more than {MAX_FILES} entries (file count cap)")));
        }
        let raw = entry.path_bytes().into_owned();
        let rel = entry_path(&raw).map_err(|e| e.context(archive.display()))?;
        let name = String::from_utf8_lossy(&raw).into_owned();
        let kind = entry.header().entry_type();
        use tar::EntryType as T;
        match kind {
            T::Directory => {
                if rel.as_os_str().is_empty() {
                    continue;
                }
                make_dirs(dest, &rel).map_err(|e| at(format!("entry {name:?}: {e}")))?;
            }
            T::Regular => {
                if rel.as_os_str().is_empty() {
                    return Err(at(format!("entry {name:?}: a file without a name")));
                }
                let size = entry.header().size().map_err(|e| at(format!("entry {name:?}: {e}")))?;
                total = total.saturating_add(size);
                if total > MAX_TOTAL {
                    return Err(at(format!(
                        "entry {name:?}: the files add up to more than {MAX_TOTAL} bytes (size cap)"
                    )));
                }
                if let Some(parent) = rel.parent() {
                    make_dirs(dest, parent).map_err(|e| at(format!("entry {name:?}: {e}")))?;
                }
                let target = dest.join(&rel);
                let mut out = create_new(&target).map_err(|e| match e.kind() {
                    io::ErrorKind::AlreadyExists => at(format!("entry {name:?}: appears twice in the archive")),
                    _ => at(format!("entry {name:?}: {e}")),
                })?;
                let copied =
                    io::copy(&mut (&mut entry).take(size), &mut out).map_err(|e| at(format!("entry {name:?}: {e}")))?;
                if copied != size {
                    return Err(at(format!("entry {name:?}: truncated archive")));
                }
                out.flush().map_err(|e| at(format!("entry {name:?}: {e}")))?;
            }
            T::XGlobalHeader => {}
            T::Symlink => return Err(at(format!("entry {name:?}: a symbolic link; packs may not hold links"))),
            T::Link => return Err(at(format!("entry {name:?}: a hard link; packs may not hold links"))),
            T::Char | T::Block => return Err(at(format!("entry {name:?}: a device file"))),
            T::Fifo => return Err(at(format!("entry {name:?}: a FIFO"))),
            other => return Err(at(format!("entry {name:?}: unsupported entry type {other:?}"))),
        }
    }
    Ok(())
}

/// Creates `rel`'s folders under `root`, refusing to pass through anything
/// but a real folder.
fn make_dirs(root: &Path, rel: &Path) -> io::Result<()> {
    let mut cur = root.to_path_buf();
    for c in rel.components() {
        cur.push(c);
        match fs::symlink_metadata(&cur) {
            Ok(m) if m.file_type().is_dir() => {}
            Ok(_) => {
                return Err(io::Error::other(format!("{} is a file, not a folder", c.as_os_str().to_string_lossy())))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => fs::create_dir(&cur)?,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Creates a file that must not exist, without following links.
pub fn create_new(path: &Path) -> io::Result<fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    fs::OpenOptions::new().write(true).create_new(true).mode(0o644).custom_flags(libc::O_NOFOLLOW).open(path)
}

/// Opens a file for reading without following a link at its last component.
pub fn open_nofollow(path: &Path) -> io::Result<fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(path)
}

/// One thing found in a pack folder.
#[derive(Debug)]
pub struct Found {
    /// `/`-separated path relative to the pack's root.
    pub rel: String,
    pub is_dir: bool,
}

/// Every file and folder under `root` (links and special files refused,
/// naming them), within the caps.
pub fn walk(root: &Path) -> Result<Vec<Found>> {
    let mut out = Vec::new();
    let mut total = 0u64;
    walk_in(root, "", 0, &mut out, &mut total)?;
    Ok(out)
}

fn walk_in(dir: &Path, prefix: &str, depth: usize, out: &mut Vec<Found>, total: &mut u64) -> Result<()> {
    let rd = fs::read_dir(dir).map_err(|e| refuse(format!("{}: {e}", dir.display())))?;
    let mut names: Vec<std::ffi::OsString> = Vec::new();
    for e in rd {
        names.push(e.map_err(|e| refuse(format!("{}: {e}", dir.display())))?.file_name());
    }
    names.sort();
    for name in names {
        let Some(n) = name.to_str() else {
            return Err(refuse(format!("{prefix}{}: the name is not UTF-8", name.to_string_lossy())));
        };
        let rel = format!("{prefix}{n}");
        let path = dir.join(&name);
        let meta = fs::symlink_metadata(&path).map_err(|e| refuse(format!("{rel}: {e}")))?;
        let ft = meta.file_type();
        if out.len() >= MAX_FILES {
            return Err(refuse(format!("more than {MAX_FILES} files and folders (file count cap)")));
        }
        if ft.is_symlink() {
            return Err(refuse(format!("{rel}: a symbolic link; packs may not hold links")));
        }
        if ft.is_dir() {
            if depth + 1 >= MAX_DEPTH {
                return Err(refuse(format!("{rel}: more than {MAX_DEPTH} folders deep")));
            }
            out.push(Found { rel: rel.clone(), is_dir: true });
            walk_in(&path, &format!("{rel}/"), depth + 1, out, total)?;
        } else if ft.is_file() {
            *total = total.saturating_add(meta.len());
            if *total > MAX_TOTAL {
                return Err(refuse(format!("{rel}: the files add up to more than {MAX_TOTAL} bytes (size cap)")));
            }
            out.push(Found { rel, is_dir: false });
        } else {
            return Err(refuse(format!("{rel}: not a regular file or folder (a device, FIFO or socket)")));
        }
    }
    Ok(())
}
