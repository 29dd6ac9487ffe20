//! Helpers both test harnesses use (tests/tests.rs, the hermetic one, and
//! tests/lab/main.rs, the lab's): run moonscan, parse its events, wait for
//! them. The lab's own helpers are in tests/lab/util.rs.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

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

/// Waits for something to happen: calls `poll` until it returns a value,
/// or gives `None` once `timeout` has passed. A short pause between calls
/// keeps a check that reads a file or /proc from spinning; it is a polling
/// interval, not a guess at how long the thing takes: the wait ends as soon
/// as it has happened.
pub fn wait_until<T>(timeout: Duration, mut poll: impl FnMut() -> Option<T>) -> Option<T> {
    let until = Instant::now() + timeout;
    loop {
        if let Some(v) = poll() {
            return Some(v);
        }
        if Instant::now() >= until {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until the NDJSON file at `path` holds at least `n` events that
/// `pred` accepts (whole lines only: a scan writes lines whole), instead of
/// sleeping and hoping; panics after `timeout`. Returns the events so far.
pub fn wait_for_events(path: &Path, n: usize, pred: impl Fn(&Value) -> bool, timeout: Duration) -> Vec<Value> {
    let mut seen = 0;
    let evs = wait_until(timeout, || {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        // The last line may still be being written.
        let complete = text.rfind('\n').map_or("", |i| &text[..i]);
        let evs: Vec<Value> = complete.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
        seen = evs.len();
        (evs.iter().filter(|e| pred(e)).count() >= n).then_some(evs)
    });
    evs.unwrap_or_else(|| panic!("{} never held {n} such events ({seen} events)", path.display()))
}
