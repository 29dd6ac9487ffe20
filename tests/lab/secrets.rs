//! A database password stays out of every output and of the lab's
//! PostgreSQL store. The rest of what a scan leaves on disk (no secret in
//! an output, no write through a planted link) needs no lab:
//! tests/secrets.rs.

use crate::util::{bin, in_lab, lab, stderr, stdout, TARGET};

#[path = "../secrets/common.rs"]
mod common;
use common::*;

// Regression: `--db postgres://user:secret@host/db` put the password in
// every output, in the database's scans table and in the resume file (0644).
#[test]
fn a_database_password_stays_out_of_every_output_and_the_postgres_store() {
    let _lab = lab();
    let dir = tempfile::tempdir().unwrap();
    // The lab trusts the moonscan role: the password is only carried.
    let url = format!("postgres://moonscan:{SECRET}@198.18.0.3/moonscan_results");
    let args = format!("pass={SECRET}");
    let mut extra = vec!["--script", "banner", "--script-args", &args, "--db", &url];
    extra.extend(OUTPUTS);
    let child = slow_scan(&mut in_lab(bin()), dir.path(), TARGET, &extra);
    interrupt_once_started(child, dir.path());
    let id = outputs_hold_no_secret(dir.path());
    let xml = std::fs::read_to_string(dir.path().join("o.xml")).unwrap();
    assert!(xml.contains("postgres://moonscan:***@198.18.0.3/moonscan_results"), "{xml}");
    let show = in_lab(bin()).args(["db", "--db", &url, "show", &id]).output().unwrap();
    assert_eq!(show.status.code(), Some(0), "{}", stderr(&show));
    let command = stdout(&show).lines().find(|l| l.starts_with("command: ")).unwrap_or_default().to_string();
    assert!(command.contains("moonscan:***@198.18.0.3") && !command.contains(SECRET), "{command}");
    resume_file_is_private_and_whole(dir.path(), &[&url, &args]);
}
