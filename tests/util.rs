//! Helpers shared by the integration tests: run moonscan, parse its events,
//! bring the lab up once and take turns using it.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

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
    // Not the repository: files a scan leaves (a resume file) go to /tmp.
    cmd.args(["netns", "exec", "msscan"]).arg(program.as_ref()).stdin(Stdio::null()).current_dir(std::env::temp_dir());
    cmd
}

/// Runs moonscan in the scanner namespace with NDJSON on stdout.
pub fn lab_scan(args: &[&str]) -> (Output, Vec<Value>) {
    let out = in_lab(bin()).args(args).args(["-oJ", "-"]).output().expect("moonscan runs in the lab");
    let evs = events(&stdout(&out));
    (out, evs)
}

/// The lab's target host and its four services.
pub const TARGET: &str = "198.18.0.2";

pub fn lab_ports(ip: &str) -> Vec<(String, u16)> {
    [22, 80, 443, 6379].iter().map(|&p| (ip.to_string(), p)).collect()
}

/// A tcpdump on the target side, printing one line per SYN it sees.
pub struct Capture {
    child: Child,
    lines: tempfile::NamedTempFile,
}

impl Capture {
    /// SYNs (without ACK) that match `filter`.
    pub fn start(filter: &str) -> Capture {
        Capture::packets(&format!("tcp[tcpflags] & tcp-syn != 0 and tcp[tcpflags] & tcp-ack == 0 and ({filter})"))
    }

    /// Every packet that matches the pcap `filter`.
    pub fn packets(filter: &str) -> Capture {
        // To a file, not a pipe: a full pipe would stall tcpdump and drop packets.
        let lines = tempfile::NamedTempFile::new().unwrap();
        let mut child = Command::new("ip")
            .args(["netns", "exec", "mstarget", "tcpdump", "-i", "ms-tgt0", "-nn", "-l", "-tt", "-q"])
            .arg(filter)
            .stdin(Stdio::null())
            .stdout(lines.reopen().unwrap())
            .stderr(Stdio::piped())
            .spawn()
            .expect("tcpdump runs (scripts/lab.sh installs it)");
        // Wait until it is really capturing.
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        while err.read_line(&mut line).unwrap_or(0) > 0 && !line.contains("listening on") {
            line.clear();
        }
        assert!(line.contains("listening on"), "tcpdump did not start: {line}");
        Capture { child, lines }
    }

    /// Stops the capture; returns (timestamp, destination address) per packet.
    pub fn stop(self) -> Vec<(f64, String)> {
        self.stop_with_ports().into_iter().map(|(t, ip, _)| (t, ip)).collect()
    }

    /// Stops the capture; returns tcpdump's line for each packet.
    pub fn stop_lines(mut self) -> Vec<String> {
        std::thread::sleep(Duration::from_millis(300));
        let _ = Command::new("kill").args(["-INT", &self.child.id().to_string()]).status();
        let st = self.child.wait().unwrap();
        assert!(st.success() || st.code().is_none(), "tcpdump failed: {st}");
        std::fs::read_to_string(self.lines.path()).unwrap().lines().map(str::to_string).collect()
    }

    /// Stops the capture; returns (timestamp, destination address, port) per packet.
    pub fn stop_with_ports(self) -> Vec<(f64, String, u16)> {
        self.stop_lines()
            .iter()
            .filter_map(|l| {
                // "1700000000.123456 IP 198.18.0.1.40000 > 198.19.0.5.80: tcp 0"
                let mut w = l.split_whitespace();
                let t: f64 = w.next()?.parse().ok()?;
                let dst = w.nth(3)?.trim_end_matches(':');
                let (ip, port) = dst.rsplit_once('.')?;
                Some((t, ip.to_string(), port.parse().ok()?))
            })
            .collect()
    }
}

/// Scans 198.19.0.0/28 on two ports with four addresses excluded, capturing
/// on the target side: the excluded ones get no SYN, every other one two.
pub fn excluded_addresses_get_no_syn(scan_type: &str) {
    let cap = Capture::start("dst net 198.19.0.0/28");
    let (out, evs) =
        lab_scan(&[scan_type, "-n", "-Pn", "-p", "80,81", "198.19.0.0/28", "--exclude", "198.19.0.5,198.19.0.8-10"]);
    let syns = cap.stop();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let mut per_host: std::collections::BTreeMap<String, usize> = Default::default();
    for (_, ip) in &syns {
        *per_host.entry(ip.clone()).or_default() += 1;
    }
    for banned in ["198.19.0.5", "198.19.0.8", "198.19.0.9", "198.19.0.10"] {
        assert!(!per_host.contains_key(banned), "excluded {banned} was probed: {per_host:?}");
    }
    // The capture works: every other address got its two SYNs, no retransmissions.
    assert_eq!(per_host.len(), 12, "{per_host:?}");
    assert!(per_host.values().all(|&n| n == 2), "{per_host:?}");
    assert_eq!(open_ports(&evs).len(), 12, "port 80 is open on every included address");
}

/// Runs `f` on a thread moved into the lab's scanner namespace (setns(2)
/// moves only the calling thread), and fails if it fails.
pub fn in_lab_thread(f: impl FnOnce() + Send + 'static) {
    std::thread::spawn(move || {
        use std::os::fd::AsRawFd;
        let ns = std::fs::File::open("/run/netns/msscan").expect("the lab's scanner namespace");
        // SAFETY: setns on a valid namespace fd affects only this thread.
        let rc = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
        f();
    })
    .join()
    .expect("the check passes in the lab");
}

/// Waits until the NDJSON file at `path` holds at least `n` events that
/// `pred` accepts (whole lines only: a scan writes lines whole), instead of
/// sleeping and hoping; panics after `timeout`. Returns the events so far.
pub fn wait_for_events(path: &Path, n: usize, pred: impl Fn(&Value) -> bool, timeout: Duration) -> Vec<Value> {
    let until = std::time::Instant::now() + timeout;
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        // The last line may still be being written.
        let complete = text.rfind('\n').map_or("", |i| &text[..i]);
        let evs: Vec<Value> = complete.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
        if evs.iter().filter(|e| pred(e)).count() >= n {
            return evs;
        }
        assert!(
            std::time::Instant::now() < until,
            "{} never held {n} such events ({} events)",
            path.display(),
            evs.len()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
