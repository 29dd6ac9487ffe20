//! The hardening review's cases against the lab, each run as an attacker
//! would: a plugin whose findings repeat a large string, plugins and
//! portrules stuck in slow host calls (and Ctrl-C while they run), a server
//! that sends terminal escapes, a chain of empty certificates. The cases
//! that need no lab are in tests/hardening.rs; packs and keys in
//! tests/packs.rs.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::service::{Hostile, HOSTILE_IP};
use crate::util::{bin, events, in_lab, lab, lab_scan, of_type, repo, stderr, stdout, wait_until, TARGET};

fn sandbox(name: &str) -> String {
    repo().join("tests/sandbox").join(name).to_string_lossy().into_owned()
}

/// Budget errors of one plugin.
fn budget_messages<'a>(evs: &'a [Value], plugin: &str) -> Vec<&'a str> {
    of_type(evs, "error")
        .into_iter()
        .filter(|e| e["plugin"] == plugin && e["kind"] == "budget")
        .map(|e| e["message"].as_str().unwrap_or(""))
        .collect()
}

/// The CPU time (user and system, in clock ticks of 1/100 s) process `pid`
/// has used so far, from /proc/PID/stat; 0 once it is gone.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // After the command name (in parentheses, which may hold spaces) come
    // the state, then 10 fields before utime and stime.
    let rest = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    rest.split_whitespace().skip(11).take(2).filter_map(|v| v.parse::<u64>().ok()).sum()
}

// Case 1: one 64 KiB string referenced ten thousand times per finding.
#[test]
fn repeated_finding_data_trips_the_output_budget_with_bounded_memory() {
    let _lab = lab();
    let plugins = format!("{},{}", sandbox("finding-bomb.lua"), sandbox("return-bomb.lua"));
    let out = Command::new("ip")
        .args(["netns", "exec", "msscan", "/usr/bin/time", "-f", "maxrss=%M", bin()])
        .args(["-n", "-p", "80,443", "--script", &plugins, "-oJ", "-", TARGET])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = stderr(&out);
    let rss_kb: u64 = err.lines().find_map(|l| l.strip_prefix("maxrss=")).and_then(|v| v.trim().parse().ok()).unwrap();
    let evs = events(&stdout(&out));
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(of_type(&evs, "scan_end").len(), 1, "the scan ends and says so");
    for plugin in ["sandbox-finding-bomb", "sandbox-return-bomb"] {
        let m = budget_messages(&evs, plugin);
        assert_eq!(m.len(), 2, "{plugin}: {m:?}");
        assert!(m.iter().all(|m| m.contains("more than 1048576 bytes of findings")), "{m:?}");
    }
    assert!(of_type(&evs, "finding").iter().all(|f| !f["title"].as_str().unwrap().starts_with("escaped")));
    // The returned bomb is dropped, not made a script result.
    assert!(!of_type(&evs, "script").iter().any(|r| r["plugin"] == "sandbox-return-bomb"), "{evs:?}");
    assert!(rss_kb < 100 * 1024, "peak RSS {rss_kb} kB");
}

// Case 2: a run looping over slow host calls ends at its deadline.
#[test]
fn slow_host_calls_end_at_the_script_timeout() {
    let _lab = lab();
    let started = Instant::now();
    let (out, evs) =
        lab_scan(&["-n", "-p", "80", "--script", &sandbox("slow-calls.lua"), "--script-timeout", "1s", TARGET]);
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(budget_messages(&evs, "sandbox-slow-calls"), ["ran longer than 1000 ms"]);
    assert!(took < Duration::from_secs(2), "a 1 s plugin run took the scan {took:?}");
}

#[test]
fn a_stuck_portrule_is_an_error_event_within_a_second() {
    let _lab = lab();
    let started = Instant::now();
    let (out, evs) = lab_scan(&["-n", "-p", "80", "--script", &sandbox("slow-portrule.lua"), TARGET]);
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(budget_messages(&evs, "sandbox-slow-portrule"), ["portrule ran longer than 1000 ms"]);
    assert!(of_type(&evs, "finding").is_empty());
    assert!(of_type(&evs, "script").is_empty());
    assert!(took < Duration::from_secs(2), "took {took:?}");
}

#[test]
fn ctrl_c_ends_a_scan_of_busy_plugins_within_a_second() {
    let _lab = lab();
    let dir = tempfile::tempdir().unwrap();
    let ndjson = dir.path().join("out.ndjson");
    let mut child = in_lab(bin())
        .args(["-n", "-p", "80,443", "--script", &sandbox("slow-calls.lua"), "--script-timeout", "60s"])
        .args(["--script-parallelism", "2", "-oJ", ndjson.to_str().unwrap(), TARGET])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Both ports found, so both runs are starting; then in their slow calls
    // once the scan has burnt 0.2 s of CPU time more (the loops are busy).
    let open = |e: &Value| e["type"] == "port" && e["state"] == "open";
    crate::util::wait_for_events(&ndjson, 2, open, Duration::from_secs(10));
    let found = cpu_ticks(child.id());
    let busy = wait_until(Duration::from_secs(10), || (cpu_ticks(child.id()) >= found + 20).then_some(()));
    assert!(busy.is_some(), "the plugins never got busy");
    let st = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(st.success());
    let signalled = Instant::now();
    let status = wait_until(Duration::from_secs(10), || child.try_wait().unwrap()).expect("the scan ignored Ctrl-C");
    let took = signalled.elapsed();
    let evs = events(&std::fs::read_to_string(&ndjson).unwrap());
    assert_eq!(status.code(), Some(1));
    assert!(took < Duration::from_secs(1), "Ctrl-C took {took:?} to end the scan");
    let end = of_type(&evs, "scan_end");
    assert_eq!(end.len(), 1);
    assert_eq!(end[0]["interrupted"], true);
    assert_eq!(crate::util::open_ports(&evs).len(), 2, "what was found is kept");
    let m = budget_messages(&evs, "sandbox-slow-calls");
    assert_eq!(m, ["stopped: the scan was interrupted"; 2]);
}

// Case 5: a server's escapes reach the terminal as visible text.
#[test]
fn server_strings_cannot_drive_the_terminal() {
    let _lab = lab();
    let _server = Hostile::start("escape_http.py", 7080, &[]);
    let out = in_lab(bin())
        .args(["-n", "-sV", "-p", "7080", "--script", "http-title,http-server-header,banner", "-v", HOSTILE_IP])
        .output()
        .unwrap();
    let text = stdout(&out);
    assert!(text.contains("http-title"), "{text}");
    for bad in ["\x1b", "\x07", "\r", "\u{9b}", "\u{202e}"] {
        assert!(!text.contains(bad), "{bad:?} reached the terminal:\n{text}");
        assert!(!stderr(&out).contains(bad), "{bad:?} reached stderr");
    }
    assert!(text.contains("\\x1B]0;owned\\x07"), "{text}");
    assert!(!text.lines().any(|l| l.starts_with("Discovered open port 31337")), "{text}");
}

// Second review, case 1: a Certificate message of 87,000 empty
// certificates on 80 ports, under -sV and the TLS plugins. Each port keeps
// the chain's first 16 and counts the rest; memory stays that of a scan.
#[test]
fn a_chain_of_empty_certificates_on_many_ports_costs_bounded_memory() {
    let _lab = lab();
    let _server = Hostile::start("tls_empty_chain.py", 20000, &["--ports", "80"]);
    let (out, rss_kb) = crate::service::time_v(&[
        "-sV",
        "-n",
        "-Pn",
        "--script",
        "ssl-cert,ssl-enum-ciphers",
        "-p",
        "20000-20079",
        HOSTILE_IP,
        "-oJ",
        "-",
    ]);
    let text = stdout(&out);
    let evs = events(&text);
    let services: Vec<&Value> = of_type(&evs, "service").into_iter().filter(|s| s["ip"] == HOSTILE_IP).collect();
    assert_eq!(services.len(), 80, "{}", stderr(&out));
    for s in &services {
        let chain = s["tls"]["chain"].as_array().unwrap_or_else(|| panic!("no chain: {s}"));
        assert_eq!((chain.len(), &s["tls"]["chain_cut"]), (16, &Value::from(86_984)), "{}", s["port"]);
    }
    assert!(text.len() < 4 << 20, "{} bytes of NDJSON for 80 ports", text.len());
    assert!(rss_kb < 80 * 1024, "peak RSS {rss_kb} kB");
}
