//! Real connect scans of listeners on 127.0.0.1 (no lab needed). The one
//! that needs root (a mount namespace) is in tests/lab/loopback.rs.

use std::collections::BTreeSet;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::{bin, events, of_type, open_ports, run, stderr, stdout};

mod common;
use common::*;

#[test]
fn finds_exactly_the_listening_ports_with_the_event_schema() {
    let (_ls, ports, closed) = listeners(3);
    let mut all = ports.clone();
    all.push(closed);
    let out = run(&["-sT", "-n", "-p", &spec(&all), "-oJ", "-", "127.0.0.1"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let evs = events(&stdout(&out));
    assert_eq!(evs.first().unwrap()["type"], "scan_start");
    assert_eq!(evs.last().unwrap()["type"], "scan_end");
    assert_eq!(of_type(&evs, "scan_start").len(), 1);
    assert_eq!(of_type(&evs, "scan_end").len(), 1);
    let want: Vec<(String, u16)> = {
        let mut w: Vec<_> = ports.iter().map(|&p| ("127.0.0.1".to_string(), p)).collect();
        w.sort();
        w
    };
    assert_eq!(open_ports(&evs), want);
    for p in of_type(&evs, "port") {
        assert_eq!(p["proto"], "tcp");
        assert_eq!(p["reason"], "syn-ack");
        assert!(p["t"].as_f64().unwrap() >= 0.0);
    }
    let end = evs.last().unwrap();
    assert_eq!(end["probes_sent"], 4);
    assert_eq!(end["open"], 3);
    assert_eq!(end["closed"], 1);
    let start = &evs[0];
    assert!(start["started"].as_str().unwrap().ends_with('Z'), "RFC 3339 UTC");
    assert_eq!(start["args"][0].as_str().unwrap(), bin());
}

#[test]
fn text_output_streams_each_open_port() {
    let (_ls, ports, _) = listeners(2);
    let out = run(&["-sT", "-n", "-p", &spec(&ports), "127.0.0.1"]);
    let text = stdout(&out);
    for p in &ports {
        assert!(text.contains(&format!("Discovered open port {p}/tcp on 127.0.0.1")), "{text}");
    }
    assert!(text.contains("Host 127.0.0.1 is up (localhost-response"), "{text}");
    assert!(
        text.lines().last().unwrap().starts_with("moonscan done: 1 of 1 hosts up, 2 probes sent, 2 open"),
        "{text}"
    );
    assert!(stderr(&out).is_empty(), "no progress line when stderr is not a terminal");
}

#[test]
fn ndjson_file_and_text_on_stdout_together() {
    let (_ls, ports, _) = listeners(1);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("out.ndjson");
    let out = run(&["-sT", "-n", "-p", &spec(&ports), "-oJ", file.to_str().unwrap(), "127.0.0.1"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout(&out).contains("Discovered open port"));
    let evs = events(&std::fs::read_to_string(&file).unwrap());
    assert_eq!(open_ports(&evs), [("127.0.0.1".to_string(), ports[0])]);
}

#[test]
fn hostnames_resolve_once_and_lists_come_from_files() {
    let (_ls, ports, _) = listeners(1);
    let out = run(&["-sT", "-p", &spec(&ports), "-oJ", "-", "localhost"]);
    assert_eq!(open_ports(&events(&stdout(&out))), [("127.0.0.1".to_string(), ports[0])]);
    // Reports name the host as it was given (nmap's `user` hostname), and
    // list a state's ports when they are few, as nmap's port table does
    // (port 1: nothing listens there).
    let out = run(&["-sT", "-p", &format!("1,{}", ports[0]), "-oN", "-", "localhost"]);
    let text = stdout(&out);
    assert!(text.contains("\nNmap scan report for localhost (127.0.0.1)\n"), "{text}");
    let row = text.lines().find(|l| l.starts_with("1/tcp ")).unwrap_or_default();
    assert_eq!(row.split_whitespace().collect::<Vec<_>>(), ["1/tcp", "closed", "tcpmux"], "{text}");
    assert!(!text.contains("Not shown"), "{text}");

    let dir = tempfile::tempdir().unwrap();
    let list = dir.path().join("targets.txt");
    std::fs::write(&list, "# lab list\n127.0.0.1 127.0.0.2\n127.0.0.3  # trailing comment\n").unwrap();
    let excl = dir.path().join("exclude.txt");
    std::fs::write(&excl, "127.0.0.2\n").unwrap();
    let out = run(&[
        "-sT",
        "-n",
        "-p",
        &spec(&ports),
        "-iL",
        list.to_str().unwrap(),
        "--excludefile",
        excl.to_str().unwrap(),
        "--exclude",
        "127.0.0.3",
        "-oJ",
        "-",
    ]);
    let evs = events(&stdout(&out));
    // Only 127.0.0.1 is left, one port: one probe.
    assert_eq!(evs.last().unwrap()["probes_sent"], 1, "{}", stdout(&out));
    assert_eq!(open_ports(&evs), [("127.0.0.1".to_string(), ports[0])]);
}

#[test]
fn shards_together_cover_the_scan_once() {
    let (_ls, ports, _) = listeners(6);
    let mut union = BTreeSet::new();
    let mut probes = 0;
    for k in 1..=3 {
        let shard = format!("{k}/3");
        let out = run(&["-sT", "-n", "-p", &spec(&ports), "--seed", "9", "--shard", &shard, "-oJ", "-", "127.0.0.1"]);
        let evs = events(&stdout(&out));
        probes += evs.last().unwrap()["probes_sent"].as_u64().unwrap();
        for p in open_ports(&evs) {
            assert!(union.insert(p.clone()), "{p:?} found by two shards");
        }
    }
    assert_eq!(probes, 6);
    assert_eq!(union.len(), 6);
}

/// A listener whose accept queue is full drops new SYNs: the probe times out,
/// is retried, and the port ends up filtered within the configured bounds.
#[test]
fn unanswered_probes_are_retried_then_filtered() {
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    sock.bind(&"127.0.0.1:0".parse::<std::net::SocketAddr>().unwrap().into()).unwrap();
    sock.listen(0).unwrap();
    let port = sock.local_addr().unwrap().as_socket().unwrap().port();
    // Fill the queue (backlog 0 holds one) and never accept.
    let mut fillers = Vec::new();
    for _ in 0..4 {
        if let Ok(s) = std::net::TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(200))
        {
            fillers.push(s);
        }
    }
    let t = Instant::now();
    let out = run(&[
        "-sT",
        "-n",
        "-p",
        &port.to_string(),
        "--max-retries",
        "2",
        "--max-rtt-timeout",
        "300ms",
        "-oJ",
        "-",
        "127.0.0.1",
    ]);
    let took = t.elapsed();
    let evs = events(&stdout(&out));
    let end = evs.last().unwrap();
    assert_eq!(end["filtered"], 1, "{end}");
    assert_eq!(end["open"], 0);
    assert_eq!(end["probes_sent"], 3, "one try and two retries");
    assert!(took >= Duration::from_millis(900), "three 300 ms timeouts take at least 0.9 s: {took:?}");
    assert!(took < Duration::from_secs(5), "and end promptly: {took:?}");
}

/// With a tiny descriptor limit the window shrinks; nothing fails for lack of files.
#[test]
fn open_file_limit_is_respected() {
    let (_ls, ports, _) = listeners(3);
    let mut all: Vec<u16> = (20_000..24_000).collect();
    all.extend(&ports);
    let script = format!("ulimit -n 96 && exec {} -T5 -sT -n -p {} -oJ - 127.0.0.1", bin(), spec(&all));
    let out = Command::new("sh").args(["-c", &script]).stdin(Stdio::null()).output().unwrap();
    let evs = events(&stdout(&out));
    let end = evs.last().unwrap();
    assert_eq!(end["errors"], 0, "{end} {}", stderr(&out));
    assert_eq!(end["probes_sent"].as_u64().unwrap(), all.len() as u64);
    for p in ports {
        assert!(open_ports(&evs).contains(&("127.0.0.1".to_string(), p)));
    }
}

/// The soft limit is raised to the hard one: a soft limit of 64 under a high
/// hard limit still lets a wide window run without errors.
#[test]
fn soft_open_file_limit_is_raised() {
    let script =
        format!("ulimit -Sn 64 && exec {} -T5 --max-parallelism 2000 -sT -n -p 1-30000 -oJ - 127.0.0.1", bin());
    let out = Command::new("sh").args(["-c", &script]).stdin(Stdio::null()).output().unwrap();
    let evs = events(&stdout(&out));
    assert_eq!(evs.last().unwrap()["errors"], 0, "{}", stderr(&out));
    assert_eq!(evs.last().unwrap()["probes_sent"], 30_000);
}

/// `script` gives moonscan a terminal: the progress line shows on stderr.
#[test]
fn progress_line_on_a_terminal() {
    let cmd = format!("{} -sT -n -p 1-3000 --max-rate 3000 127.0.0.1 >/dev/null", bin());
    let out = Command::new("script").args(["-qec", &cmd, "/dev/null"]).stdin(Stdio::null()).output().unwrap();
    let tty = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{tty}");
    assert!(tty.contains("probes") && tty.contains("open") && tty.contains("ETA"), "{tty:?}");
}

/// SIGINT: the scan stops sending, keeps what it found, and ends with scan_end.
#[test]
fn interrupt_keeps_what_was_found() {
    let (_ls, ports, _) = listeners(1);
    let spec = format!("{},1-65535", ports[0]);
    let dir = tempfile::tempdir().unwrap();
    let ndjson = dir.path().join("scan.ndjson");
    // -v reports closed ports too, so progress shows in the events.
    let child = Command::new(bin())
        .current_dir(dir.path())
        .args(["-sT", "-n", "-v", "-p", &spec, "--max-rate", "2000", "--seed", "1"])
        .args(["-oJ", ndjson.to_str().unwrap(), "127.0.0.1"])
        .stdin(Stdio::null())
        .stdout(Stdio::null()) // text goes here; unread, a pipe would fill
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    crate::util::wait_for_events(&ndjson, 2_000, |e| e["type"] == "port", Duration::from_secs(20));
    let ran = started.elapsed().as_secs_f64();
    let t = Instant::now();
    signal(child.id(), "INT");
    let out = child.wait_with_output().unwrap();
    assert!(t.elapsed() < Duration::from_secs(5), "stops promptly");
    assert_eq!(out.status.code(), Some(1), "an interrupted scan is not a clean one");
    let evs = events(&std::fs::read_to_string(&ndjson).unwrap());
    let end = evs.last().unwrap();
    assert_eq!(end["type"], "scan_end");
    assert_eq!(end["interrupted"], true);
    let sent = end["probes_sent"].as_u64().unwrap();
    assert!((2_000..65_535).contains(&sent), "{sent} probes sent");
    assert!(sent as f64 <= 2000.0 * (ran + 1.0), "{sent} probes in {ran:.1} s at 2000/s");
    assert!(stderr(&out).contains("interrupted"));
}

fn signal(pid: u32, sig: &str) {
    let st = Command::new("kill").args([&format!("-{sig}"), &pid.to_string()]).status().unwrap();
    assert!(st.success());
}
