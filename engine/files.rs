//! Reading the files a user names (target and exclude lists, script
//! arguments, banners, resume files, plugins, probes), each with a cap.
//!
//! In: a path (or a reader) and the most bytes to take. Out: the bytes, or
//! lines one at a time. What always holds: nothing is read past its cap
//! (so `/dev/zero`, a FIFO or a huge file ends in a clear error naming the
//! file and the cap, never in a process that grows until it is killed), and
//! a line list is read as a stream: only one line is held at a time.

use std::io::{BufRead, Read};
use std::path::Path;

use crate::error::{Error, ErrorKind, Result};

fn too_large(what: &str, path: &Path, max: u64) -> Error {
    Error::new(
        ErrorKind::Config,
        format!("{what} {}: larger than {max} bytes, the most moonscan reads", path.display()),
    )
}

/// Reads a whole file of at most `max` bytes; `what` (a flag, or what the
/// file is) names it in errors.
pub fn read_capped(path: &Path, max: u64, what: &str) -> Result<Vec<u8>> {
    let f = std::fs::File::open(path)
        .map_err(|e| Error::with_source(ErrorKind::Config, format!("{what} {}: {e}", path.display()), e))?;
    let mut buf = Vec::new();
    f.take(max.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(|e| Error::with_source(ErrorKind::Config, format!("{what} {}: {e}", path.display()), e))?;
    if buf.len() as u64 > max {
        return Err(too_large(what, path, max));
    }
    Ok(buf)
}

/// Makes `dir` and its missing parents: mode 0755 whatever the umask (a
/// umask of 002 would make them group writable, which the data folder's
/// check, [`crate::packs::check_private`], refuses at the next run).
pub fn make_dirs(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().recursive(true).mode(0o755).create(dir)
}

/// The first of nmap's data files named `name` (`nmap-mac-prefixes`,
/// `scripts/script.db`) that is found in one of `dirs` (nmap's folders,
/// [`crate::places::Places::nmap`]) and holds at most `max` bytes, as text
/// (bytes that are not UTF-8 replaced); none when nmap is not installed.
pub fn nmap_data(dirs: &[std::path::PathBuf], name: &str, max: u64) -> Option<String> {
    dirs.iter()
        .map(|d| d.join(name))
        .filter(|p| p.is_file())
        .find_map(|p| read_capped(&p, max, "nmap data file").ok())
        .map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// As [`read_capped`], for text that must be UTF-8.
pub fn read_text_capped(path: &Path, max: u64, what: &str) -> Result<String> {
    String::from_utf8(read_capped(path, max, what)?)
        .map_err(|_| Error::new(ErrorKind::Config, format!("{what} {}: not UTF-8 text", path.display())))
}

/// Calls `f` with each line of `reader` (without its line end), holding one
/// line at a time: a line longer than `max_line` bytes, or more than
/// `max_total` bytes in all, is an error naming `what` and `path`.
pub fn for_each_line(
    reader: impl Read,
    path: &Path,
    what: &str,
    max_line: usize,
    max_total: u64,
    mut f: impl FnMut(&str) -> Result<()>,
) -> Result<()> {
    let io = |e: std::io::Error| Error::new(ErrorKind::Config, format!("{what} {}: {e}", path.display()));
    let mut r = std::io::BufReader::new(reader.take(max_total.saturating_add(1)));
    let mut line = Vec::with_capacity(256);
    let mut total: u64 = 0;
    let mut number = 0u64;
    loop {
        line.clear();
        // Each line is read through its own cap, so a file with no line end
        // (/dev/zero) is refused after max_line bytes, not held whole.
        let n = (&mut r).take(max_line as u64 + 1).read_until(b'\n', &mut line).map_err(io)?;
        if n == 0 {
            return Ok(());
        }
        number += 1;
        total += n as u64;
        if total > max_total {
            return Err(too_large(what, path, max_total));
        }
        if line.last() == Some(&b'\n') {
            line.pop();
        } else if line.len() > max_line {
            return Err(Error::new(
                ErrorKind::Config,
                format!("{what} {}: line {number} is longer than {max_line} bytes", path.display()),
            ));
        }
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        let text = std::str::from_utf8(&line).map_err(|_| {
            Error::new(ErrorKind::Config, format!("{what} {}: line {number} is not UTF-8 text", path.display()))
        })?;
        f(text)?;
    }
}

/// Writes a file through a temporary file beside it and a rename, so a
/// reader sees the old bytes or the new ones, never a part (mode 0644).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write as _;
    let at = |e: std::io::Error| Error::with_source(ErrorKind::Io, format!("{}: {e}", path.display()), e);
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new().prefix(".moonscan-").tempfile_in(dir).map_err(at)?;
    tmp.write_all(bytes).and_then(|_| tmp.as_file().sync_all()).map_err(at)?;
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o644));
    }
    tmp.persist(path).map_err(|e| at(e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_stop_at_the_cap() {
        let e = read_capped(Path::new("/dev/zero"), 1000, "--excludefile").unwrap_err();
        assert!(e.to_string().contains("larger than 1000 bytes"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, b"12345").unwrap();
        assert_eq!(read_capped(&p, 5, "x").unwrap(), b"12345");
        assert!(read_capped(&p, 4, "x").is_err());
        assert!(read_text_capped(&dir.path().join("none"), 4, "x").unwrap_err().to_string().contains("x "));
    }

    #[test]
    fn lines_stream_with_caps() {
        let mut got = Vec::new();
        for_each_line(&b"a\r\nbb\n\nccc"[..], Path::new("t"), "-iL", 3, 100, |l| {
            got.push(l.to_string());
            Ok(())
        })
        .unwrap();
        assert_eq!(got, ["a", "bb", "", "ccc"]);
        let e = for_each_line(&b"abcd\n"[..], Path::new("t"), "-iL", 3, 100, |_| Ok(())).unwrap_err();
        assert!(e.to_string().contains("line 1 is longer than 3 bytes"), "{e}");
        let e = for_each_line(&b"a\nb\nc\nd\n"[..], Path::new("t"), "-iL", 3, 5, |_| Ok(())).unwrap_err();
        assert!(e.to_string().contains("larger than 5 bytes"), "{e}");
        let zero = std::fs::File::open("/dev/zero").unwrap();
        let e = for_each_line(zero, Path::new("/dev/zero"), "-iL", 4096, 1 << 30, |_| Ok(())).unwrap_err();
        assert!(e.to_string().contains("longer than 4096"), "{e}");
    }
}
