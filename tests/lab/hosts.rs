//! Host discovery in the lab: 198.18.0.0/16 routes to mstarget, where 8
//! addresses of 198.18.2.0/24 answer and the rest of the /16 is dropped
//! without a word (dead hosts); 198.18.0.2-6 are on-link (ARP); 198.18.1.2
//! sits behind a router. Packets are counted on the target side with
//! tcpdump; hosts and ports are compared with nmap 7.93's in the same run.
//! What needs no lab is in tests/hosts.rs.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::util::{bin, in_lab, lab, lab_scan, of_type, open_ports, stderr, Capture};

/// The live hosts of 198.18.2.0/24 (scripts/lab.sh LIVE8).
const LIVE8: [&str; 8] = [
    "198.18.2.3",
    "198.18.2.17",
    "198.18.2.42",
    "198.18.2.77",
    "198.18.2.100",
    "198.18.2.128",
    "198.18.2.200",
    "198.18.2.254",
];

fn up_hosts(evs: &[Value]) -> BTreeSet<String> {
    of_type(evs, "host").iter().filter(|h| h["state"] == "up").map(|h| h["ip"].as_str().unwrap().to_string()).collect()
}

/// Every host discovery finds in the /16 is really there, every live one
/// is found, and no port probe goes to an address that never answered.
#[test]
fn discovery_of_a_16_finds_every_live_host_and_probes_no_dead_one() {
    let _lab = lab();
    // SYNs to the scanned port only (discovery's own SYNs go to 443).
    let cap = Capture::start("dst net 198.18.0.0/16 and dst port 22");
    let (out, evs) = lab_scan(&["-sS", "-n", "-p", "22", "198.18.0.0/16", "--exclude", "198.18.0.1"]);
    let syns = cap.stop();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let up = up_hosts(&evs);
    for must in LIVE8.iter().chain(&["198.18.0.2", "198.18.1.2"]) {
        assert!(up.contains(*must), "{must} is live but was not found: {up:?}");
    }
    // Nothing else of 198.18.2.0/24 answers, and nothing of the dead rest
    // beyond the lab's real addresses: 198.18.0.2-12 (targets, the zoo,
    // the firewalled host, the legacy TLS servers, the sites by name), 198.18.1.2 behind the
    // router, the OpenVPN server's 198.18.200.1, and the OS personalities
    // 198.18.6.2, 198.18.7.2, 198.18.8.2 with mstarget's ends of their links
    // (198.18.6.1, 198.18.7.1, 198.18.8.1: scripts/lab-os.sh).
    assert!(up.iter().filter(|h| h.starts_with("198.18.2.")).count() == 8, "{up:?}");
    let known = |h: &str| {
        h.starts_with("198.18.2.")
            || h == "198.18.1.2"
            || h == "198.18.200.1"
            || ["198.18.6.", "198.18.7.", "198.18.8."].iter().any(|n| h == format!("{n}1") || h == format!("{n}2"))
            || h.strip_prefix("198.18.0.").and_then(|n| n.parse::<u8>().ok()).is_some_and(|n| (2..=12).contains(&n))
    };
    let unknown: Vec<&String> = up.iter().filter(|h| !known(h)).collect();
    assert!(unknown.is_empty(), "dead hosts reported up: {unknown:?} of {up:?}");
    let probed: BTreeSet<String> = syns.iter().map(|(_, ip)| ip.clone()).collect();
    let dead: Vec<&String> = probed.difference(&up).collect();
    assert!(dead.is_empty(), "port probes went to hosts that never answered: {dead:?}");
    // Every up host's port was probed, and port 22 is open on the 8.
    let open: BTreeSet<String> = open_ports(&evs).into_iter().map(|(ip, _)| ip).collect();
    for h in LIVE8 {
        assert!(probed.contains(h), "{h} is up but its port was never probed");
        assert!(open.contains(h), "22 is open on {h}");
    }
    let end = of_type(&evs, "scan_end")[0];
    assert_eq!(end["hosts_up"].as_u64(), Some(up.len() as u64));
    assert!(end["hosts_down"].as_u64().unwrap() > 60_000, "{end}");
}

/// `-Pn` skips discovery: no ICMP, no SYN to 443 and no ACK to 80 leave,
/// and every address (dead ones too) gets its port probes.
#[test]
fn no_ping_sends_no_discovery_probe() {
    let _lab = lab();
    let cap = Capture::packets("dst net 198.18.2.0/24 and (icmp or dst port 443 or dst port 80)");
    let syns = Capture::start("dst net 198.18.2.0/24 and dst port 22");
    let (out, evs) = lab_scan(&["-Pn", "-n", "-p", "22", "--max-retries", "0", "198.18.2.0/24"]);
    let ours = syns.stop();
    let pings = cap.stop();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(pings.is_empty(), "discovery probes with -Pn: {:?}", &pings[..pings.len().min(5)]);
    let probed: BTreeSet<String> = ours.into_iter().map(|(_, ip)| ip).collect();
    assert_eq!(probed.len(), 256, "every address is probed with -Pn");
    assert_eq!(open_ports(&evs).len(), 8);
    // No discovery verdicts: the hosts that answered a port are up as set
    // by the user (nmap's user-set), each with its latency, and no other.
    let answered: BTreeSet<String> = open_ports(&evs).into_iter().map(|(ip, _)| ip).collect();
    assert_eq!(user_set(&evs), answered, "{evs:?}");
    // And with discovery the same scan probes only the 8.
    let syns = Capture::start("dst net 198.18.2.0/24 and dst port 22");
    let (out, evs) = lab_scan(&["-n", "-p", "22", "198.18.2.0/24"]);
    let probed: BTreeSet<String> = syns.stop().into_iter().map(|(_, ip)| ip).collect();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(probed, LIVE8.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>());
    assert_eq!(up_hosts(&evs).len(), 8);
}

/// The hosts of -Pn's `host` events, each of which must be up as the user
/// set it (no discovery verdict) with a latency.
fn user_set(evs: &[serde_json::Value]) -> BTreeSet<String> {
    let hosts = of_type(evs, "host");
    for h in &hosts {
        assert!(h["state"] == "up" && h["reason"] == "user-set" && h["latency"].as_f64().is_some(), "{h}");
    }
    hosts.iter().map(|h| h["ip"].as_str().unwrap().to_string()).collect()
}

/// Addresses of a file of nmap's XML, by host state.
fn xml_hosts(path: &Path, state: &str) -> BTreeSet<String> {
    let text = std::fs::read_to_string(path).expect("XML written");
    let re = regex::Regex::new(r#"<status state="([a-z]+)"[^>]*/>\s*<address addr="([^"]+)""#).unwrap();
    re.captures_iter(&text).filter(|c| &c[1] == state).map(|c| c[2].to_string()).collect()
}

/// Open ports per host in nmap's XML.
fn xml_open(path: &Path) -> BTreeSet<(String, u16)> {
    let text = std::fs::read_to_string(path).unwrap();
    let host = regex::Regex::new(r#"<address addr="([^"]+)" addrtype="ipv4"/>"#).unwrap();
    let port = regex::Regex::new(r#"<port protocol="tcp" portid="(\d+)"><state state="open""#).unwrap();
    let mut out = BTreeSet::new();
    // "<host " and not "<hostnames>" or "<hosthint>".
    for chunk in text.split("<host ").skip(1) {
        let Some(ip) = host.captures(chunk).map(|c| c[1].to_string()) else { continue };
        for c in port.captures_iter(chunk) {
            out.insert((ip.clone(), c[1].parse().unwrap()));
        }
    }
    out
}

/// nmap's default scan (discovery on) and ours find the same hosts and
/// the same open ports on a /24 where 8 hosts are up.
#[test]
fn default_discovery_finds_the_hosts_and_ports_nmap_finds() {
    let _lab = lab();
    let dir = tempfile::tempdir().unwrap();
    let (theirs, ours) = (dir.path().join("nmap.xml"), dir.path().join("ms.xml"));
    let ports = "21,22,25,80,443,3306,6379,8080";
    let nmap = in_lab("nmap").args(["-n", "-p", ports, "-oX"]).arg(&theirs).arg("198.18.2.0/24").output().unwrap();
    assert!(nmap.status.success(), "{}", stderr(&nmap));
    let out = in_lab(bin()).args(["-n", "-p", ports, "-oX"]).arg(&ours).arg("198.18.2.0/24").output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let want = xml_hosts(&theirs, "up");
    assert_eq!(want.len(), 8, "nmap found the 8: {want:?}");
    assert_eq!(xml_hosts(&ours, "up"), want);
    let open = xml_open(&theirs);
    assert_eq!(open.len(), 8 * 4, "{open:?}");
    assert_eq!(xml_open(&ours), open);
    let text = std::fs::read_to_string(&ours).unwrap();
    assert!(text.contains(r#"<status state="up" reason="echo-reply" reason_ttl="64"/>"#), "{text}");
    assert!(text.contains("256 IP addresses (8 hosts up)"), "{text}");
}

/// -sn: discovery only, in every format as nmap writes it; -v adds the
/// hosts found down. On-link hosts answer ARP and carry their MAC.
#[test]
fn ping_scan_reports_hosts_in_every_format() {
    let _lab = lab();
    let dir = tempfile::tempdir().unwrap();
    let [x, n, g, j] = ["x.xml", "n.txt", "g.txt", "j.json"].map(|f| dir.path().join(f));
    let cap = Capture::packets("dst net 198.18.2.0/28 and tcp dst port 22");
    let out = in_lab(bin())
        .args(["-sn", "-v", "-n", "--reason", "198.18.2.0/28", "198.18.0.2", "-oX"])
        .arg(&x)
        .arg("-oN")
        .arg(&n)
        .arg("-oG")
        .arg(&g)
        .arg("-oJ")
        .arg(&j)
        .output()
        .unwrap();
    assert!(cap.stop().is_empty(), "-sn scans no port");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let xml = std::fs::read_to_string(&x).unwrap();
    assert_eq!(xml_hosts(&x, "up"), BTreeSet::from(["198.18.0.2".to_string(), "198.18.2.3".into()]));
    assert_eq!(xml_hosts(&x, "down").len(), 15, "-v lists the hosts down");
    assert!(xml.contains(r#"<status state="down" reason="no-response""#), "{xml}");
    assert!(xml.contains(r#"reason="arp-response""#) && xml.contains(r#"addrtype="mac"/>"#), "{xml}");
    assert!(!xml.contains("<ports>"), "no port table with -sn");
    let normal = std::fs::read_to_string(&n).unwrap();
    assert!(normal.contains("Nmap scan report for 198.18.2.3\nHost is up, received echo-reply ttl 64 ("), "{normal}");
    assert!(normal.contains("Nmap scan report for 198.18.2.4 [host down, received no-response]"), "{normal}");
    assert!(normal.contains("MAC Address: "), "{normal}");
    assert!(normal.contains("17 IP addresses (2 hosts up)"), "{normal}");
    let grep = std::fs::read_to_string(&g).unwrap();
    assert!(grep.contains("Host: 198.18.2.3 ()\tStatus: Up\n"), "{grep}");
    assert!(grep.contains("Host: 198.18.2.5 ()\tStatus: Down\n"), "{grep}");
    assert!(!grep.contains("Ports:"), "{grep}");
    let evs = crate::util::events(&std::fs::read_to_string(&j).unwrap());
    let mac = of_type(&evs, "host").into_iter().find(|h| h["ip"] == "198.18.0.2").unwrap().clone();
    assert_eq!(mac["reason"], "arp-response");
    assert!(mac["mac"].as_str().is_some_and(|m| m.len() == 17), "{mac}");
}

/// How often each address was asked by an ARP request or neighbour
/// solicitation, from tcpdump's lines: "ARP, Request who-has 198.18.0.77
/// tell 198.18.0.1, length 46", "ICMP6, neighbor solicitation, who has
/// 2001:2::77, length 32".
fn asked(lines: &[String]) -> std::collections::BTreeMap<String, usize> {
    let mut asked = std::collections::BTreeMap::new();
    for l in lines {
        let rest = l.split_once("who-has ").or_else(|| l.split_once("who has ")).map(|(_, r)| r);
        if let Some(ip) = rest.and_then(|r| r.split([' ', ',']).next()) {
            *asked.entry(ip.to_string()).or_default() += 1;
        }
    }
    asked
}

/// ARP requests and neighbour solicitations, captured on the target side.
fn neighbour_requests() -> Capture {
    Capture::packets("arp[6:2] = 1 or (icmp6 and ip6[40] = 135)")
}

/// Entries planted in the scanner namespace's neighbour table for
/// addresses nobody holds (same MAC for all), removed when dropped.
struct Planted(Vec<(&'static str, &'static str)>);

impl Planted {
    fn new(entries: &[(&'static str, &'static str)]) -> Planted {
        for (ip, state) in entries {
            let st = Command::new("ip")
                .args(["netns", "exec", "msscan", "ip", "neigh", "replace", ip])
                .args(["lladdr", "02:00:00:00:00:77", "dev", "ms-scan0", "nud", state])
                .status()
                .unwrap();
            assert!(st.success(), "planting {ip} {state}");
        }
        Planted(entries.to_vec())
    }
}

impl Drop for Planted {
    fn drop(&mut self) {
        for (ip, _) in &self.0 {
            let _ = Command::new("ip")
                .args(["netns", "exec", "msscan", "ip", "neigh", "del", ip, "dev", "ms-scan0"])
                .status();
        }
    }
}

/// A neighbour table entry is no answer: addresses nobody holds are down
/// whatever their entry says (STALE, as four forged ARP requests leave
/// them; REACHABLE; PERMANENT), and each was asked; the real hosts answer
/// ARP and NDP and are up with their MAC.
#[test]
fn neighbour_table_entries_never_make_a_host_up() {
    let _lab = lab();
    let fake = [
        ("198.18.0.77", "stale"),
        ("198.18.0.78", "reachable"),
        ("198.18.0.79", "permanent"),
        ("2001:2::77", "stale"),
        ("2001:2::78", "reachable"),
        ("2001:2::79", "permanent"),
    ];
    let planted = Planted::new(&fake);
    let mut args = vec!["-sn", "-n", "-v", "198.18.0.2", "2001:2::2"];
    args.extend(fake.iter().map(|f| f.0));
    let cap = neighbour_requests();
    let (out, evs) = lab_scan(&args);
    let asked = asked(&cap.stop_lines());
    drop(planted);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let hosts = of_type(&evs, "host");
    let state = |ip: &str| hosts.iter().find(|h| h["ip"] == ip).map(|h| (h["state"].clone(), h["reason"].clone()));
    for (ip, _) in fake {
        assert_eq!(state(ip), Some(("down".into(), "no-response".into())), "{ip}: {hosts:?}");
    }
    assert_eq!(state("198.18.0.2"), Some(("up".into(), "arp-response".into())));
    assert_eq!(state("2001:2::2"), Some(("up".into(), "nd-response".into())));
    for h in hosts.iter().filter(|h| h["state"] == "up") {
        assert!(h["mac"].as_str().is_some_and(|m| m.len() == 17 && m != "02:00:00:00:00:77"), "{h}");
    }
    let end = of_type(&evs, "scan_end")[0];
    assert_eq!((end["hosts_up"].as_u64(), end["hosts_down"].as_u64()), (Some(2), Some(6)), "{end}");
    for (ip, _) in fake {
        assert_eq!(asked.get(ip), Some(&3), "{ip} is asked, three times: {asked:?}");
    }
    assert!(asked.contains_key("198.18.0.2") && asked.contains_key("2001:2::2"), "{asked:?}");
}

/// On-link discovery asks by ARP from the raw engine, every host at once
/// and each silent one three times (nmap's tries; the kernel, which did
/// it before, asked once a second): a /24 takes about 0.3 s (was 1.1 s,
/// and 25 s for a /21). The time bound is generous; the hosts found are
/// the lab's on-link ones.
#[test]
fn on_link_ping_scan_of_a_24_is_quick() {
    let _lab = lab();
    let cap = neighbour_requests();
    let t0 = Instant::now();
    let (out, evs) = lab_scan(&["-sn", "-n", "198.18.0.0/24"]);
    let took = t0.elapsed();
    // ARP only: the kernel's own neighbour solicitations (IPv6) may pass meanwhile.
    let mut asked = asked(&cap.stop_lines());
    asked.retain(|ip, _| !ip.contains(':'));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(asked.len(), 255, "every address but ours is asked: {asked:?}");
    assert!(!asked.contains_key("198.18.0.1"), "no gratuitous ARP");
    let silent = asked.iter().filter(|(ip, _)| !up_hosts(&evs).contains(*ip)).filter(|(_, &n)| n < 3).count();
    assert_eq!(silent, 0, "silent addresses are asked three times: {asked:?}");
    let up = up_hosts(&evs);
    for must in ["198.18.0.2", "198.18.0.3", "198.18.0.5", "198.18.0.6"] {
        assert!(up.contains(must), "{must}: {up:?}");
    }
    let last = |h: &String| h.rsplit('.').next().and_then(|n| n.parse::<u8>().ok());
    assert!(up.iter().all(|h| last(h).is_some_and(|n| (2..=12).contains(&n))), "only the lab's hosts: {up:?}");
    assert!(of_type(&evs, "host").iter().all(|h| h["reason"] == "arp-response"));
    assert!(took < Duration::from_secs(5), "-sn of an on-link /24 took {took:?}");
}

/// -Pn takes every on-link host as up: their MACs are asked before the
/// port scan (with an empty neighbour table too), the hosts that answer
/// get their ports scanned, the others none.
#[test]
fn no_ping_on_link_asks_the_macs_first() {
    let _lab = lab();
    let st = Command::new("ip").args(["netns", "exec", "msscan", "ip", "neigh", "flush", "dev", "ms-scan0"]).status();
    assert!(st.is_ok_and(|s| s.success()));
    let cap = Capture::start("dst net 198.18.0.0/24 and dst port 22");
    let (out, evs) = lab_scan(&["-Pn", "-n", "-p", "22", "198.18.0.0/28"]);
    let probed: BTreeSet<String> = cap.stop().into_iter().map(|(_, ip)| ip).collect();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let answered: BTreeSet<String> = open_ports(&evs).into_iter().map(|(ip, _)| ip).collect();
    assert_eq!(user_set(&evs), answered, "only the hosts that answered, up as set by the user: {evs:?}");
    let open: BTreeSet<String> = open_ports(&evs).into_iter().map(|(ip, _)| ip).collect();
    for must in ["198.18.0.2", "198.18.0.3", "198.18.0.5"] {
        assert!(open.contains(must), "{must}: {open:?}");
    }
    assert_eq!(probed, open, "SYNs go to the hosts that answered ARP only");
}

/// Each -P probe alone finds a live host by its own kind of answer; the
/// address mask request, which Linux never answers, finds none.
#[test]
fn each_ping_probe_reads_its_own_answer() {
    let _lab = lab();
    for (flag, reason) in [
        ("-PE", "echo-reply"),
        ("-PP", "timestamp-reply"),
        ("-PS22", "syn-ack"),
        ("-PS81", "reset"),
        ("-PA80", "reset"),
        ("-PU", "port-unreach"),
        ("-PU53", "port-unreach"),
    ] {
        let (out, evs) = lab_scan(&["-sn", "-n", flag, "198.18.2.42"]);
        assert_eq!(out.status.code(), Some(0), "{flag}: {}", stderr(&out));
        let hosts = of_type(&evs, "host");
        assert_eq!(hosts.len(), 1, "{flag}: {hosts:?}");
        assert_eq!((&hosts[0]["state"], &hosts[0]["reason"]), (&"up".into(), &reason.into()), "{flag}");
    }
    let (out, evs) = lab_scan(&["-sn", "-n", "-v", "-PM", "198.18.2.42"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(of_type(&evs, "host")[0]["state"], "down");
}

/// -sL lists every target and sends nothing at all.
#[test]
fn list_scan_sends_nothing() {
    let _lab = lab();
    let cap = Capture::packets("dst net 198.18.2.0/24");
    let (out, evs) = lab_scan(&["-sL", "-n", "198.18.2.0/24"]);
    assert!(cap.stop().is_empty(), "-sL sent packets");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let hosts = of_type(&evs, "host");
    assert_eq!(hosts.len(), 256);
    assert!(hosts.iter().all(|h| h["state"] == "unknown" && h["reason"] == "user-set"));
    assert_eq!(hosts[0]["ip"], "198.18.2.0", "in address order");
}

/// --host-timeout gives up on a host whose ports take too long: at 20
/// probes a second, about 40 of 200 go out in 2 seconds.
#[test]
fn a_host_timeout_stops_probing_the_host() {
    let _lab = lab();
    let (out, evs) = lab_scan(&["-n", "-Pn", "--max-rate", "20", "--host-timeout", "2s", "-p", "1-200", "198.18.2.3"]);
    let errors = of_type(&evs, "error");
    assert_eq!(errors.len(), 1, "{}", stderr(&out));
    assert_eq!(errors[0]["kind"], "timeout");
    assert!(errors[0]["message"].as_str().unwrap().contains("host timeout"), "{}", errors[0]);
    let sent = of_type(&evs, "scan_end")[0]["probes_sent"].as_u64().unwrap();
    assert!((20..=60).contains(&sent), "{sent} probes sent");
    assert_eq!(out.status.code(), Some(1), "an incomplete host is reported as an error");
}
