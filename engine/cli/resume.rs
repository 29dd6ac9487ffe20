//! Resume files: what an interrupted scan leaves so `--resume FILE` can
//! finish it.
//!
//! A resume file is JSON: the scan's command line, its seed, the size of its
//! target space (a resumed scan must see the same one) and the segments of
//! the scan order not yet sent. Probes in flight at the interrupt were
//! answered or timed out before the file was written, so a resumed scan
//! sends every remaining probe once and no earlier one again.
//!
//! With host discovery the order walks hosts, and a host is taken before
//! it is done with (asked, then each of its ports): the file also lists
//! the hosts the interrupt left unfinished (`hosts`: its discovery given
//! up, or ports of it not probed), which the resumed scan asks again and
//! scans whole first, as nmap redoes its unfinished host group.
//!
//! The command line is kept as typed, passwords and `--script-args`
//! included (the outputs record it redacted): the file is written mode 0600,
//! through a private temporary file (see [`save`]). A resumed scan's XML
//! goes to a new file beside the first ([`create_beside`]).

use std::io;
use std::path::{Path, PathBuf};

use moonscan::targets::Segment;
use moonscan::{Error, ErrorKind, Result};
use serde::{Deserialize, Serialize};

/// The version of the resume files this moonscan writes.
pub const VERSION: u32 = 2;

/// The default resume file, in the current folder.
pub const DEFAULT: &str = "moonscan.resume";

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ResumeFile {
    pub moonscan_resume: u32,
    /// The command line, program name first.
    pub args: Vec<String>,
    pub seed: u64,
    pub space_len: u64,
    pub segments: Vec<Segment>,
    /// With host discovery: the hosts to take again first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<std::net::IpAddr>,
}

fn bad(path: &Path, why: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::Config, format!("--resume {}: {why}", path.display()))
}

/// Largest resume file read.
const MAX_FILE: u64 = 128 << 20;
/// Most segments a resume file may list (a scan writes one per probe driver,
/// and a resumed scan's drivers split those again).
pub const MAX_SEGMENTS: usize = 1024;
/// Most unfinished hosts a resume file may list: more than a scan leaves
/// (each sender holds at most 65,536 hosts found up, with up to 16
/// senders, plus the hosts its discovery window has asked); the file
/// itself is bounded by [`MAX_FILE`].
pub const MAX_HOSTS: usize = 1 << 21;

pub fn load(path: &Path) -> Result<ResumeFile> {
    let text = moonscan::files::read_text_capped(path, MAX_FILE, "--resume")?;
    let mut f: ResumeFile =
        serde_json::from_str(&text).map_err(|e| bad(path, format!("not a moonscan resume file: {e}")))?;
    // Version 2 (with host discovery, the order walks hosts, and `hosts`
    // lists the unfinished ones); version 1 files are -Pn scans'.
    if !(1..=VERSION).contains(&f.moonscan_resume) {
        return Err(bad(path, format!("resume file version {} is not 1 or {VERSION}", f.moonscan_resume)));
    }
    if f.args.is_empty() || f.args.iter().any(|a| a == "--resume") {
        return Err(bad(path, "its command line is empty or itself a --resume"));
    }
    check_segments(&f.segments, f.space_len).map_err(|why| bad(path, why))?;
    if f.hosts.len() > MAX_HOSTS {
        return Err(bad(path, format!("{} hosts to redo; a resume file lists at most {MAX_HOSTS}", f.hosts.len())));
    }
    f.hosts.sort_by_key(|ip| (ip.is_ipv6(), moonscan::targets::addrs::key(*ip)));
    f.hosts.dedup();
    Ok(f)
}

/// A resume file's segments must be what a scan writes: each with a step,
/// starting inside the space, sorted, and no two sharing a position (else
/// a pair would be probed twice, or thousands of times).
fn check_segments(segs: &[Segment], space_len: u64) -> moonscan::Result<()> {
    let bad = |m: String| moonscan::Error::new(moonscan::ErrorKind::Config, m);
    if segs.len() > MAX_SEGMENTS {
        return Err(bad(format!("{} segments; a resume file has at most {MAX_SEGMENTS}", segs.len())));
    }
    for (i, s) in segs.iter().enumerate() {
        if s.step == 0 {
            return Err(bad(format!("segment {} has step 0", i + 1)));
        }
        // Keeps the overlap arithmetic below inside i128.
        if s.step >= 1 << 62 {
            return Err(bad(format!("segment {} has step {}, more than any scan writes", i + 1, s.step)));
        }
        if s.next >= space_len {
            return Err(bad(format!("segment {} starts at {}, outside the space of {space_len} pairs", i + 1, s.next)));
        }
    }
    for (i, w) in segs.windows(2).enumerate() {
        if (w[0].next, w[0].step) >= (w[1].next, w[1].step) {
            return Err(bad(format!("segments {} and {} are not in order (or repeat)", i + 1, i + 2)));
        }
    }
    for (i, a) in segs.iter().enumerate() {
        for (j, b) in segs.iter().enumerate().skip(i + 1) {
            if let Some(x) = first_common(*a, *b) {
                if x < space_len {
                    return Err(bad(format!("segments {} and {} overlap (both have position {x})", i + 1, j + 1)));
                }
            }
        }
    }
    Ok(())
}

/// The first position two segments share, if any (the Chinese remainder
/// theorem on next mod step).
fn first_common(a: Segment, b: Segment) -> Option<u64> {
    fn egcd(a: i128, b: i128) -> (i128, i128, i128) {
        if b == 0 {
            (a, 1, 0)
        } else {
            let (g, x, y) = egcd(b, a % b);
            (g, y, x - (a / b) * y)
        }
    }
    let (s, t) = (a.step as i128, b.step as i128);
    let (g, p, _) = egcd(s, t);
    let diff = b.next as i128 - a.next as i128;
    if diff % g != 0 {
        return None;
    }
    let lcm = s / g * t;
    // x = a.next + s * k with s * k ≡ diff (mod t).
    let k = ((diff / g) % (t / g) * (p % (t / g))) % (t / g);
    let mut x = (a.next as i128 + s * k).rem_euclid(lcm);
    let floor = a.next.max(b.next) as i128;
    if x < floor {
        x += (floor - x + lcm - 1) / lcm * lcm;
    }
    u64::try_from(x).ok()
}

/// Writes the file whole, or not at all: into a new temporary file beside
/// it (a random name made with O_EXCL, mode 0600: nothing planted there is
/// written through, and only the user can read the command line it keeps,
/// passwords included), then renamed over it (a link at `path` is replaced,
/// not followed).
pub fn save(path: &Path, f: &ResumeFile) -> io::Result<()> {
    use std::io::Write;
    let mut f = f.clone();
    f.segments.sort_by_key(|s| (s.next, s.step));
    let bytes = serde_json::to_vec_pretty(&f).map_err(io::Error::other)?;
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new().prefix(".moonscan.resume-").tempfile_in(dir)?;
    tmp.write_all(&bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Most names [`create_beside`] tries.
pub const BESIDE_NAMES: u32 = 1000;

/// A resumed scan's XML file, a new one beside the first: NAME.resumed.xml,
/// else NAME.resumed-2.xml and so on. Each is created only if nothing has
/// that name (O_EXCL, O_NOFOLLOW): a file, or a link (even one that points
/// nowhere), is passed over, never written through.
pub fn create_beside(path: &Path) -> io::Result<(PathBuf, std::fs::File)> {
    use std::os::unix::fs::OpenOptionsExt;
    for n in 1..=BESIDE_NAMES {
        let p = path.with_extension(if n == 1 { "resumed.xml".to_string() } else { format!("resumed-{n}.xml") });
        match std::fs::OpenOptions::new().write(true).create_new(true).custom_flags(libc::O_NOFOLLOW).open(&p) {
            Ok(f) => return Ok((p, f)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(io::Error::new(e.kind(), format!("{}: {e}", p.display()))),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!("the names for a resumed scan's XML are taken (.resumed.xml to .resumed-{BESIDE_NAMES}.xml)"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ResumeFile {
        ResumeFile {
            moonscan_resume: 1,
            args: vec!["moonscan".into(), "-p".into(), "80".into(), "198.18.0.2".into()],
            seed: 7,
            space_len: 10,
            segments: vec![Segment { next: 3, step: 2 }],
            hosts: Vec::new(),
        }
    }

    #[test]
    fn a_saved_file_loads_back_and_bad_ones_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.resume");
        save(&path, &sample()).unwrap();
        let back = load(&path).unwrap();
        assert_eq!((back.seed, back.segments), (7, vec![Segment { next: 3, step: 2 }]));

        let mut f = sample();
        f.segments[0].step = 0;
        save(&path, &f).unwrap();
        assert!(load(&path).unwrap_err().to_string().contains("step 0"), "{}", load(&path).unwrap_err());
        let mut f = sample();
        f.args.push("--resume".into());
        save(&path, &f).unwrap();
        assert!(load(&path).unwrap_err().to_string().contains("itself a --resume"));

        // Hosts to redo: read once each, in address order; at most MAX_HOSTS.
        let ip = |s: &str| -> std::net::IpAddr { s.parse().unwrap() };
        let mut f = sample();
        f.moonscan_resume = 2;
        f.hosts = vec![ip("2001:2::1"), ip("198.18.0.3"), ip("198.18.0.2"), ip("198.18.0.3")];
        save(&path, &f).unwrap();
        assert_eq!(load(&path).unwrap().hosts, [ip("198.18.0.2"), ip("198.18.0.3"), ip("2001:2::1")]);
        f.hosts = vec![ip("198.18.0.2"); MAX_HOSTS + 1];
        save(&path, &f).unwrap();
        let refused = load(&path).unwrap_err().to_string();
        assert!(refused.contains(&format!("a resume file lists at most {MAX_HOSTS}")), "{refused}");
        f.hosts.clear();
        f.moonscan_resume = 3;
        save(&path, &f).unwrap();
        assert!(load(&path).unwrap_err().to_string().contains("version 3"));

        // Larger than 128 MiB: refused without reading it whole.
        std::fs::File::create(&path).unwrap().set_len(MAX_FILE + 1).unwrap();
        assert!(load(&path).unwrap_err().to_string().contains("larger than 134217728 bytes"));
    }

    // Regression: an interrupted scan wrote moonscan.resume.tmp through a
    // link another user planted (a root-owned 0600 file was overwritten), and
    // left the command line, passwords included, readable by all (0644).
    #[test]
    fn save_writes_through_no_planted_link_and_only_for_its_owner() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "victim").unwrap();
        let path = dir.path().join(DEFAULT);
        std::os::unix::fs::symlink(&victim, dir.path().join("moonscan.resume.tmp")).unwrap();
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        save(&path, &sample()).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "victim");
        let meta = std::fs::symlink_metadata(&path).unwrap();
        assert!(meta.is_file(), "the link at the file's own name is replaced, not followed");
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(load(&path).unwrap().args, sample().args);
        // Nothing else is left beside it.
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 3, "{names:?}");
    }

    // Regression: `--resume` with -oX created NAME.resumed.xml through a
    // dangling link.
    #[test]
    fn a_resumed_xml_passes_over_links_and_files_and_its_names_run_out() {
        let dir = tempfile::tempdir().unwrap();
        let xml = dir.path().join("scan.xml");
        let outside = dir.path().join("outside");
        std::os::unix::fs::symlink(&outside, dir.path().join("scan.resumed.xml")).unwrap();
        std::fs::write(dir.path().join("scan.resumed-2.xml"), "first resume").unwrap();
        let (p, _) = create_beside(&xml).unwrap();
        assert_eq!(p, dir.path().join("scan.resumed-3.xml"));
        assert!(!outside.exists(), "the dangling link was not created through");
        assert_eq!(std::fs::read_to_string(dir.path().join("scan.resumed-2.xml")).unwrap(), "first resume");
        for n in 4..=BESIDE_NAMES {
            std::fs::write(dir.path().join(format!("scan.resumed-{n}.xml")), "").unwrap();
        }
        let e = create_beside(&xml).unwrap_err();
        assert!(e.to_string().contains("are taken (.resumed.xml to .resumed-1000.xml)"), "{e}");
    }

    // Regression: a file listing one segment 2,000 times sent 2,000 probes
    // to one address and port.
    #[test]
    fn repeated_overlapping_or_outside_segments_are_refused() {
        let seg = |next, step| Segment { next, step };
        let check = |segs: &[Segment]| check_segments(segs, 1000).map_err(|e| e.to_string());
        assert!(check(&vec![seg(5, 1000); 2000]).unwrap_err().contains("at most 1024"));
        assert!(check(&vec![seg(5, 1000); 500]).unwrap_err().contains("not in order"));
        assert!(check(&vec![seg(5, 1); 5000]).unwrap_err().contains("at most 1024"));
        assert!(check(&[seg(0, u64::MAX), seg(1, u64::MAX - 1)]).unwrap_err().contains("more than any scan writes"));
        let big = 1u64 << 61;
        assert_eq!(
            check_segments(&[seg(0, big), seg(1, big - 1)], u64::MAX).map_err(|e| e.to_string()),
            Err("segments 1 and 2 overlap (both have position 2305843009213693952)".into())
        );
        assert!(check(&[seg(1000, 1)]).unwrap_err().contains("outside the space"));
        // 0,2,4,... and 3,6,9,... share 6.
        assert_eq!(check(&[seg(0, 2), seg(3, 3)]).unwrap_err(), "segments 1 and 2 overlap (both have position 6)");
        // 1,3,5,... and 0,4,8,... share nothing; 990,... and 4,... only past the end.
        assert_eq!(check(&[seg(0, 4), seg(1, 2)]), Ok(()));
        assert_eq!(check(&[seg(4, 1000), seg(990, 1000)]), Ok(()));
        assert_eq!(check(&[seg(0, 7), seg(1, 7), seg(2, 7), seg(3, 7)]), Ok(()));
        // What scans write: a shard split among workers, resumed and split again.
        let written: Vec<Segment> = (0..8).map(|k| seg(3 + 5 * k, 40)).collect();
        assert_eq!(check(&written), Ok(()));
        assert!(check(&[seg(3, 5), seg(8, 40)]).unwrap_err().contains("overlap"));
    }
}
