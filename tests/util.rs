//! Helpers shared by the integration tests: run moonscan, parse its events,
//! bring the lab up once and take turns using it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};

use serde_json::Value;

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_moonscan")
}

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A moonscan command in a fresh temporary directory (kept alive by the guard).
pub fn moonscan() -> (Command, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut cmd = Command::new(bin());
    cmd.current_dir(dir.path()).stdin(Stdio::null());
    (cmd, dir)
}

/// Runs moonscan with `args` and returns its output.
pub fn run(args: &[&str]) -> Output {
    let (mut cmd, _dir) = moonscan();
    cmd.args(args).output().expect("moonscan runs")
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Parses NDJSON, one event a line, panicking on a malformed line.
pub fn events(text: &str) -> Vec<Value> {
    text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad NDJSON line {l:?}: {e}"))).collect()
}

/// The `(ip, port)` of every open-port event.
pub fn open_ports(evs: &[Value]) -> Vec<(String, u16)> {
    let mut v: Vec<(String, u16)> = evs
        .iter()
        .filter(|e| e["type"] == "port" && e["state"] == "open")
        .map(|e| (e["ip"].as_str().unwrap().to_string(), e["port"].as_u64().unwrap() as u16))
        .collect();
    v.sort();
    v
}

pub fn of_type<'a>(evs: &'a [Value], t: &str) -> Vec<&'a Value> {
    evs.iter().filter(|e| e["type"] == t).collect()
}

/// Exclusive use of the lab, after making sure it is up.
pub fn lab() -> MutexGuard<'static, ()> {
    static UP: OnceLock<()> = OnceLock::new();
    static TURN: Mutex<()> = Mutex::new(());
    UP.get_or_init(|| {
        // SAFETY-free check of effective uid via the `id` command keeps tests portable.
        let uid = Command::new("id").arg("-u").output().expect("id runs");
        assert_eq!(
            String::from_utf8_lossy(&uid.stdout).trim(),
            "0",
            "the lab tests need root (network namespaces); run scripts/test.sh as root"
        );
        let st =
            Command::new("bash").arg(repo().join("scripts/lab.sh")).arg("up").status().expect("scripts/lab.sh runs");
        assert!(st.success(), "scripts/lab.sh up failed");
    });
    TURN.lock().unwrap_or_else(|p| p.into_inner())
}

/// A command run inside the lab's scanner namespace.
pub fn in_lab(program: impl AsRef<Path>) -> Command {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", "msscan"]).arg(program.as_ref()).stdin(Stdio::null());
    cmd
}

/// Runs moonscan in the scanner namespace with NDJSON on stdout.
pub fn lab_scan(args: &[&str]) -> (Output, Vec<Value>) {
    let out = in_lab(bin()).args(args).args(["-oJ", "-"]).output().expect("moonscan runs in the lab");
    let evs = events(&stdout(&out));
    (out, evs)
}
