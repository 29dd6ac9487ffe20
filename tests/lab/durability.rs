//! Nothing found is lost: a killed scan leaves NDJSON that parses line by
//! line, and an interrupted scan resumes to the same results as an
//! uninterrupted one, without probing anything twice.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::util::{bin, lab, stderr, wait_for_events};

const SWEEP: &str = "198.19.0.0/16";

/// A sweep slowed down so it can be interrupted halfway (65,536 probes at 40,000/s).
fn slow_sweep(dir: &std::path::Path, extra: &[&str]) -> Command {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", "msscan"])
        .arg(bin())
        .args(["-sS", "-n", "-Pn", "-p", "80", SWEEP, "--max-rate", "40000", "--seed", "11"])
        .args(extra)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    cmd
}

fn lines(path: &std::path::Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("line {l:?} does not parse: {e}"))).collect()
}

/// `moonscan --resume moonscan.resume` in `dir`, in the lab, to its end.
fn resume_in(dir: &std::path::Path) -> std::process::Output {
    Command::new("ip")
        .args(["netns", "exec", "msscan"])
        .arg(bin())
        .args(["--resume", "moonscan.resume"])
        .current_dir(dir)
        .stdout(Stdio::null())
        .output()
        .unwrap()
}

/// The addresses of the open ports in `evs`, once a port.
fn open_hosts(evs: &[Value]) -> Vec<String> {
    open_pairs(evs).into_iter().map(|(ip, _)| ip).collect()
}

#[test]
fn a_killed_scan_leaves_whole_ndjson_lines() {
    let _lab = lab();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("scan.ndjson");
    let db = dir.path().join("scan.db");
    let mut child =
        slow_sweep(dir.path(), &["-oJ", out.to_str().unwrap(), "--db", db.to_str().unwrap()]).spawn().unwrap();
    // Killed once 12,000 open ports are on disk, well before the end.
    wait_for_events(&out, 12_000, |e| e["type"] == "port", Duration::from_secs(20));
    child.kill().unwrap(); // SIGKILL: no handler, no final flush
    child.wait().unwrap();
    let evs = lines(&out);
    assert_eq!(evs[0]["type"], "scan_start");
    assert!(evs.iter().all(|e| e["type"] != "scan_end"), "the scan was killed before its end");
    let hosts = open_hosts(&evs);
    // At 40,000/s, flushed every 100 ms: what was seen on disk is still there, and more.
    assert!(hosts.len() >= 12_000, "only {} ports reached the file", hosts.len());
    assert!(hosts.len() < 65_536, "the scan was killed before its end");
    // Every port in it is really open: port 80 on an address of the sweep.
    for e in evs.iter().filter(|e| e["type"] == "port") {
        assert_eq!((e["port"].as_u64(), e["state"].as_str()), (Some(80), Some("open")));
        assert!(e["ip"].as_str().unwrap().starts_with("198.19."), "{e}");
    }
    let unique: BTreeSet<&String> = hosts.iter().collect();
    assert_eq!(unique.len(), hosts.len(), "no port twice");

    // The SQLite file opens and holds what was committed: most of the ports,
    // each of them also in the NDJSON (flushed just before each commit).
    let mut store = moonscan::output::store::Db::open(db.to_str().unwrap(), &Default::default())
        .expect("the killed scan's db opens");
    let scans = store.scans().unwrap();
    assert_eq!(scans.len(), 1);
    assert_eq!(scans[0].ended, None, "it never ended");
    let stored: Vec<String> = store
        .events(&scans[0].id)
        .unwrap()
        .into_iter()
        .filter_map(|e| match e {
            moonscan::findings::Event::Port(p) => Some(p.ip.to_string()),
            _ => None,
        })
        .collect();
    // SQLite commits at each flush, after the NDJSON: at most a flush behind.
    assert!(stored.len() > 8_000, "only {} ports committed", stored.len());
    assert!(stored.iter().all(|ip| unique.contains(ip)), "the db has ports the NDJSON lacks");
}

#[test]
fn an_interrupted_sweep_resumes_to_the_same_result() {
    let _lab = lab();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("scan.ndjson");
    let child = slow_sweep(dir.path(), &["-oJ", out.to_str().unwrap()]).spawn().unwrap();
    wait_for_events(&out, 10_000, |e| e["type"] == "port", Duration::from_secs(20));
    let st = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(st.success());
    let first = child.wait_with_output().unwrap();
    assert_eq!(first.status.code(), Some(1), "an interrupted scan exits 1");
    let err = stderr(&first);
    assert!(err.contains("moonscan --resume moonscan.resume"), "{err}");
    let resume_file = dir.path().join("moonscan.resume");
    assert!(resume_file.exists());
    let half = lines(&out);
    let end1 = half.iter().find(|e| e["type"] == "scan_end").unwrap().clone();
    assert_eq!(end1["interrupted"], true);
    let sent1 = end1["probes_sent"].as_u64().unwrap();
    assert!(sent1 > 5_000 && sent1 < 60_000, "interrupted halfway: {sent1} sent");

    let second = resume_in(dir.path());
    assert_eq!(second.status.code(), Some(0), "{}", stderr(&second));
    assert!(!resume_file.exists(), "a finished resume removes its file");
    let all = lines(&out);
    let ends: Vec<&Value> = all.iter().filter(|e| e["type"] == "scan_end").collect();
    assert_eq!(ends.len(), 2, "the resumed scan appended to the same -oJ file");
    let sent2 = ends[1]["probes_sent"].as_u64().unwrap();
    assert_eq!(sent1 + sent2, 65_536, "every pair probed once: nothing twice, nothing skipped");
    let hosts = open_hosts(&all);
    let unique: BTreeSet<&String> = hosts.iter().collect();
    assert_eq!(hosts.len(), 65_536, "no port reported twice");
    assert_eq!(unique.len(), 65_536, "the union is the whole sweep, as an uninterrupted run finds");
    // Resuming something that is not a resume file is a clear error.
    let bad = Command::new(bin()).args(["--resume", "/etc/hostname"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("not a moonscan resume file"), "{}", stderr(&bad));
}

#[test]
fn a_second_ctrl_c_quits_at_once() {
    let _lab = lab();
    // Service detection of an endless banner keeps the scan busy after the
    // first Ctrl-C (in-flight work is waited for); the second one ends it.
    let _server = crate::service::Hostile::start("endless_banner.py", 7001, &[]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("scan.ndjson");
    let mut child = Command::new("ip")
        .args(["netns", "exec", "msscan"])
        .arg(bin())
        .args(["-sV", "-n", "--service-timeout", "30s", "-p", "7001", "198.18.0.4", "-oJ", out.to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Its stderr, line by line, read on a thread of its own (to its end: the pipe never fills).
    let (tx, said) = std::sync::mpsc::channel();
    let err = BufReader::new(child.stderr.take().unwrap());
    std::thread::spawn(move || err.lines().map_while(Result::ok).try_for_each(|l| tx.send(l)));
    // The port is found, so detection is under way.
    wait_for_events(&out, 1, |e| e["type"] == "port" && e["port"] == 7001, Duration::from_secs(10));
    let int = |pid: u32| Command::new("kill").args(["-INT", &pid.to_string()]).status().unwrap();
    assert!(int(child.id()).success());
    // The first Ctrl-C is taken: moonscan says it waits for what is in flight.
    let taken = std::iter::from_fn(|| said.recv_timeout(Duration::from_secs(10)).ok())
        .any(|l| l.contains("interrupted; waiting for outstanding probes"));
    assert!(taken, "the first Ctrl-C was never taken");
    // Still running a while later: the first Ctrl-C waits for work in flight
    // (the endless banner keeps detection busy for its 30 s budget). The
    // 300 ms are the span this holds over, not a wait for something.
    std::thread::sleep(Duration::from_millis(300));
    assert!(child.try_wait().unwrap().is_none(), "the first Ctrl-C waits for work in flight");
    let t = std::time::Instant::now();
    assert!(int(child.id()).success());
    let st = child.wait().unwrap();
    assert!(t.elapsed() < Duration::from_millis(1000), "took {:?}", t.elapsed());
    assert_eq!(st.code(), Some(130));
}

/// The port events of `evs` that say open, as (address, port).
fn open_pairs(evs: &[Value]) -> Vec<(String, u64)> {
    evs.iter()
        .filter(|e| e["type"] == "port" && e["state"] == "open")
        .map(|e| (e["ip"].as_str().unwrap().to_string(), e["port"].as_u64().unwrap()))
        .collect()
}

fn up_hosts(evs: &[Value]) -> Vec<String> {
    evs.iter()
        .filter(|e| e["type"] == "host" && e["state"] == "up")
        .map(|e| e["ip"].as_str().unwrap().to_string())
        .collect()
}

/// A scan of ports 80 and 443 of the lab's sweep hosts (every one answers on
/// both), interrupted once `stop_at` open ports are on disk, then resumed:
/// with host discovery (raw, and by connect for -sT) and with -Pn. The two
/// parts together find every host and every port; a host the first part
/// finished is not asked again; the -oX file is one report of the whole
/// scan, each host once with both its ports.
#[test]
fn an_interrupted_scan_resumes_to_one_whole_report_with_or_without_discovery() {
    let _lab = lab();
    for (args, hosts, stop_at) in [
        (&["-sS", "198.19.0.0/18", "--max-rate", "10000"][..], 16_384, 3_000),
        (&["-sT", "198.19.0.0/22", "--max-rate", "1000"][..], 1_024, 200),
        (&["-sS", "-Pn", "198.19.0.0/18", "--max-rate", "10000"][..], 16_384, 3_000),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let (json, xml) = (dir.path().join("scan.ndjson"), dir.path().join("scan.xml"));
        let child = Command::new("ip")
            .args(["netns", "exec", "msscan"])
            .arg(bin())
            .args(["-n", "-p", "80,443", "--seed", "3"])
            .args(args)
            .args(["-oJ", json.to_str().unwrap(), "-oX", xml.to_str().unwrap()])
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_for_events(&json, stop_at, |e| e["type"] == "port", Duration::from_secs(30));
        assert!(Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap().success());
        let first = child.wait_with_output().unwrap();
        assert_eq!(first.status.code(), Some(1), "{args:?}: {}", stderr(&first));
        assert!(stderr(&first).contains("moonscan --resume moonscan.resume"), "{args:?}: {}", stderr(&first));
        let file: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join("moonscan.resume")).unwrap()).unwrap();
        let redo: BTreeSet<String> = file["hosts"]
            .as_array()
            .map(|a| a.iter().map(|h| h.as_str().unwrap().to_string()).collect())
            .unwrap_or_default();
        let part1 = lines(&json);
        let (open1, up1): (BTreeSet<_>, BTreeSet<_>) =
            (open_pairs(&part1).into_iter().collect(), up_hosts(&part1).into_iter().collect());
        assert!(open1.len() < 2 * hosts, "{args:?}: interrupted before the end");
        if args.contains(&"-Pn") {
            assert!(redo.is_empty(), "-Pn walks pairs: no host to redo");
        } else {
            // Every host found up and not to be redone is finished: both ports in the first part.
            for ip in up1.iter().filter(|ip| !redo.contains(*ip)) {
                for port in [80, 443] {
                    assert!(open1.contains(&(ip.clone(), port)), "{args:?}: {ip}:{port} neither found nor redone");
                }
            }
        }

        let second = resume_in(dir.path());
        assert_eq!(second.status.code(), Some(0), "{args:?}: {}", stderr(&second));
        assert!(!dir.path().join("moonscan.resume").exists());
        let all = lines(&json);
        let part2 = &all[part1.len()..];
        let open: BTreeSet<_> = open_pairs(&all).into_iter().collect();
        assert_eq!(open.len(), 2 * hosts, "{args:?}: every host's two ports, over both parts");
        if !args.contains(&"-Pn") {
            let up: BTreeSet<_> = up_hosts(&all).into_iter().collect();
            assert_eq!(up.len(), hosts, "{args:?}");
            let again: Vec<_> =
                up_hosts(part2).into_iter().filter(|ip| up1.contains(ip) && !redo.contains(ip)).collect();
            assert!(again.is_empty(), "{args:?}: finished hosts asked again: {again:?}");
        }
        // One report: each host once, with both ports, counted whole.
        let doc = std::fs::read_to_string(&xml).unwrap();
        assert_eq!(doc.matches("<nmaprun ").count(), 1, "{args:?}");
        assert!(doc.trim_end().ends_with("</nmaprun>"), "{args:?}");
        let addrs: Vec<&str> = doc.split("<address addr=\"").skip(1).map(|s| &s[..s.find('"').unwrap()]).collect();
        let unique: BTreeSet<&&str> = addrs.iter().collect();
        assert_eq!((addrs.len(), unique.len()), (hosts, hosts), "{args:?}");
        for port in ["80", "443"] {
            assert_eq!(doc.matches(&format!("portid=\"{port}\"")).count(), hosts, "{args:?}");
        }
        assert!(doc.contains(&format!("<hosts up=\"{hosts}\" down=\"0\" total=\"{hosts}\"/>")), "{args:?}");
        assert!(!dir.path().join("scan.resumed.xml").exists(), "{args:?}: the whole report took the first's place");
    }
}
