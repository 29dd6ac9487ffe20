//! What a scan leaves on disk is safe to keep and to share: no output or
//! store records a URL's password or `--script-args` values (only the
//! resume file keeps the command line whole, for its owner alone), and no
//! file moonscan names itself (the resume file, a resumed scan's XML, the
//! files install.sh writes) is written through a link someone planted.
//! What needs the lab is in tests/lab/secrets.rs.

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::util::{bin, repo, stderr, wait_until};

mod common;
use common::*;

// Regression: --script-args values were written raw everywhere but SARIF,
// and the resume file was readable by all (0644).
#[test]
fn script_args_stay_out_of_every_output_and_the_sqlite_store() {
    let dir = tempfile::tempdir().unwrap();
    let args = format!("user=x,pass={SECRET}");
    let mut extra = vec!["--script", "banner", "--script-args", &args, "--db", "scan.db"];
    extra.extend(OUTPUTS);
    let child = slow_scan(&mut Command::new(bin()), dir.path(), "127.0.0.1", &extra);
    interrupt_once_started(child, dir.path());
    let id = outputs_hold_no_secret(dir.path());
    let conn = rusqlite::Connection::open(dir.path().join("scan.db")).unwrap();
    let stored: String =
        conn.query_row("SELECT CAST(args AS TEXT) FROM scans WHERE id = ?1", [&id], |r| r.get(0)).unwrap();
    assert!(stored.contains("<redacted>") && !stored.contains(SECRET), "{stored}");
    resume_file_is_private_and_whole(dir.path(), &[&args]);
}

// Regression: Ctrl-C wrote moonscan.resume.tmp through a link another user
// planted, and `--resume` with -oX created NAME.resumed.xml through a
// dangling link.
#[test]
fn an_interrupted_scan_and_its_resume_write_through_no_planted_link() {
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("work");
    std::fs::create_dir(&dir).unwrap();
    let victim = top.path().join("victim");
    std::fs::write(&victim, "root's file").unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::os::unix::fs::symlink(&victim, dir.join("moonscan.resume.tmp")).unwrap();
    let child = slow_scan(&mut Command::new(bin()), &dir, "127.0.0.1", &["-oX", "o.xml", "-oJ", "o.json"]);
    let out = interrupt_once_started(child, &dir);
    assert!(stderr(&out).contains("moonscan --resume moonscan.resume"), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "root's file");
    resume_file_is_private_and_whole(&dir, &["127.0.0.1"]);

    let outside = top.path().join("outside.xml");
    std::os::unix::fs::symlink(&outside, dir.join("o.resumed.xml")).unwrap();
    let child = Command::new(bin())
        .args(["--resume", "moonscan.resume"])
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let opened = wait_until(Duration::from_secs(20), || dir.join("o.resumed-2.xml").exists().then_some(()));
    assert!(opened.is_some(), "the resumed scan never opened its XML");
    let st = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(st.success());
    let out = child.wait_with_output().unwrap();
    // The first part was whole: the resumed scan wrote the whole scan's
    // report beside it (passing over the link) and put it in its place.
    assert!(!dir.join("o.resumed-2.xml").exists(), "{}", stderr(&out));
    let whole = std::fs::read_to_string(dir.join("o.xml")).unwrap();
    assert!(whole.trim_end().ends_with("</nmaprun>") && whole.matches("<nmaprun ").count() == 1, "{whole}");
    assert!(!outside.exists(), "the dangling link was created through");
    assert!(std::fs::symlink_metadata(dir.join("o.resumed.xml")).unwrap().file_type().is_symlink());
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "root's file");
}

// Regression: install.sh wrote `$target.tmp` through a link planted under a
// prefix another user owns.
#[test]
fn install_sh_writes_through_no_planted_link() {
    let top = tempfile::tempdir().unwrap();
    let prefix = top.path().join("prefix");
    let victim = top.path().join("victim");
    std::fs::write(&victim, "root's file").unwrap();
    let files = [
        "share/man/man1/moonscan.1",
        "share/bash-completion/completions/moonscan",
        "share/zsh/site-functions/_moonscan",
        "share/fish/vendor_completions.d/moonscan.fish",
    ];
    for f in files {
        let target = prefix.join(f);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(&victim, format!("{}.tmp", target.display())).unwrap();
    }
    // A link at a final name is replaced, not written through.
    std::os::unix::fs::symlink(&victim, prefix.join(files[0])).unwrap();
    let out = Command::new("bash")
        .arg(repo().join("scripts/install.sh"))
        .args(["--binary", bin(), "--prefix"])
        .arg(&prefix)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "root's file");
    for f in files {
        let meta = std::fs::symlink_metadata(prefix.join(f)).unwrap();
        assert!(meta.is_file(), "{f} is a file of its own");
        assert_eq!(meta.permissions().mode() & 0o777, 0o644, "{f}");
    }
    assert!(std::fs::read_to_string(prefix.join(files[0])).unwrap().contains(".TH moonscan 1"));
}
