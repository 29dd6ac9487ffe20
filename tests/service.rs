//! Service detection (-sV) with a broken probe file: a clear error.
//! Detection against the lab's services and hostile servers:
//! tests/lab/service.rs.

use std::process::Command;

use crate::util::{bin, stderr};

#[test]
fn a_broken_probe_file_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bad.yaml"), "probes:\n  - name: X\n    rarity: 12\n").unwrap();
    let out = Command::new(bin())
        .args(["-sV", "--probes", dir.path().to_str().unwrap(), "-p", "1", "127.0.0.1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("bad.yaml") && err.contains("rarity 12"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}
