//! UDP scans (-sU) in the lab: real Debian daemons answering on 198.18.0.2
//! (dnsmasq, snmpd, chrony, tftpd-hpa, memcached, nmbd), the firewalled
//! address 198.18.0.6 (udp/9 dropped, udp/10 rejected admin-prohibited),
//! and 198.18.1.2, a namespace that keeps Linux's default ICMP rate limit.
//! States and reasons are compared with nmap 7.93's in the same run.
//! What needs no lab is in tests/udp.rs.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use serde_json::Value;

use crate::util::{bin, in_lab, lab, lab_scan, of_type, stderr, Capture};

const TARGET: &str = "198.18.0.2";
const FIREWALLED: &str = "198.18.0.6";
const RATE_LIMITED: &str = "198.18.1.2";
/// The UDP services on 198.18.0.2 and the names nmap gives them.
const SERVICES: [(u16, &str); 6] =
    [(53, "domain"), (69, "tftp"), (123, "ntp"), (137, "netbios-ns"), (161, "snmp"), (11211, "memcached")];

/// (address, port) -> (state, reason) of the UDP ports in an nmap-format XML file.
fn states(xml: &Path) -> BTreeMap<(String, u16), (String, String)> {
    let text = std::fs::read_to_string(xml).expect("XML written");
    let mut out = BTreeMap::new();
    let host = regex::Regex::new(r#"<address addr="([^"]+)" addrtype="ipv4"/>"#).unwrap();
    let port =
        regex::Regex::new(r#"<port protocol="udp" portid="(\d+)"><state state="([^"]+)" reason="([^"]+)""#).unwrap();
    // "<host " and not "<hosthint>" (nmap) or "<hostnames>".
    for chunk in text.split("<host ").skip(1) {
        let Some(ip) = host.captures(chunk).map(|c| c[1].to_string()) else { continue };
        for c in port.captures_iter(chunk) {
            out.insert((ip.clone(), c[1].parse().unwrap()), (c[2].to_string(), c[3].to_string()));
        }
    }
    out
}

fn nmap_udp(args: &[&str], xml: &Path) -> f64 {
    let t = Instant::now();
    let out = in_lab("nmap").args(["-n", "-Pn", "-sU", "--reason", "-oX"]).arg(xml).args(args).output().unwrap();
    assert!(out.status.success(), "nmap: {}", stderr(&out));
    t.elapsed().as_secs_f64()
}

fn moonscan_udp(args: &[&str], xml: &Path) -> f64 {
    let t = Instant::now();
    let out = in_lab(bin()).args(["-n", "-sU", "-v", "-oX"]).arg(xml).args(args).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "moonscan: {}", stderr(&out));
    t.elapsed().as_secs_f64()
}

/// Every port's state and reason as nmap's, on a plain target and on the
/// firewalled one; where nmap's payload draws no answer (open|filtered)
/// and ours does, ours must say open with udp-response.
#[test]
fn udp_states_and_reasons_are_nmaps() {
    let _lab = lab();
    let dir = tempfile::tempdir().unwrap();
    let ports = "7,9,10,53,69,123,161,11211,31337";
    let (theirs, ours) = (dir.path().join("nmap.xml"), dir.path().join("ms.xml"));
    nmap_udp(&["-p", ports, TARGET, FIREWALLED], &theirs);
    moonscan_udp(&["-p", ports, TARGET, FIREWALLED], &ours);
    let (want, got) = (states(&theirs), states(&ours));
    assert_eq!(want.len(), 18, "nmap listed every port: {want:?}");
    assert_eq!(got.keys().collect::<Vec<_>>(), want.keys().collect::<Vec<_>>(), "the same ports listed");
    for (k, w) in &want {
        let g = &got[k];
        if w.0 == "open|filtered" && g.0 == "open" {
            assert_eq!(g.1, "udp-response", "{k:?}");
            continue;
        }
        assert_eq!(g, w, "{k:?}: moonscan {g:?}, nmap {w:?}");
    }
    let at = |ip: &str, port: u16| got[&(ip.to_string(), port)].clone();
    assert_eq!(at(FIREWALLED, 9), ("open|filtered".into(), "no-response".into()));
    assert_eq!(at(FIREWALLED, 10), ("filtered".into(), "admin-prohibited".into()));
    assert_eq!(at(TARGET, 31337), ("closed".into(), "port-unreach".into()));
    for (port, _) in SERVICES.iter().filter(|(p, _)| *p != 137) {
        assert_eq!(at(TARGET, *port).0, "open", "udp/{port}");
    }
}

/// -sU -sV names every UDP daemon of the lab as nmap names it.
#[test]
fn udp_service_detection_names_every_lab_daemon() {
    let _lab = lab();
    let ports: Vec<String> = SERVICES.iter().map(|(p, _)| p.to_string()).collect();
    let (out, evs) = lab_scan(&["-n", "-sU", "-sV", "-p", &ports.join(","), TARGET]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let services: BTreeMap<u64, &Value> = of_type(&evs, "service")
        .into_iter()
        .filter(|s| s["proto"] == "udp")
        .map(|s| (s["port"].as_u64().unwrap(), s))
        .collect();
    for (port, name) in SERVICES {
        let s = services.get(&u64::from(port)).unwrap_or_else(|| panic!("no service event for udp/{port}: {evs:?}"));
        assert_eq!(s["service"], name, "udp/{port}: {s}");
        assert_eq!(s["method"], "probed", "udp/{port} identified by a probe's answer: {s}");
    }
    assert_eq!(services[&53]["product"], "dnsmasq", "{}", services[&53]);
    assert_eq!(services[&11211]["product"], "Memcached", "{}", services[&11211]);
    assert!(services[&11211]["version"].as_str().is_some_and(|v| v.starts_with("1.6")), "{}", services[&11211]);
}

/// On a host whose kernel rate-limits ICMP (Linux's default: about one
/// port unreachable a second after a burst), every port that answers is
/// found open; both tools' states are printed for the record.
#[test]
fn rate_limited_icmp_never_hides_an_answering_port() {
    let _lab = lab();
    let dir = tempfile::tempdir().unwrap();
    let (theirs, ours) = (dir.path().join("nmap.xml"), dir.path().join("ms.xml"));
    let args = ["--top-ports", "100", RATE_LIMITED];
    let nmap_t = nmap_udp(&["-T4", args[0], args[1], args[2]], &theirs);
    let ours_t = moonscan_udp(&args, &ours);
    let (want, got) = (states(&theirs), states(&ours));
    let open = |m: &BTreeMap<(String, u16), (String, String)>| -> Vec<u16> {
        m.iter().filter(|(_, v)| v.0 == "open").map(|(k, _)| k.1).collect()
    };
    let count = |m: &BTreeMap<(String, u16), (String, String)>, s: &str| m.values().filter(|v| v.0 == s).count();
    eprintln!(
        "rate-limited 198.18.1.2, top 100 UDP: nmap {nmap_t:.1} s, open {:?}, closed {}, open|filtered {}; \
         moonscan {ours_t:.1} s, open {:?}, closed {}, open|filtered {}",
        open(&want),
        count(&want, "closed"),
        count(&want, "open|filtered"),
        open(&got),
        count(&got, "closed"),
        count(&got, "open|filtered"),
    );
    for port in open(&want) {
        assert!(open(&got).contains(&port), "nmap found udp/{port} open, moonscan did not");
    }
    assert!(open(&got).contains(&53) && open(&got).contains(&161), "{:?}", open(&got));
    // Rate limiting costs answers, never invents them: no port is open that nmap calls closed.
    for port in open(&got) {
        assert_ne!(want.get(&(RATE_LIMITED.to_string(), port)).map(|v| v.0.as_str()), Some("closed"), "udp/{port}");
    }
}

/// `-p U:53,T:80` with -sS -sU: one scan, both protocols, each port
/// where it belongs; the XML has a scaninfo for each.
#[test]
fn tcp_and_udp_in_one_scan() {
    let _lab = lab();
    let dir = tempfile::tempdir().unwrap();
    let xml = dir.path().join("both.xml");
    let out = in_lab(bin())
        .args(["-n", "-sS", "-sU", "-p", "U:53,161,T:80,53", "-oJ", "-", "-oX"])
        .arg(&xml)
        .arg(TARGET)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let evs = crate::util::events(&crate::util::stdout(&out));
    let mut open: Vec<(String, u64)> = of_type(&evs, "port")
        .iter()
        .filter(|p| p["state"] == "open")
        .map(|p| (p["proto"].as_str().unwrap().to_string(), p["port"].as_u64().unwrap()))
        .collect();
    open.sort();
    // TCP 53 is closed on 198.18.0.2 (dnsmasq's TCP socket is reset there).
    assert_eq!(open, [("tcp".into(), 80), ("udp".into(), 53), ("udp".into(), 161)]);
    let text = std::fs::read_to_string(&xml).unwrap();
    assert!(text.contains(r#"<scaninfo type="syn" protocol="tcp" numservices="2" services="53,80"/>"#), "{text}");
    assert!(text.contains(r#"<scaninfo type="udp" protocol="udp" numservices="2" services="53,161"/>"#), "{text}");
}

/// Excluded UDP ports receive nothing, and --max-rate holds on the wire.
#[test]
fn udp_excludes_and_rate_hold_on_the_wire() {
    let _lab = lab();
    let cap = Capture::packets("udp and dst host 198.18.0.2 and dst portrange 30000-30999");
    let (out, evs) =
        lab_scan(&["-n", "-sU", "-p", "30000-30999", "--exclude-ports", "U:30100-30199", "--max-rate", "400", TARGET]);
    let sent = cap.stop_with_ports();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // Closed ports answer port unreachable at once: one datagram each.
    assert_eq!(sent.len(), 900, "one datagram per port not excluded");
    assert!(sent.iter().all(|s| !(30100..30200).contains(&s.2)), "an excluded port got a datagram");
    assert_eq!(evs.last().unwrap()["closed"], 900);
    let rate = (sent.len() - 1) as f64 / (sent[sent.len() - 1].0 - sent[0].0);
    assert!((rate - 400.0).abs() <= 25.0, "measured {rate:.0} datagrams/s on the wire, asked 400");
}

/// -sT -sU: TCP connect-scans (never raw SYNs) beside the raw UDP pass; a
/// port list naming one protocol only scans that one (as nmap).
#[test]
fn udp_beside_connect_and_one_sided_port_lists() {
    let _lab = lab();
    let cap = Capture::start("dst host 198.18.0.2 and dst port 80");
    // -Pn: discovery's own connections to 80 and 443 would be SYNs too.
    let (out, evs) = lab_scan(&["-n", "-Pn", "-sT", "-sU", "-p", "U:53,T:80", TARGET]);
    let syns = cap.stop();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let ports = of_type(&evs, "port");
    let tcp80 = ports.iter().find(|p| p["proto"] == "tcp" && p["port"] == 80).expect("80/tcp found");
    assert!(tcp80.get("ttl").is_none(), "a connect scan has no reply TTL: {tcp80}");
    assert_eq!(of_type(&evs, "scan_start")[0]["scan_type"], "connect");
    assert!(ports.iter().any(|p| p["proto"] == "udp" && p["port"] == 53 && p["state"] == "open"));
    assert_eq!(syns.len(), 1, "one SYN, the connect's own: {syns:?}");
    for (spec, kind, proto) in [("U:53", "udp", "udp"), ("T:80", "syn", "tcp")] {
        let (out, evs) = lab_scan(&["-n", "-sS", "-sU", "-p", spec, TARGET]);
        assert_eq!(out.status.code(), Some(0), "{spec}: {}", stderr(&out));
        assert_eq!(of_type(&evs, "scan_start")[0]["scan_type"], kind, "{spec}");
        let ports = of_type(&evs, "port");
        assert!(!ports.is_empty() && ports.iter().all(|p| p["proto"] == proto), "{spec}: {ports:?}");
    }
}
