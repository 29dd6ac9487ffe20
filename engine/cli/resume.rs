//! Resume files: what an interrupted scan leaves so `--resume FILE` can
//! finish it.
//!
//! A resume file is JSON: the scan's command line, its seed, the size of its
//! target space (a resumed scan must see the same one) and the segments of
//! the scan order not yet sent. Probes in flight at the interrupt were
//! answered or timed out before the file was written, so a resumed scan
//! sends every remaining probe once and no earlier one again.

use std::path::Path;

use moonscan::targets::Segment;
use moonscan::{Error, ErrorKind, Result};
use serde::{Deserialize, Serialize};

/// The default resume file, in the current folder.
pub const DEFAULT: &str = "moonscan.resume";

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ResumeFile {
    pub moonscan_resume: u32,
    /// The command line, program name first.
    pub args: Vec<String>,
    pub seed: u64,
    pub space_len: u64,
    pub segments: Vec<Segment>,
}

fn bad(path: &Path, why: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::Config, format!("--resume {}: {why}", path.display()))
}

pub fn load(path: &Path) -> Result<ResumeFile> {
    let len = std::fs::metadata(path).map_err(|e| bad(path, e))?.len();
    if len > 16 << 20 {
        return Err(bad(path, "larger than 16 MiB; not a resume file"));
    }
    let text = std::fs::read_to_string(path).map_err(|e| bad(path, e))?;
    let f: ResumeFile =
        serde_json::from_str(&text).map_err(|e| bad(path, format!("not a moonscan resume file: {e}")))?;
    if f.moonscan_resume != 1 {
        return Err(bad(path, format!("resume file version {} is not 1", f.moonscan_resume)));
    }
    if f.args.is_empty() || f.args.iter().any(|a| a == "--resume") {
        return Err(bad(path, "its command line is empty or itself a --resume"));
    }
    if f.segments.iter().any(|s| s.step == 0) {
        return Err(bad(path, "a segment has step 0"));
    }
    Ok(f)
}

/// Writes the file whole, or not at all (a temporary file renamed over it).
pub fn save(path: &Path, f: &ResumeFile) -> std::io::Result<()> {
    let tmp = path.with_extension("resume.tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(f).map_err(std::io::Error::other)?)?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ResumeFile {
        ResumeFile {
            moonscan_resume: 1,
            args: vec!["moonscan".into(), "-p".into(), "80".into(), "198.18.0.2".into()],
            seed: 7,
            space_len: 1,
            segments: vec![Segment { next: 3, step: 2 }],
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
        assert!(load(&path).unwrap_err().to_string().contains("step 0"));
        let mut f = sample();
        f.args.push("--resume".into());
        save(&path, &f).unwrap();
        assert!(load(&path).unwrap_err().to_string().contains("itself a --resume"));

        // Larger than 16 MiB: refused before it is read.
        std::fs::File::create(&path).unwrap().set_len((16 << 20) + 1).unwrap();
        assert!(load(&path).unwrap_err().to_string().contains("larger than 16 MiB"));
    }
}
