//! nmap's other TCP scans (-sA, -sW, -sF, -sN, -sX, -sM) and ICMP errors
//! for TCP probes: on the lab's firewalled address (198.18.0.6: port 9
//! dropped, port 10 rejected with ICMP admin-prohibited, 22 and 80 open, 81
//! closed), every port's state and reason equal nmap 7.93's in the same run.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use crate::util::{bin, in_lab, lab, stderr};

const FIREWALLED: &str = "198.18.0.6";
const PORTS: &str = "9,10,22,80,81";

/// Port -> (state, reason) from an nmap-format XML file.
fn states(xml: &Path) -> BTreeMap<u16, (String, String)> {
    let text = std::fs::read_to_string(xml).expect("XML written");
    let re =
        regex::Regex::new(r#"<port protocol="tcp" portid="(\d+)"><state state="([^"]+)" reason="([^"]+)""#).unwrap();
    re.captures_iter(&text).map(|c| (c[1].parse().unwrap(), (c[2].to_string(), c[3].to_string()))).collect()
}

#[test]
fn every_tcp_scan_type_classifies_ports_as_nmap_does() {
    let _lab = lab();
    let dir = tempfile::tempdir().unwrap();
    for flag in ["-sS", "-sA", "-sW", "-sF", "-sN", "-sX", "-sM"] {
        let (theirs, ours) = (dir.path().join(format!("nmap{flag}.xml")), dir.path().join(format!("ms{flag}.xml")));
        let nmap = in_lab("nmap")
            .args([flag, "-n", "-Pn", "--reason", "-p", PORTS, "-oX"])
            .arg(&theirs)
            .arg(FIREWALLED)
            .output()
            .expect("nmap runs");
        assert!(nmap.status.success(), "nmap {flag}: {}", stderr(&nmap));
        let started = Instant::now();
        // -v: every state, as nmap lists them (by default moonscan streams
        // only what the scan type finds: open, unfiltered, open|filtered).
        let out =
            in_lab(bin()).args([flag, "-n", "-v", "-p", PORTS, "-oX"]).arg(&ours).arg(FIREWALLED).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "moonscan {flag}: {}", stderr(&out));
        let want = states(&theirs);
        assert_eq!(want.len(), 5, "nmap {flag} listed every port: {want:?}");
        assert_eq!(states(&ours), want, "moonscan {flag} against nmap");
        // The ICMP error ends port 10's probe at once: the scan lasts the
        // silent port's retries, not more.
        assert!(started.elapsed().as_secs() < 10, "{flag} took {:?}", started.elapsed());
    }
}

#[test]
fn the_other_scan_types_need_raw_sockets_and_a_remote_target() {
    let out = in_lab(bin()).args(["-sF", "-p", "80", "127.0.0.1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("-sF sends raw packets"), "{}", stderr(&out));
    // The scanner's own address (not loopback by name): refused as well,
    // never quietly connect-scanned.
    let out = in_lab(bin()).args(["-sX", "-n", "-p", "80", "198.18.0.1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("-sX sends raw packets, which cannot reach"), "{}", stderr(&out));
    let out = in_lab(bin()).args(["-sA", "-sX", "-p", "80", FIREWALLED]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("choose one of -sS, -sT, -sA"), "{}", stderr(&out));
}
