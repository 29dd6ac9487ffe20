//! What the store tests of both harnesses share (tests/stores.rs and
//! tests/lab/stores.rs): `moonscan db` in the root namespace, a scan's id,
//! events of some types.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

use crate::util::bin;

/// `moonscan db ARGS` in the root namespace (SQLite files only: the lab's
/// PostgreSQL is reachable from the scanner namespace alone).
pub(crate) fn db_cmd(args: &[&str]) -> Output {
    Command::new(bin()).arg("db").args(args).stdin(Stdio::null()).output().expect("moonscan db runs")
}

pub(crate) fn scan_id(evs: &[Value]) -> String {
    evs.first().filter(|e| e["type"] == "scan_start").expect("scan_start first")["scan_id"]
        .as_str()
        .unwrap()
        .to_string()
}

pub(crate) fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The events of types `types`, as JSON, in order.
pub(crate) fn only(evs: &[Value], types: &[&str]) -> Vec<Value> {
    evs.iter().filter(|e| types.contains(&e["type"].as_str().unwrap_or(""))).cloned().collect()
}
