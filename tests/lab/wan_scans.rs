//! Scans across the lab's WAN (`scripts/lab.sh wan up`): congestion
//! control finds the rate a path of latency, loss and a bottleneck
//! carries, and the results are those of a clean path. Each test holds
//! the lab, brings the WAN up with its own settings and takes it down.

use serde_json::Value;
use std::time::Instant;

use crate::util::{lab, lab_scan, of_type, open_ports, stderr};
use crate::wan::Wan;

const WAN_TARGET: &str = "198.18.4.2";

/// The WAN target's open TCP ports (scripts/lab-wan.sh): 22, 80 and 87
/// ports from 14, 751 apart.
fn wan_tcp_ports() -> Vec<(String, u16)> {
    let mut ports: Vec<u16> = [22, 80].into_iter().chain((0..87).map(|i| 14 + 751 * i)).collect();
    ports.sort_unstable();
    ports.into_iter().map(|p| (WAN_TARGET.to_string(), p)).collect()
}

fn scan_end(evs: &[Value]) -> &Value {
    evs.last().filter(|e| e["type"] == "scan_end").expect("the scan ends with scan_end")
}

/// 50 ms ± 10 each way, 1 % loss each way, a 10,000 frames/s bottleneck
/// with a 500-frame queue (the path): every open port of 65,535,
/// within twice the path's own limit (65,535 probes / 10,000 per second),
/// with the slowdowns said in `timing` events and `scan_end`.
#[test]
fn a_full_scan_across_a_bottleneck_finds_every_open_port_at_the_paths_pace() {
    let _lab = lab();
    let _wan = Wan::up(&[]);
    let t = Instant::now();
    let (out, evs) = lab_scan(&["-sS", "-n", "-Pn", "-p-", WAN_TARGET]);
    let took = t.elapsed().as_secs_f64();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(open_ports(&evs), wan_tcp_ports(), "every open port, none else");
    assert!(took < 2.0 * 65_535.0 / 10_000.0, "{took:.1} s: more than twice the path's limit");
    let end = scan_end(&evs);
    assert!(end["slowdowns"].as_u64().unwrap_or(0) >= 1, "the path made it slow down: {end}");
    assert!(end["slowed"].as_str().is_some_and(|s| s.contains("probes/s")), "{end}");
    let timing = of_type(&evs, "timing");
    assert!(timing.iter().any(|e| e["slowdown"].is_string()), "a timing event says why it slowed down");
    let paced: Vec<f64> = timing.iter().filter_map(|e| e["rate"].as_f64()).collect();
    assert!(!paced.is_empty() && paced.iter().all(|&r| r < 40_000.0), "paced near the path's 10,000/s: {paced:?}");
    let rtt = timing.iter().rev().find_map(|e| e["rtt"].as_f64()).expect("a round trip estimate");
    assert!((0.04..0.2).contains(&rtt), "round trip {rtt} s on a 50 ms path");
}

/// The connect scan across the same path keeps to its pace too: -T5
/// (8,192 connects at once, no retries) found 23 to 35 of the 89 open
/// ports before it was paced; now every one, and says it slowed down.
#[test]
fn a_connect_scan_across_a_bottleneck_finds_every_open_port() {
    let _lab = lab();
    let _wan = Wan::up(&[]);
    let t = Instant::now();
    let (out, evs) = lab_scan(&["-sT", "-T5", "-n", "-Pn", "-p-", WAN_TARGET]);
    let took = t.elapsed().as_secs_f64();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(open_ports(&evs), wan_tcp_ports(), "every open port, none else");
    assert!(took < 3.0 * 65_535.0 / 10_000.0, "{took:.1} s: more than three times the path's limit");
    let end = scan_end(&evs);
    assert!(end["slowdowns"].as_u64().unwrap_or(0) >= 1, "the path made it slow down: {end}");
    let paced: Vec<f64> = of_type(&evs, "timing").iter().filter_map(|e| e["rate"].as_f64()).collect();
    assert!(!paced.is_empty(), "timing events tell the connect scan's pace");
}

/// A SYN sweep of 65,536 live hosts behind the same bottleneck: at least
/// 99.9 % of them.
#[test]
fn a_sweep_behind_a_bottleneck_finds_nearly_every_host() {
    let _lab = lab();
    let _wan = Wan::up(&["--sweep"]);
    let (out, evs) = lab_scan(&["-sS", "-n", "-Pn", "-p", "80", "198.19.0.0/16"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let found = open_ports(&evs).len();
    assert!(found >= 65_471, "found {found} of 65,536 hosts (99.9 % is 65,471)");
}

/// A host that limits its ICMP errors as Linux does by default (the WAN
/// target keeps the kernel's limits): every closed UDP port is told
/// closed, where a scan at full speed sees the first six only.
#[test]
fn udp_closed_ports_of_a_rate_limited_host_are_all_told() {
    let _lab = lab();
    let _wan = Wan::up(&["--rtt", "20", "--jitter", "2", "--loss", "0", "--rate", "0"]);
    let (out, evs) = lab_scan(&["-sU", "-n", "-Pn", "-p", "1-25", WAN_TARGET]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let end = scan_end(&evs);
    // 25 ports: echo on 7 answers, the other 24 are closed.
    assert_eq!(end["closed"], 24, "{end}");
    assert_eq!(end["open"], 1, "{end}");
    // 18 errors past the burst of six, a little over a second each.
    let took = end["elapsed"].as_f64().unwrap();
    assert!(took < 35.0, "{took:.1} s");
}

/// -sV -sC across a lossy, slow path names and reports what a clean path
/// does.
#[test]
fn service_detection_and_scripts_across_the_wan_match_a_clean_path() {
    let _lab = lab();
    let args = ["-sS", "-sV", "-sC", "-n", "-Pn", "-p", "22,80,14,765", WAN_TARGET];
    let seen = |evs: &[Value]| {
        let mut services: Vec<String> = of_type(evs, "service")
            .iter()
            .map(|s| format!("{} {} {} {}", s["port"], s["service"], s["product"], s["version"]))
            .collect();
        services.sort();
        let mut findings: Vec<String> =
            of_type(evs, "finding").iter().map(|f| format!("{} {} {}", f["port"], f["plugin"], f["title"])).collect();
        findings.sort();
        // Script results by plugin (their text may hold what changes from run to run).
        let mut scripts: Vec<String> =
            of_type(evs, "script").iter().map(|r| format!("{} {}", r["port"], r["plugin"])).collect();
        scripts.sort();
        (open_ports(evs), services, findings, scripts)
    };
    let wan = Wan::up(&["--rtt", "0", "--jitter", "0", "--loss", "0", "--rate", "0"]);
    let (out, clean) = lab_scan(&args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    wan.again(&["--rtt", "80", "--jitter", "10", "--loss", "2", "--rate", "2000", "--queue", "100"]);
    let (out, lossy) = lab_scan(&args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (clean, lossy) = (seen(&clean), seen(&lossy));
    assert_eq!(clean.0.len(), 4, "{clean:?}");
    assert!(!clean.1.is_empty() && !clean.3.is_empty(), "{clean:?}");
    assert_eq!(lossy, clean);
}

/// A rate limit of one host's own, as firewalls set them: nftables in
/// mstarget drops SYNs to 198.18.0.7 beyond 3,000 a second (a burst of
/// 100), for as long as this guard lives. A policer queues nothing, so
/// round trips never grow: only the answers that go missing show it.
struct Policer;

impl Policer {
    const HOST: &'static str = "198.18.0.7";
    const RATE: f64 = 3_000.0;

    fn up() -> Policer {
        use std::io::Write;
        let rules = format!(
            "table ip mspolice {{\n chain in {{\n  type filter hook input priority -10;\n  \
             ip daddr {} tcp flags syn limit rate over {}/second burst 100 packets drop\n }}\n}}\n",
            Self::HOST,
            Self::RATE
        );
        let mut nft = std::process::Command::new("ip")
            .args(["netns", "exec", "mstarget", "nft", "-f", "-"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .expect("nft runs");
        nft.stdin.take().expect("a pipe").write_all(rules.as_bytes()).expect("nft reads its rules");
        assert!(nft.wait().expect("nft ends").success(), "the policer's rule is set: {rules}");
        Policer
    }
}

impl Drop for Policer {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["netns", "exec", "mstarget", "nft", "delete table ip mspolice"])
            .status();
    }
}

/// `-sS -p-` of a host behind a policer: every port told as it is (nmap
/// -T4 gives 4 open and 65,531 closed here, in 35 s), none called filtered
/// for a probe the policer dropped, within twice the policer's own limit
/// (65,535 / 3,000 per second), and not by sending everything many times.
/// The answers that went missing drag no baseline down: before, the
/// pace sank its baseline with them, ran at twice the limit and called
/// 292 closed ports filtered.
#[test]
fn a_host_behind_a_policer_is_scanned_at_its_limit_with_nothing_lost() {
    let _lab = lab();
    let _police = Policer::up();
    let t = Instant::now();
    let (out, evs) = lab_scan(&["-sS", "-n", "-Pn", "-p-", Policer::HOST]);
    let took = t.elapsed().as_secs_f64();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let open: Vec<u16> = open_ports(&evs).into_iter().map(|p| p.1).collect();
    assert_eq!(open, [22, 80, 443, 6379]);
    let end = scan_end(&evs);
    // Retries aim at fewer than one answering port in 10,000 missing
    // every try: at most 6 of 65,535 (0 or 1 in this lab's runs).
    let filtered = end["filtered"].as_u64().unwrap_or(u64::MAX);
    assert!(filtered <= 6, "a dropped probe's silence believed: {end}");
    assert_eq!(end["closed"].as_u64(), Some(65_531 - filtered), "{end}");
    assert!(took < 2.0 * 65_535.0 / Policer::RATE, "{took:.1} s: more than twice the policer's limit");
    let sent = end["probes_sent"].as_u64().unwrap_or(0);
    assert!(sent < 100_000, "{sent} probes for 65,535 ports: paced near the limit, not far over it");
    assert!(end["slowdowns"].as_u64().unwrap_or(0) >= 1, "{end}");
}

/// A scan of three hosts, one of them behind the policer: that host
/// loses far more of its tries than the others, so its probes get a
/// pace of their own (a gate, said in a `timing` event) inside the
/// scan's; every port of every host is told as it is, within twice the
/// policed host's own time. Before, the scan's pace hardly moved for a
/// third of its probes being dropped: 24,562 of the policed host's
/// closed ports were called filtered (13.7 s).
#[test]
fn a_policed_host_among_clean_ones_gets_a_pace_of_its_own() {
    let _lab = lab();
    let _police = Policer::up();
    let t = Instant::now();
    let (out, evs) = lab_scan(&["-sS", "-n", "-Pn", "-p-", "198.18.0.2", "198.18.0.3", Policer::HOST]);
    let took = t.elapsed().as_secs_f64();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let policed: Vec<u16> = open_ports(&evs).into_iter().filter(|p| p.0 == Policer::HOST).map(|p| p.1).collect();
    assert_eq!(policed, [22, 80, 443, 6379]);
    let end = scan_end(&evs);
    let filtered = end["filtered"].as_u64().unwrap_or(u64::MAX);
    assert!(filtered <= 6, "dropped probes' silence believed: {end}");
    let told = end["open"].as_u64().unwrap_or(0) + end["closed"].as_u64().unwrap_or(0) + filtered;
    assert_eq!(told, 3 * 65_535, "{end}");
    let timing = of_type(&evs, "timing");
    let gated = timing
        .iter()
        .filter_map(|e| e["slowdown"].as_str())
        .any(|s| s.contains(Policer::HOST) && s.contains("a limit of its own"));
    assert!(gated, "a timing event says the policed host got a pace of its own");
    assert!(took < 2.0 * 65_535.0 / Policer::RATE, "{took:.1} s: more than twice the policed host's limit");
}
