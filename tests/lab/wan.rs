//! The lab's WAN (`scripts/lab.sh wan`, tests/wan-forwarder): between
//! msscan and 198.18.4.2 a path of the latency, loss, bottleneck rate and
//! queue each test sets, checked from the scanner's side with TCP connects
//! and UDP echoes. Each test takes the WAN down again when it ends.

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::util::{in_lab_thread, lab, repo};

const WAN_TARGET: &str = "198.18.4.2";

fn lab_sh(args: &[&str]) -> std::process::Output {
    Command::new("bash").arg(repo().join("scripts/lab.sh")).args(args).output().expect("scripts/lab.sh runs")
}

/// The WAN, up with `args` while this lives.
pub struct Wan;

impl Wan {
    pub fn up(args: &[&str]) -> Wan {
        let wan = Wan;
        wan.again(args);
        wan
    }

    /// `wan up` again, with other settings (no `wan down` between).
    pub fn again(&self, args: &[&str]) {
        let out = lab_sh(&[&["wan", "up"], args].concat());
        assert!(out.status.success(), "lab.sh wan up {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// The forwarder's counters per direction ("ms-wana>ms-wanb": to the
    /// target, "ms-wanb>ms-wana": back).
    fn counters(&self) -> BTreeMap<String, BTreeMap<String, u64>> {
        let out = lab_sh(&["wan", "status"]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let mut dirs = BTreeMap::new();
        for line in text.lines().filter(|l| l.contains(" report ")) {
            let mut words = line.split_whitespace().skip(3);
            let dir = words.next().unwrap_or_default().to_string();
            let kv = words.filter_map(|w| w.split_once('=')).map(|(k, v)| (k.to_string(), v.parse().unwrap_or(0)));
            dirs.insert(dir, kv.collect());
        }
        assert_eq!(dirs.len(), 2, "no counters in lab.sh wan status: {text}");
        dirs
    }
}

impl Drop for Wan {
    fn drop(&mut self) {
        let out = lab_sh(&["wan", "down"]);
        if !out.status.success() {
            eprintln!("lab.sh wan down: {}", String::from_utf8_lossy(&out.stderr));
        }
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// TCP connect times (one round trip each) to the target's sshd, ms.
fn connect_times(n: usize) -> Vec<f64> {
    let (tx, rx) = std::sync::mpsc::channel();
    in_lab_thread(move || {
        let addr: SocketAddr = format!("{WAN_TARGET}:22").parse().unwrap();
        let mut ms = Vec::new();
        for _ in 0..n {
            let t = Instant::now();
            // A lost SYN or SYN-ACK costs a 1 s retransmission: only with loss set.
            let s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect across the WAN");
            ms.push(t.elapsed().as_secs_f64() * 1000.0);
            drop(s);
        }
        tx.send(ms).unwrap();
    });
    rx.recv().unwrap()
}

/// Sends `n` numbered datagrams to the target's UDP echo (port 7), one
/// every `gap`, then waits `linger` for the last echoes. Returns the round
/// trip of each that came back (ms) and when each echo arrived.
fn echoes(n: u32, gap: Duration, linger: Duration) -> (Vec<f64>, Vec<Instant>) {
    let (tx, rx) = std::sync::mpsc::channel();
    in_lab_thread(move || {
        let s = UdpSocket::bind("198.18.4.1:0").unwrap();
        s.connect(format!("{WAN_TARGET}:7")).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(5))).unwrap();
        let mut sent = vec![None; n as usize];
        let (mut rtts, mut arrivals) = (Vec::new(), Vec::new());
        let mut buf = [0u8; 64];
        let mut receive = |sent: &[Option<Instant>], rtts: &mut Vec<f64>, arrivals: &mut Vec<Instant>| {
            while let Ok(len) = s.recv(&mut buf) {
                let now = Instant::now();
                let i = u32::from_be_bytes(buf[..4].try_into().unwrap()) as usize;
                if len >= 4 && i < sent.len() {
                    if let Some(t) = sent[i] {
                        rtts.push((now - t).as_secs_f64() * 1000.0);
                        arrivals.push(now);
                    }
                }
            }
        };
        for i in 0..n {
            sent[i as usize] = Some(Instant::now());
            // ENOBUFS on a burst is the sender's own queue: retry once.
            if s.send(&i.to_be_bytes()).is_err() {
                std::thread::sleep(Duration::from_micros(200));
                let _ = s.send(&i.to_be_bytes());
            }
            if !gap.is_zero() {
                std::thread::sleep(gap);
                s.set_read_timeout(Some(Duration::from_micros(100))).unwrap();
                receive(&sent, &mut rtts, &mut arrivals);
            }
        }
        let end = Instant::now() + linger;
        s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        while Instant::now() < end {
            receive(&sent, &mut rtts, &mut arrivals);
        }
        tx.send((rtts, arrivals)).unwrap();
    });
    rx.recv().unwrap()
}

/// The RTT is what `--rtt` says (the jitter averages out in the median),
/// TCP handshakes complete (every forwarded frame's checksums are whole),
/// and a second `wan up` replaces the settings.
#[test]
fn wan_round_trip_time_is_what_was_set_and_wan_up_again_replaces_it() {
    let _lab = lab();
    let wan = Wan::up(&["--rtt", "100", "--loss", "0", "--rate", "100000"]);
    let tcp = connect_times(20);
    let (udp, _) = echoes(20, Duration::from_millis(20), Duration::from_millis(500));
    assert_eq!(udp.len(), 20, "no loss set, yet echoes were lost: {udp:?}");
    for (what, ms) in [("TCP connect", &tcp), ("UDP echo", &udp)] {
        let m = median(ms.clone());
        eprintln!("wan rtt 100: {what} median {m:.1} ms of {}", ms.len());
        assert!((80.0..=120.0).contains(&m), "{what} median {m:.1} ms, not 100 ms +-20 %: {ms:?}");
        // Jitter is +-10 ms each way: no round trip under 80 ms.
        assert!(ms.iter().all(|&t| t >= 79.0), "{what}: a round trip under 100 - 2 x 10 ms: {ms:?}");
    }
    let c = wan.counters();
    for (dir, c) in &c {
        assert_eq!(c["partial_csum"], 0, "{dir}: frames with partial checksums (tx offload on?): {c:?}");
        assert_eq!(c["lost"] + c["queue_dropped"] + c["send_errors"], 0, "{dir}: {c:?}");
    }
    // Again, without a down: the new settings hold.
    wan.again(&["--rtt", "40", "--jitter", "0", "--loss", "0", "--rate", "0"]);
    let m = median(connect_times(10));
    eprintln!("wan rtt 40: median connect {m:.1} ms");
    assert!((32.0..=48.0).contains(&m), "after wan up --rtt 40: median connect {m:.1} ms");
}

/// With 10 % loss each way about 19 % of the round trips are lost, and the
/// forwarder's counters show about 10 % in each direction (400 round trips:
/// the bounds are more than 3 standard deviations away).
#[test]
fn wan_loss_is_about_what_was_set_each_way() {
    let _lab = lab();
    let wan = Wan::up(&["--rtt", "20", "--jitter", "0", "--loss", "10", "--rate", "100000"]);
    let (rtts, _) = echoes(400, Duration::from_millis(2), Duration::from_millis(500));
    let lost = 1.0 - rtts.len() as f64 / 400.0;
    eprintln!("wan loss 10 % each way: {:.1} % of 400 round trips lost", lost * 100.0);
    assert!((0.10..=0.30).contains(&lost), "round trip loss {:.1} %, expected about 19 %", lost * 100.0);
    for (dir, c) in wan.counters() {
        let share = c["lost"] as f64 / c["arrived"].max(1) as f64;
        assert!((0.04..=0.18).contains(&share), "{dir}: {:.1} % lost, expected about 10 %: {c:?}", share * 100.0);
    }
}

/// A burst of 5000 datagrams into a 1000 frames/s bottleneck with a
/// 500-frame queue: the queue takes 500 and tail-drops most of the rest,
/// and what gets through comes out at 1000 frames/s.
#[test]
fn wan_bottleneck_paces_a_burst_and_its_queue_tail_drops() {
    let _lab = lab();
    let wan = Wan::up(&["--rtt", "20", "--jitter", "0", "--loss", "0", "--rate", "1000", "--queue", "500"]);
    let t = Instant::now();
    let (rtts, arrivals) = echoes(5000, Duration::ZERO, Duration::from_millis(1500));
    let burst = t.elapsed().as_secs_f64() - 1.5;
    let n = arrivals.len();
    // The queue's 500 plus what the bottleneck sent while the burst lasted.
    assert!(n >= 450 && (n as f64) <= 550.0 + 1000.0 * burst, "{n} echoes of a {burst:.3} s burst");
    // Past the first fifth: the first echoes wait in the socket while the
    // burst is still being sent, and are read late, all at once.
    let first = n / 5;
    let span = (arrivals[n - 1] - arrivals[first]).as_secs_f64();
    let rate = (n - 1 - first) as f64 / span;
    eprintln!("wan rate 1000: {n} echoes of a {burst:.3} s burst, {rate:.0}/s");
    assert!((900.0..=1100.0).contains(&rate), "{n} echoes in {span:.3} s: {rate:.0}/s, not 1000/s");
    // The last of the queue waited about 500 frames / 1000/s = 0.5 s.
    let worst = rtts.iter().copied().fold(0.0, f64::max);
    assert!((400.0..=700.0).contains(&worst), "longest round trip {worst:.0} ms");
    let c = wan.counters();
    let to = &c["ms-wana>ms-wanb"];
    assert_eq!(to["arrived"], 5000, "{to:?}");
    assert_eq!(to["queue_dropped"] + to["forwarded"] + to["held"], 5000, "{to:?}");
    assert!(to["queue_dropped"] >= 4000, "{to:?}");
}

/// Bad settings are refused before anything is touched.
#[test]
fn wan_up_refuses_bad_settings() {
    let _lab = lab();
    let wan_was_up = std::path::Path::new("/run/netns/mswan").exists();
    for (args, says) in [
        (&["--rtt", "50", "--jitter", "30"][..], "jitter"),
        (&["--loss", "101"][..], "--loss"),
        (&["--queue", "0"][..], "--queue"),
        (&["--rate", "fast"][..], "a number expected"),
        (&["--bogus", "1"][..], "unknown option"),
    ] {
        let out = lab_sh(&[&["wan", "up"], args].concat());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(says), "wan up {args:?}: {err}");
    }
    assert_eq!(std::path::Path::new("/run/netns/mswan").exists(), wan_was_up, "a refused wan up touched the WAN");
}

/// What `ip -n msscan` says of its routes and addresses, without the
/// WAN's own veth (ms-wan0) and /24.
fn scanner_side() -> String {
    let mut text = String::new();
    for what in [&["route"][..], &["-br", "addr"][..], &["-6", "route"][..]] {
        let out = Command::new("ip").args(["-n", "msscan"]).args(what).output().expect("ip runs");
        text += &String::from_utf8_lossy(&out.stdout);
    }
    text.lines().filter(|l| !l.contains("198.18.4.") && !l.contains("ms-wan0")).collect::<Vec<_>>().join("\n")
}

/// `wan up` adds to msscan only its own veth and /24 (the lab's routes and
/// targets stay as they were), and `wan down` stops the forwarder, which
/// logs its counters as it goes, and leaves msscan as it was.
#[test]
fn wan_up_and_down_leave_the_rest_of_the_lab_as_it_was() {
    let _lab = lab();
    let before = scanner_side();
    let wan = Wan::up(&["--rtt", "10", "--jitter", "0"]);
    assert_eq!(scanner_side(), before, "wan up changed msscan beyond its own /24");
    let route = Command::new("ip").args(["-n", "msscan", "route", "get", "198.18.4.2"]).output().unwrap();
    assert!(String::from_utf8_lossy(&route.stdout).contains("dev ms-wan0"), "198.18.4.2 is not reached over the WAN");
    for (ip, port) in [("198.18.0.2", 22), ("198.18.4.2", 22)] {
        let addr: SocketAddr = format!("{ip}:{port}").parse().unwrap();
        in_lab_thread(move || {
            TcpStream::connect_timeout(&addr, Duration::from_secs(3)).unwrap_or_else(|e| panic!("{addr}: {e}"));
        });
    }
    drop(wan);
    assert_eq!(scanner_side(), before, "wan down left msscan changed");
    let link = Command::new("ip").args(["-n", "msscan", "link", "show", "ms-wan0"]).output().unwrap();
    assert!(!link.status.success(), "ms-wan0 is still in msscan after wan down");
    for ns in ["mswan", "mswantgt"] {
        assert!(!std::path::Path::new("/run/netns").join(ns).exists(), "{ns} is still there after wan down");
    }
    let dir = std::path::Path::new("/run/moonscan-lab/wan");
    assert!(!dir.join("forwarder.pid").exists(), "the forwarder's pid file outlived it");
    let log = std::fs::read_to_string(dir.join("forwarder.log")).expect("the forwarder's log");
    let last: Vec<&str> = log.lines().rev().take(2).collect();
    assert!(last.iter().all(|l| l.contains(" stop ") && l.contains("forwarded=")), "no counters on exit: {last:?}");
}
