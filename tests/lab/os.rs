//! OS detection (`-O`), traceroute and `-A` on the lab, each against nmap
//! 7.93 in the same run. The lab's hosts have four TCP/IP personalities
//! (scripts/lab-os.sh: mstarget's own stack at 198.18.0.2, and 198.18.6.2,
//! 198.18.7.2, 198.18.8.2 with their own TTL, window, options and ECN), so
//! matching is tested on four fingerprints.

use std::collections::BTreeMap;

use regex::Regex;
use serde_json::Value;

use crate::util::{bin, in_lab, lab, of_type, stderr, stdout, Capture};

/// The lab hosts with different personalities.
const HOSTS: [&str; 4] = ["198.18.0.2", "198.18.6.2", "198.18.7.2", "198.18.8.2"];
/// Ports both scans look at: 1 is closed on each, 22 and 80 open.
const PORTS: &str = "1,22,80";

/// A host of an -oX report: its best match, that match's first class, its
/// fingerprint's tests, its distance.
#[derive(Debug, Default)]
struct OsSeen {
    best: Option<String>,
    class: Option<String>,
    /// Every match: name, accuracy, first class.
    all: Vec<(String, u8, String)>,
    /// The fingerprint as written.
    fp: String,
    tests: BTreeMap<String, BTreeMap<String, String>>,
    distance: Option<String>,
}

fn attr(tag: &str, name: &str) -> Option<String> {
    let re = Regex::new(&format!(r#"\b{name}="([^"]*)""#)).unwrap();
    re.captures(tag).map(|c| c[1].to_string())
}

/// The tests of a fingerprint in nmap's submission format (`OS:` lines).
fn tests_of(fp: &str) -> BTreeMap<String, BTreeMap<String, String>> {
    let joined: String =
        fp.replace("&#xa;", "\n").replace("&#10;", "\n").lines().map(|l| l.trim().trim_start_matches("OS:")).collect();
    let mut out = BTreeMap::new();
    for part in joined.split(')').filter(|p| !p.is_empty()) {
        let Some((name, body)) = part.split_once('(') else { continue };
        let attrs = body.split('%').filter_map(|kv| kv.split_once('=')).map(|(k, v)| (k.into(), v.into()));
        out.insert(name.to_string(), attrs.collect());
    }
    out.remove("SCAN");
    out
}

/// Each host's OS results in an -oX report.
fn hosts_of(xml: &str) -> BTreeMap<String, OsSeen> {
    let addr = Regex::new(r#"<address addr="([^"]+)" addrtype="ipv4""#).unwrap();
    let mut out = BTreeMap::new();
    for host in xml.split("<host ").skip(1) {
        let Some(ip) = addr.captures(host) else { continue };
        let mut seen = OsSeen::default();
        for m in host.split("<osmatch ").skip(1) {
            let tag = m.split('>').next().unwrap_or("");
            let class = m.split("<osclass ").nth(1).and_then(|c| c.split('>').next()).unwrap_or("");
            let class = ["type", "vendor", "osfamily", "osgen"]
                .iter()
                .map(|a| attr(class, a).unwrap_or_default())
                .collect::<Vec<_>>()
                .join("|");
            let acc = attr(tag, "accuracy").and_then(|a| a.parse().ok()).unwrap_or(0);
            seen.all.push((attr(tag, "name").unwrap_or_default(), acc, class));
        }
        if let Some((name, _, class)) = seen.all.first() {
            (seen.best, seen.class) = (Some(name.clone()), Some(class.clone()));
        }
        if let Some(fp) = host.split("<osfingerprint ").nth(1) {
            seen.fp = attr(fp, "fingerprint").unwrap_or_default().replace("&#xa;", "\n").replace("&#10;", "\n");
            seen.tests = tests_of(&seen.fp);
        }
        seen.distance = host.split("<distance ").nth(1).and_then(|d| attr(d, "value"));
        out.insert(ip[1].to_string(), seen);
    }
    out
}

/// nmap 7.93's -oX of `args`, run in the lab.
fn nmap_xml(args: &[&str]) -> String {
    let out = in_lab("nmap").args(args).args(["-oX", "-"]).output().expect("nmap runs");
    assert!(out.status.success(), "nmap {args:?}: {}", stderr(&out));
    stdout(&out)
}

/// The attributes that are counts of a moving clock (sequence rates,
/// timestamps): equal within a margin, not to the digit.
fn close(test: &str, attr: &str, a: &str, b: &str) -> bool {
    let hex = |s: &str| i64::from_str_radix(s, 16).ok();
    match (test, attr, hex(a), hex(b)) {
        // Rates of random sequence numbers (eighths of a power of two):
        // nmap's own runs on one host differ by a dozen.
        ("SEQ", "SP" | "ISR", Some(x), Some(y)) => (x - y).abs() <= 16,
        // The timestamp rate's class, one step either way.
        ("SEQ", "TS", Some(x), Some(y)) if x > 1 && y > 1 => (x - y).abs() <= 1,
        // The GCD of random sequence numbers' steps: small either way.
        ("SEQ", "GCD", Some(x), Some(y)) => x == y || (x <= 6 && y <= 6),
        _ => a == b,
    }
}

/// -O of four personalities: on each host the same best match and class
/// as nmap's, the same distance, and a fingerprint equal to nmap's test by
/// test (SP, ISR, GCD and TS, read from clocks, within a margin). The values
/// read from clocks move the accuracies by a point from run to run, in
/// nmap as here (two nmap runs on 198.18.6.2 named two different 91 %
/// matches best), so: our fingerprint with nmap's SEQ values put in gives
/// nmap's matches exactly (names, accuracies, order), and as measured our
/// best match is within a point of nmap's best and among nmap's matches
/// there.
#[test]
fn os_detection_matches_each_personality_as_nmap_does() {
    use moonscan::os::{db::OsDb, matching, submit};
    let _lab = lab();
    let db = OsDb::load(None, &moonscan::places::Places::default().nmap)
        .unwrap()
        .expect("nmap-os-db is installed with nmap");
    let theirs = hosts_of(&nmap_xml(&[&["-n", "-O", "-p", PORTS][..], &HOSTS].concat()));
    let out = in_lab(bin()).args(["-n", "-O", "-p", PORTS, "-oX", "-"]).args(HOSTS).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let ours = hosts_of(&stdout(&out));
    for host in HOSTS {
        let (a, b) = (&ours[host], &theirs[host]);
        assert!(b.best.is_some() && !b.tests.is_empty(), "{host}: nmap found no match: {b:?}");
        // Ours, with nmap's clock-read values put in: nmap's matches exactly.
        let mut fp = submit::parse_subject(&a.fp).unwrap_or_else(|| panic!("{host}: our fingerprint reads back"));
        for t in fp.tests.iter_mut().filter(|t| t.name == "SEQ") {
            for (k, v) in t.attrs.iter_mut() {
                if let Some(theirs) = b.tests.get("SEQ").and_then(|s| s.get(k.as_str())) {
                    *v = theirs.clone();
                }
            }
        }
        let same = matching::best(&db, &fp, &matching::MatchOptions { guess: false });
        let class = |m: &moonscan::findings::OsMatch| {
            m.classes.first().map_or(String::new(), |c| {
                format!("{}|{}|{}|{}", c.device_type, c.vendor, c.family, c.generation.as_deref().unwrap_or(""))
            })
        };
        let same: Vec<(String, u8, String)> =
            same.matches.iter().map(|m| (m.name.clone(), m.accuracy, class(m))).collect();
        let nmaps: Vec<(String, u8, String)> = b.all.clone();
        assert_eq!(same, nmaps, "{host}: our fingerprint with nmap's SEQ values: matches and classes");
        // As measured: within a point of nmap's best, among nmap's matches there.
        let (ta, tb) = (a.all.first().map_or(0, |m| m.1), b.all.first().map_or(0, |m| m.1));
        assert!(ta.abs_diff(tb) <= 1, "{host}: best accuracy {ta} vs nmap's {tb}");
        let near: Vec<&str> = b.all.iter().filter(|m| m.1 + 1 >= tb).map(|m| m.0.as_str()).collect();
        assert!(near.contains(&a.best.as_deref().unwrap_or("")), "{host}: best {:?} not near nmap's {near:?}", a.best);
        assert_eq!(a.distance, b.distance, "{host}: distance");
        assert_eq!(a.tests.keys().collect::<Vec<_>>(), b.tests.keys().collect::<Vec<_>>(), "{host}: tests");
        for (test, attrs) in &b.tests {
            for (k, v) in attrs {
                let got = a.tests[test].get(k).map(String::as_str).unwrap_or("(absent)");
                assert!(close(test, k, got, v), "{host}: {test}.{k}: ours {got}, nmap's {v}");
            }
            assert_eq!(a.tests[test].len(), attrs.len(), "{host}: {test}: {:?} vs {attrs:?}", a.tests[test]);
        }
    }
    // The four personalities are four fingerprints.
    let distinct: std::collections::BTreeSet<String> =
        HOSTS.iter().map(|h| format!("{:?}{:?}", ours[*h].tests.get("OPS"), ours[*h].tests.get("T1"))).collect();
    assert_eq!(distinct.len(), 4, "the lab's personalities differ");
}

/// A try sends each SEQ probe once and the other probes again when they
/// went unanswered: on 198.18.0.2, which answers every SEQ probe but
/// never T2 (a segment without flags), one try: SEQ 1 once and T2 twice
/// (nmap tries five times on this lab); `--max-os-tries 1` is that too.
/// (That a host whose SEQ replies are lost gets no more than
/// --max-os-tries is run.rs's unit test: no lab host drops them.)
#[test]
fn max_os_tries_bounds_the_tries_of_a_host() {
    let _lab = lab();
    let count = |tries: &[&str]| {
        // SEQ 1 is the only SYN with a window of 1; T2 the only segment without flags.
        let seq1 = Capture::packets("dst host 198.18.0.2 and tcp dst port 22 and tcp[14:2] == 1");
        let t2 = Capture::packets("dst host 198.18.0.2 and tcp dst port 22 and tcp[13] == 0");
        let out = in_lab(bin())
            .args(["-n", "-Pn", "-O", "-p", "1,22", "-oJ", "-"])
            .args(tries)
            .arg("198.18.0.2")
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        let evs = crate::util::events(&stdout(&out));
        let fingerprinted = of_type(&evs, "os").into_iter().filter(|e| e.get("fingerprint").is_some()).count();
        assert_eq!(fingerprinted, 1, "one os event with a fingerprint");
        (seq1.stop().len(), t2.stop().len())
    };
    assert_eq!(count(&[]), (1, 2), "one try, T2 sent again once");
    assert_eq!(count(&["--max-os-tries", "1"]), (1, 2));
}

/// Bad OS options: one line and exit 2; a missing database: one line and a
/// fingerprint anyway.
#[test]
fn os_options_are_checked_and_a_missing_database_is_said_once() {
    let _lab = lab();
    let bad: &[(&[&str], &str)] = &[
        (&["--osscan-guess", "198.18.0.2"], "apply with -O only"),
        (&["-O", "--max-os-tries", "0", "198.18.0.2"], "--max-os-tries must be at least 1"),
        (&["-O", "-sn", "198.18.0.2"], "need a port scan"),
        (&["-O", "--os-db", "/nonexistent/nmap-os-db", "198.18.0.2"], "/nonexistent/nmap-os-db"),
    ];
    for (args, says) in bad {
        let out = in_lab(bin()).args(*args).output().unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("nmap-os-db");
    std::fs::write(&broken, "MatchPoints\nSEQ(SP=25%GCD=\nFingerprint x\nClass a | b\nT1(R=Y%DF=Y\n").unwrap();
    let out = in_lab(bin()).args(["-O", "--os-db"]).arg(&broken).arg("198.18.0.2").output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("line"), "names the line: {}", stderr(&out));
    // No nmap data at all: an empty folder mounted over nmap's.
    let empty = tempfile::tempdir().unwrap();
    let script = format!(
        "mount --bind {} /usr/share/nmap && exec {} -n -O -p {PORTS} -oJ - 198.18.0.2",
        empty.path().display(),
        bin()
    );
    let out = in_lab("unshare").args(["-m", "sh", "-c", &script]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.matches("nmap-os-db not found").count(), 1, "{err}");
    let evs = crate::util::events(&stdout(&out));
    let os: Vec<&Value> = of_type(&evs, "os").into_iter().filter(|e| e.get("fingerprint").is_some()).collect();
    assert_eq!(os.len(), 1);
    assert!(os[0]["fingerprint"].as_str().is_some_and(|f| f.contains("SEQ(")), "{:?}", os[0]);
    assert!(os[0].get("matches").is_none(), "no database, no match");
}

/// `-O` of this machine's own address: the port scan runs, the host says
/// why it has no OS, the exit is 0.
#[test]
fn os_detection_of_loopback_says_why_and_scans_on() {
    let out =
        std::process::Command::new(bin()).args(["-n", "-O", "-p", "1", "-oJ", "-", "127.0.0.1"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let evs: Vec<Value> = crate::util::events(&stdout(&out));
    let errors = of_type(&evs, "error");
    assert!(errors.iter().any(|e| e["message"].as_str().is_some_and(|m| m.contains("own addresses"))), "{errors:?}");
    assert!(of_type(&evs, "os").iter().all(|e| e.get("fingerprint").is_none()));
}

/// The hops of each host's `<trace>` in an -oX report: (ttl, address).
fn traces_of(xml: &str) -> BTreeMap<String, (String, Vec<(String, String)>)> {
    let addr = Regex::new(r#"<address addr="([^"]+)" addrtype="ipv4""#).unwrap();
    let mut out = BTreeMap::new();
    for host in xml.split("<host ").skip(1) {
        let (Some(ip), Some(trace)) = (addr.captures(host), host.split("<trace").nth(1)) else { continue };
        let head = trace.split('>').next().unwrap_or("");
        let port = format!("{}/{}", attr(head, "port").unwrap_or_default(), attr(head, "proto").unwrap_or_default());
        let body = trace.split("</trace>").next().unwrap_or("");
        let hops = body
            .split("<hop ")
            .skip(1)
            .map(|h| (attr(h, "ttl").unwrap_or_default(), attr(h, "ipaddr").unwrap_or_default()))
            .collect();
        out.insert(ip[1].to_string(), (port, hops));
    }
    out
}

/// --traceroute finds the hops nmap finds, to the port nmap uses: a
/// directly connected host, msrate and two personalities behind mstarget
/// (which share their first hop: -oN says so as nmap's).
#[test]
fn traceroute_finds_the_hops_nmap_finds() {
    let _lab = lab();
    let hosts = ["198.18.0.2", "198.18.1.2", "198.18.6.2", "198.18.7.2"];
    let dir = tempfile::tempdir().unwrap();
    let (their_n, our_n) = (dir.path().join("nmap.nmap"), dir.path().join("moonscan.nmap"));
    let mut nm = in_lab("nmap");
    let nm =
        nm.args(["-n", "--traceroute", "-p", "22,80", "-oX", "-", "-oN"]).arg(&their_n).args(hosts).output().unwrap();
    assert!(nm.status.success(), "{}", stderr(&nm));
    let theirs = traces_of(&stdout(&nm));
    let out = in_lab(bin())
        .args(["-n", "--traceroute", "-p", "22,80", "-oX", "-", "-oN"])
        .arg(&our_n)
        .args(hosts)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let ours = traces_of(&stdout(&out));
    for h in hosts {
        assert!(theirs.get(h).is_some_and(|t| !t.1.is_empty()), "{h}: nmap traced nothing: {theirs:?}");
        assert_eq!(ours.get(h).map(|t| &t.1), theirs.get(h).map(|t| &t.1), "{h}: hops");
    }
    // The TRACEROUTE tables: headers and "same as" lines as nmap's (RTTs differ).
    let table = |p: &std::path::Path| -> Vec<String> {
        let text = std::fs::read_to_string(p).unwrap();
        text.lines()
            .filter(|l| l.starts_with("TRACEROUTE") || l.starts_with("HOP ") || l.contains(" the same as for "))
            // Which port (and which host's hops) nmap names follows which
            // of equally good probes answered first: compared without.
            .map(|l| {
                l.split(" (using port").next().unwrap_or(l).split(" the same as for ").next().unwrap_or(l).to_string()
            })
            .collect()
    };
    // Which host's hops are "the same" follows which trace came first: the
    // same lines, in any host's table.
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    assert_eq!(sorted(table(&our_n)), sorted(table(&their_n)));
}

/// The -oN sections of each host, in order: the lines that start them.
fn sections(text: &str) -> Vec<String> {
    const HEADS: [&str; 14] = [
        "Nmap scan report for",
        "PORT ",
        "Warning: OSScan results may be unreliable",
        "Aggressive OS guesses:",
        "Device type:",
        "Running",
        "OS CPE:",
        "OS details:",
        "No exact OS matches",
        "TCP/IP fingerprint:",
        "Network Distance:",
        "Service Info:",
        "TRACEROUTE",
        "OS and Service detection performed",
    ];
    text.lines().filter_map(|l| HEADS.iter().find(|h| l.starts_with(**h))).map(|h| h.to_string()).collect()
}

/// -A is -O -sV -sC --traceroute: nmap's sections in -oN in nmap's order,
/// and <os>, <distance> and <trace> in -oX.
#[test]
fn minus_a_gives_nmaps_sections() {
    let _lab = lab();
    let args = ["-n", "-A", "-p", "22,80", "198.18.0.2", "198.18.6.2"];
    let nm = in_lab("nmap").args(args).args(["-oN", "-"]).output().unwrap();
    assert!(nm.status.success(), "{}", stderr(&nm));
    let dir = tempfile::tempdir().unwrap();
    let xml = dir.path().join("a.xml");
    let out = in_lab(bin()).args(args).args(["-oN", "-", "-oX"]).arg(&xml).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(sections(&stdout(&out)), sections(&stdout(&nm)), "ours:\n{}\nnmap's:\n{}", stdout(&out), stdout(&nm));
    let doc = std::fs::read_to_string(&xml).unwrap();
    // No <osfingerprint>: nmap leaves it out where conditions are not ideal
    // (no closed port here), and so do we.
    // A directly connected host's <trace> has no port, as nmap writes it.
    for tag in ["<os>", "<distance ", "<trace"] {
        assert_eq!(doc.matches(tag).count(), 2, "{tag} in each host: {doc}");
    }
    assert_eq!(doc.matches("<service ").count(), 4, "-sV on each port: {doc}");
    for host in doc.split("<host ").skip(1) {
        assert!(host.contains("<osmatch "), "nmap's guesses in each host: {host}");
    }
}

/// Each host's fingerprint and its osmatch list (name, accuracy) in an -oX report.
fn matches_of(xml: &str) -> BTreeMap<String, (String, Vec<(String, u8)>)> {
    let addr = Regex::new(r#"<address addr="([^"]+)" addrtype="ipv4""#).unwrap();
    let mut out = BTreeMap::new();
    for host in xml.split("<host ").skip(1) {
        let (Some(ip), Some(fp)) = (addr.captures(host), host.split("<osfingerprint ").nth(1)) else { continue };
        let fp = attr(fp, "fingerprint").unwrap_or_default().replace("&#xa;", "\n").replace("&#10;", "\n");
        let list = host
            .split("<osmatch ")
            .skip(1)
            .map(|m| {
                let tag = m.split('>').next().unwrap_or("");
                (attr(tag, "name").unwrap_or_default(), attr(tag, "accuracy").and_then(|a| a.parse().ok()).unwrap_or(0))
            })
            .collect();
        out.insert(ip[1].to_string(), (fp, list));
    }
    out
}

/// Matching alone, on nmap's own fingerprints: moonscan's matcher given
/// the fingerprint nmap 7.93 took of each lab host lists the matches
/// nmap listed, in nmap's order, with nmap's accuracies.
#[test]
fn nmaps_fingerprints_match_as_nmap_matches_them() {
    use moonscan::os::{db::OsDb, matching, submit};
    let _lab = lab();
    let theirs = matches_of(&nmap_xml(&[&["-n", "-O", "-p", PORTS][..], &HOSTS].concat()));
    let db = OsDb::load(None, &moonscan::places::Places::default().nmap)
        .unwrap()
        .expect("nmap-os-db is installed with nmap");
    for host in HOSTS {
        let (fp, list) = &theirs[host];
        let subject =
            submit::parse_subject(fp).unwrap_or_else(|| panic!("{host}: nmap's fingerprint reads back: {fp}"));
        let got = matching::best(&db, &subject, &matching::MatchOptions { guess: false });
        let ours: Vec<(String, u8)> = got.matches.iter().map(|m| (m.name.clone(), m.accuracy)).collect();
        assert_eq!(&ours, list, "{host}");
    }
}

/// `--max-rate` holds for OS probes too: at 40 probes a second, no second
/// of the scan carries more than 40 (plus one) packets to the host, and
/// the 16 OS probes of each try are all there.
#[test]
fn os_probes_keep_to_the_max_rate() {
    let _lab = lab();
    // The scanner's own kernel resets every SYN-ACK to a raw probe: not probes.
    let cap = Capture::packets("dst host 198.18.0.2 and (udp or icmp or (tcp and tcp[tcpflags] & tcp-rst == 0))");
    let out = in_lab(bin())
        .args(["-n", "-Pn", "-O", "--max-rate", "40", "--max-os-tries", "1", "-p", "1,22", "-oJ", "-", "198.18.0.2"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let times: Vec<f64> = cap.stop().into_iter().map(|(t, _)| t).collect();
    assert!(times.len() >= 18, "2 port probes and 16 OS probes at least: {}", times.len());
    for (i, t) in times.iter().enumerate() {
        let within = times[i..].iter().take_while(|u| **u < t + 1.0).count();
        assert!(within <= 41, "{within} packets in the second after {t}");
    }
}

/// OS detection streams: a host goes to it the moment the port scan has
/// decided its every port, while the scan goes on with other hosts, and
/// its probes take turns of the scan's pace. 512 hosts of 198.19.0.0/23
/// at --max-rate 1500: the first os event comes before the scan's last
/// port event, every host gets one, and no second carries more than the
/// rate (and a little: tcpdump's clock is not the sender's).
#[test]
fn os_detection_streams_beside_the_port_scan_under_its_rate() {
    let _lab = lab();
    // The scanner's own kernel resets every SYN-ACK to a raw probe: not probes.
    let cap = Capture::packets("dst net 198.19.0.0/23 and not (tcp[tcpflags] & tcp-rst != 0)");
    let out = in_lab(bin())
        .args(["-n", "-O", "--max-rate", "1500", "-p", "22,80", "-oJ", "-", "198.19.0.0/23"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let times: Vec<f64> = cap.stop().into_iter().map(|(t, _)| t).collect();
    let evs = crate::util::events(&stdout(&out));
    let os: Vec<&Value> = of_type(&evs, "os").into_iter().filter(|e| e.get("fingerprint").is_some()).collect();
    assert_eq!(os.len(), 512, "every host fingerprinted");
    let first_os = os.iter().filter_map(|e| e["t"].as_f64()).fold(f64::MAX, f64::min);
    let last_port = of_type(&evs, "port").iter().filter_map(|e| e["t"].as_f64()).fold(0.0, f64::max);
    assert!(first_os < last_port, "first os event at {first_os} s, last port at {last_port} s");
    for (i, t) in times.iter().enumerate().step_by(50) {
        let within = times[i..].iter().take_while(|u| **u < t + 1.0).count();
        assert!(within <= 1600, "{within} packets in the second after {t}");
    }
}
