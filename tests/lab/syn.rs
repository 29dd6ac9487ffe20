//! SYN scans of the lab: raw frames out of the scanner namespace, captures
//! on the target side to check what went over the wire.

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::util::{
    bin, events, excluded_addresses_get_no_syn, in_lab, lab, lab_ports, lab_scan, of_type, open_ports, stderr, stdout,
    wait_for_events, Capture, TARGET,
};

#[test]
fn ten_full_scans_in_a_row_find_exactly_the_four_ports() {
    let _lab = lab();
    for run in 0..10 {
        let (out, evs) = lab_scan(&["-sS", "-n", "-p-", TARGET]);
        assert_eq!(out.status.code(), Some(0), "run {run}: {}", stderr(&out));
        assert_eq!(evs[0]["scan_type"], "syn", "run {run}");
        assert_eq!(open_ports(&evs), lab_ports(TARGET), "run {run}");
        let end = evs.last().unwrap();
        assert_eq!(end["closed"], 65531, "run {run}: {end}");
        assert_eq!(end["probes_sent"], 65535, "run {run}: nothing lost, nothing retransmitted: {end}");
        for p in of_type(&evs, "port") {
            assert_eq!(p["reason"], "syn-ack");
            assert_eq!(p["ttl"], 64);
        }
    }
}

#[test]
fn sweep_of_65536_hosts_finds_at_least_99_99_percent() {
    let _lab = lab();
    let (out, evs) = lab_scan(&["-sS", "-n", "-p", "80", "198.19.0.0/16"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let found = open_ports(&evs);
    assert!(found.len() >= 65_530, "found {} of 65536", found.len());
    let mut unique = found.clone();
    unique.dedup();
    assert_eq!(unique.len(), found.len(), "a host reported twice");
}

#[test]
fn ipv6_targets_take_the_same_path() {
    let _lab = lab();
    let (out, evs) = lab_scan(&["-sS", "-n", "-p", "1-10000", "2001:2::2"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(evs[0]["scan_type"], "syn");
    assert_eq!(open_ports(&evs), lab_ports("2001:2::2"));
    assert_eq!(evs.last().unwrap()["closed"], 9996);
}

#[test]
fn excluded_addresses_never_receive_a_syn() {
    let _lab = lab();
    excluded_addresses_get_no_syn("-sS");
}

/// --scan-delay: probes to one host at least that far apart, in both
/// engines (tcpdump's timestamps on the target side).
#[test]
fn scan_delay_spaces_the_probes_to_a_host() {
    let _lab = lab();
    for kind in ["-sS", "-sT"] {
        let cap = Capture::start("dst host 198.18.0.2 and dst portrange 20-25");
        let (out, _) = lab_scan(&[kind, "-n", "--scan-delay", "200ms", "-p", "20,21,23,24,25", TARGET]);
        let syns = cap.stop_with_ports();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(syns.len(), 5, "{kind}: one SYN per closed port: {syns:?}");
        for w in syns.windows(2) {
            assert!(w[1].0 - w[0].0 >= 0.19, "{kind}: {syns:?}");
        }
    }
}

#[test]
fn excluded_ports_get_no_syn() {
    let _lab = lab();
    let cap = Capture::start("dst host 198.18.0.2 and dst portrange 20-30");
    let (out, evs) = lab_scan(&["-sS", "-n", "-p", "20-30", "--exclude-ports", "22-25", TARGET]);
    let syns = cap.stop_with_ports();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let mut ports: Vec<u16> = syns.iter().map(|s| s.2).collect();
    ports.sort();
    // Closed ports answer RST at once: one SYN each, and none to 22-25.
    assert_eq!(ports, [20, 21, 26, 27, 28, 29, 30]);
    assert!(open_ports(&evs).is_empty(), "22 (open) was excluded");
}

#[test]
fn max_rate_holds_on_the_wire() {
    let _lab = lab();
    let cap = Capture::start("dst host 198.18.0.2 and dst portrange 30000-33999");
    let (out, evs) = lab_scan(&["-sS", "-n", "-p", "30000-33999", "--max-rate", "2000", TARGET]);
    let syns = cap.stop();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(evs.last().unwrap()["probes_sent"], 4000);
    assert_eq!(syns.len(), 4000);
    let rate = (syns.len() - 1) as f64 / (syns[syns.len() - 1].0 - syns[0].0);
    assert!((rate - 2000.0).abs() <= 100.0, "measured {rate:.0} SYN/s on the wire, asked 2000");
}

#[test]
fn closed_ports_are_reported_when_asked() {
    let _lab = lab();
    let (_, evs) = lab_scan(&["-sS", "-n", "-p", "20-25", TARGET]);
    assert_eq!(of_type(&evs, "port").len(), 1, "by default only the open port");
    let (_, evs) = lab_scan(&["-sS", "-n", "-v", "-p", "20-25", TARGET]);
    let ports = of_type(&evs, "port");
    assert_eq!(ports.len(), 6);
    for p in ports {
        let open = p["port"] == 22;
        assert_eq!(p["state"], if open { "open" } else { "closed" }, "{p}");
        assert_eq!(p["reason"], if open { "syn-ack" } else { "reset" }, "{p}");
    }
    let (_, evs) = lab_scan(&["-sS", "-n", "-v", "--open", "-p", "20-25", TARGET]);
    assert_eq!(of_type(&evs, "port").len(), 1, "--open wins over -v");
    let out = in_lab(bin()).args(["-sS", "-n", "--reason", "-p", "22", TARGET]).output().unwrap();
    assert!(stdout(&out).contains("Discovered open port 22/tcp on 198.18.0.2 (syn-ack, ttl 64)"), "{}", stdout(&out));
}

#[test]
fn interface_and_source_can_be_chosen() {
    let _lab = lab();
    let (out, evs) = lab_scan(&["-sS", "-n", "-e", "ms-scan0", "-S", "198.18.0.1", "-p", "22,80,443,6379", TARGET]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(open_ports(&evs), lab_ports(TARGET));
    let (out, _) = lab_scan(&["-sS", "-n", "-e", "no-such-if0", "-p", "22", TARGET]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no-such-if0"), "{}", stderr(&out));
}

#[test]
fn unroutable_targets_are_errors_and_the_rest_completes() {
    let _lab = lab();
    let (out, evs) = lab_scan(&["-sS", "-n", "-p", "22,80,443,6379", TARGET, "198.18.1.5"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(open_ports(&evs), lab_ports(TARGET));
    let errors = of_type(&evs, "error");
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0]["ip"], "198.18.1.5");
}

#[test]
fn without_raw_sockets_it_says_so_and_connect_scans() {
    let _lab = lab();
    let out = in_lab("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", "--"])
        .arg(bin())
        .args(["-n", "-p", "22,80,443,6379", "-oJ", "-", TARGET])
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(err.lines().count(), 1, "one line says why: {err}");
    assert!(err.contains("raw sockets are not available") && err.contains("connect scan"), "{err}");
    let evs = events(&stdout(&out));
    assert_eq!(evs[0]["scan_type"], "connect");
    assert_eq!(open_ports(&evs), lab_ports(TARGET));
}

#[test]
fn interrupt_stops_sending_and_keeps_results() {
    let _lab = lab();
    // The interrupted scan writes its resume file into its working folder.
    let dir = tempfile::tempdir().unwrap();
    let ndjson = dir.path().join("scan.ndjson");
    // -v reports closed ports too, so progress shows in the events.
    let child = in_lab(bin())
        .current_dir(dir.path())
        .args(["-sS", "-n", "-Pn", "-v", "-p-", "--max-rate", "5000", "-oJ", ndjson.to_str().unwrap(), TARGET])
        .stdout(Stdio::null()) // text goes here; unread, a pipe would fill
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    wait_for_events(&ndjson, 5_000, |e| e["type"] == "port", Duration::from_secs(20));
    // `ip netns exec` execs the scanner, so the child's pid is moonscan's.
    let st = std::process::Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(st.success());
    let (t, ran) = (Instant::now(), started.elapsed().as_secs_f64());
    let out = child.wait_with_output().unwrap();
    assert!(t.elapsed() < Duration::from_secs(4), "stops within the probe timeout");
    assert_eq!(out.status.code(), Some(1));
    let evs = events(&std::fs::read_to_string(&ndjson).unwrap());
    let end = evs.last().unwrap();
    assert_eq!(end["interrupted"], true);
    let sent = end["probes_sent"].as_u64().unwrap();
    // At least what was seen answered, well short of the whole range, and
    // no faster than --max-rate (with a second of slack for the ending).
    assert!((5_000..65_535).contains(&sent), "{sent} probes sent");
    assert!(sent as f64 <= 5000.0 * (ran + 1.0), "{sent} probes in {ran:.1} s at 5000/s");
    assert_eq!(end["closed"].as_u64().unwrap() + end["open"].as_u64().unwrap(), sent, "every probe sent was answered");
    assert!(dir.path().join("moonscan.resume").exists(), "an interrupted scan leaves a resume file");
}

/// ARP/NDP for on-link targets is capped: 2001:2::/112 (65,536 addresses
/// of the on-link 2001:2::/64) is over the cap, so the scan is refused
/// (exit 2) before any SYN is sent.
#[test]
fn too_many_on_link_targets_are_refused_before_sending() {
    let _lab = lab();
    let cap = Capture::packets("ip6 and tcp");
    let (out, evs) = lab_scan(&["-sS", "-n", "-e", "ms-scan0", "-p", "80", "2001:2::/112"]);
    let syns = cap.stop();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("on-link targets"), "{}", stderr(&out));
    assert!(evs.is_empty(), "nothing scanned: {evs:?}");
    assert!(syns.is_empty(), "no SYN left: {syns:?}");
}
