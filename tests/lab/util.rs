//! Helpers of the lab tests: check that the lab is up (scripts/lab.sh up,
//! which scripts/test.sh runs first) and take turns using it, run commands
//! in its scanner namespace, capture what reaches the target side. The
//! helpers both harnesses use are tests/util.rs's, re-exported here, so a
//! lab test imports everything from `crate::util`.
//!
//! In: the lab's namespaces and state (/run/netns, /run/moonscan-lab).
//! Out: panics that say what is missing; commands and captures in the lab.
//! What always holds: nothing here installs a package or makes a namespace;
//! without the lab every entry point fails with one line saying so.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use serde_json::Value;

#[path = "../util.rs"]
mod shared;
pub use shared::*;

/// Where scripts/lab.sh keeps the lab's state while it is up.
const STATE: &str = "/run/moonscan-lab";

/// The namespaces `scripts/lab.sh up` makes (`ip netns add` mounts them
/// under /run/netns).
const NAMESPACES: [&str; 3] = ["msscan", "mstarget", "msrate"];

/// Fails the calling test unless the lab is up and this process may use it
/// (root). Never brings the lab up: scripts/test.sh does, before it runs this
/// harness. Checked once; every later call gives the same answer.
pub fn lab_is_up() {
    static UP: OnceLock<Result<(), String>> = OnceLock::new();
    let up = UP.get_or_init(|| {
        let missing: Vec<&str> =
            NAMESPACES.iter().copied().filter(|ns| !Path::new("/run/netns").join(ns).exists()).collect();
        if !missing.is_empty() || !Path::new(STATE).is_dir() {
            return Err(format!(
                "the lab is not up: run scripts/lab.sh up (as root), or scripts/test.sh, which brings it up and \
                 runs every test (missing: {})",
                if missing.is_empty() { STATE.to_string() } else { format!("namespace {}", missing.join(", ")) }
            ));
        }
        // Effective uid via the `id` command keeps the tests free of unsafe.
        let uid = Command::new("id").arg("-u").output().expect("id runs");
        if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
            return Err("the lab tests need root (network namespaces): run them as root".to_string());
        }
        Ok(())
    });
    if let Err(why) = up {
        panic!("{why}");
    }
}

/// Exclusive use of the lab, once [`lab_is_up`] says it is up.
pub fn lab() -> MutexGuard<'static, ()> {
    static TURN: Mutex<()> = Mutex::new(());
    lab_is_up();
    TURN.lock().unwrap_or_else(|p| p.into_inner())
}

/// A command run inside the lab's scanner namespace.
pub fn in_lab(program: impl AsRef<Path>) -> Command {
    lab_is_up();
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

/// Where [`Capture`]'s end marker goes: the limited broadcast, sent from
/// the scanner's address on ms-scan0. It needs no neighbour (no ARP request
/// in a capture of those) and nothing answers it.
const MARK_FROM: &str = "198.18.0.1";
const MARK_TO: &str = "255.255.255.255";
const MARK_PORT: u16 = 9;

/// A tcpdump on the target side, printing one line per packet it sees.
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
        lab_is_up();
        // To a file, not a pipe: a full pipe would stall tcpdump and drop packets.
        let lines = tempfile::NamedTempFile::new().unwrap();
        // Also the end marker `stop_lines` sends (and leaves out).
        let marked =
            format!("({filter}) or (udp and src host {MARK_FROM} and dst host {MARK_TO} and dst port {MARK_PORT})");
        let mut child = Command::new("ip")
            .args(["netns", "exec", "mstarget", "tcpdump", "-i", "ms-tgt0", "-nn", "-l", "-tt", "-q"])
            .arg(marked)
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
    ///
    /// Packets still in flight, or in tcpdump's buffer, when the scan ends
    /// are waited for: a marker datagram sent now from the scanner's side
    /// takes the same link after them, and once tcpdump has written the
    /// marker it has written every packet before it.
    pub fn stop_lines(mut self) -> Vec<String> {
        let (tx, rx) = std::sync::mpsc::channel();
        in_lab_thread(move || {
            let s = std::net::UdpSocket::bind((MARK_FROM, 0)).expect("a socket on the scanner's address");
            s.set_broadcast(true).unwrap();
            s.send_to(b"moonscan: end of capture", (MARK_TO, MARK_PORT)).expect("the capture's end marker is sent");
            tx.send(s.local_addr().unwrap().port()).unwrap();
        });
        let mark = format!(" {MARK_FROM}.{} > {MARK_TO}.{MARK_PORT}: ", rx.recv().unwrap());
        let read = |path: &Path| std::fs::read_to_string(path).unwrap_or_default();
        let marked = wait_until(Duration::from_secs(10), || read(self.lines.path()).contains(&mark).then_some(()));
        let _ = Command::new("kill").args(["-INT", &self.child.id().to_string()]).status();
        let st = self.child.wait().unwrap();
        assert!(st.success() || st.code().is_none(), "tcpdump failed: {st}");
        assert!(marked.is_some(), "tcpdump never saw the capture's end marker ({mark:?})");
        let end = format!(" > {MARK_TO}.{MARK_PORT}: ");
        read(self.lines.path()).lines().filter(|l| !l.contains(&end)).map(str::to_string).collect()
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
    lab_is_up();
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
