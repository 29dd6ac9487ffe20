//! What the secrets tests of both harnesses share (tests/secrets.rs and
//! tests/lab/secrets.rs): the secret, a slow scan writing every output, its
//! interruption, and the checks that no output holds the secret and that
//! the resume file is private and whole.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::util::{stderr, wait_for_events};

/// The password and script argument the tests look for.
pub(crate) const SECRET: &str = "hunter2";

/// Every output format, each to its own file.
pub(crate) const OUTPUTS: [&str; 10] =
    ["-oX", "o.xml", "-oN", "o.nmap", "-oG", "o.gnmap", "-oJ", "o.json", "--sarif", "o.sarif"];

/// A connect scan of every port of `target`, slow enough to interrupt.
pub(crate) fn slow_scan(cmd: &mut Command, dir: &Path, target: &str, extra: &[&str]) -> Child {
    cmd.args(["-sT", "-Pn", "-n", "-p", "1-65535", target, "--max-rate", "300"])
        .args(extra)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("moonscan starts")
}

/// Ctrl-C once the scan's NDJSON (o.json in `dir`) has begun; waits for the exit.
pub(crate) fn interrupt_once_started(child: Child, dir: &Path) -> Output {
    wait_for_events(&dir.join("o.json"), 1, |e| e["type"] == "scan_start", Duration::from_secs(20));
    let st = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(st.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "an interrupted scan exits 1: {}", stderr(&out));
    out
}

/// Asserts no output file in `dir` holds the secret; returns the scan id.
pub(crate) fn outputs_hold_no_secret(dir: &Path) -> String {
    for file in OUTPUTS.iter().skip(1).step_by(2) {
        let text = std::fs::read_to_string(dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(!text.contains(SECRET), "{file} holds the secret:\n{text}");
    }
    let start: Value =
        serde_json::from_str(std::fs::read_to_string(dir.join("o.json")).unwrap().lines().next().expect("scan_start"))
            .unwrap();
    let args: Vec<&str> = start["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    let at = args.iter().position(|a| *a == "--script-args").expect("--script-args recorded");
    assert_eq!(args[at + 1], "<redacted>");
    start["scan_id"].as_str().unwrap().to_string()
}

/// The resume file: mode 0600, and the command line whole so the scan can be finished.
pub(crate) fn resume_file_is_private_and_whole(dir: &Path, whole: &[&str]) {
    let path = dir.join("moonscan.resume");
    let meta = std::fs::symlink_metadata(&path).expect("a resume file");
    assert!(meta.is_file());
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let f: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let args: Vec<&str> = f["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    for w in whole {
        assert!(args.contains(w), "{w} kept in the resume file: {args:?}");
    }
}
