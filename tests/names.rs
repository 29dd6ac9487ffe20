//! Targets given by name: the name travels with the host to service
//! detection and plugins (TLS SNI, HTTP `Host:`), as nmap's does.

use serde_json::Value;

use crate::util::{in_lab, lab, lab_scan, of_type, stderr, stdout};

/// The lab's two sites on one address (scripts/lab.sh: NAMED, NAMES).
const NAMED: &str = "198.18.0.12";
const NAMES: [&str; 2] = ["alpha.lab.moonscan.test", "beta.lab.moonscan.test"];
const PORTS: &str = "8181,8543";

/// The first line of `plugin`'s output on `port`, from moonscan's events.
fn ours(evs: &[Value], plugin: &str, port: u16) -> Option<String> {
    of_type(evs, "script")
        .into_iter()
        .find(|r| r["plugin"] == plugin && r["port"] == port)
        .and_then(|r| r["output"].as_str())
        .map(|o| o.lines().next().unwrap_or("").trim().to_string())
}

/// The first line of `script`'s output under `port`'s row in nmap's
/// normal output (`| name: first` or `|_name: first`).
fn theirs(text: &str, script: &str, port: u16) -> Option<String> {
    let mut lines = text.lines().skip_while(|l| !l.starts_with(&format!("{port}/tcp")));
    lines.next()?;
    lines.take_while(|l| l.starts_with('|')).find_map(|l| {
        let l = l.trim_start_matches(['|', '_', ' ']);
        let rest = l.strip_prefix(script)?.strip_prefix(':')?.trim();
        Some(rest.to_string())
    })
}

/// nmap 7.93's -sV -sC of the two ports, by `target` (normal output).
fn nmap(target: &str) -> String {
    let out =
        in_lab("nmap").args(["-n", "-Pn", "-sV", "-sC", "-p", PORTS, "-oN", "-", target]).output().expect("nmap runs");
    assert!(out.status.success(), "{}", stderr(&out));
    stdout(&out)
}

/// Two sites on one address, chosen by name: scanned by each name,
/// `-sV -sC` shows that name's certificate (`ssl-cert`, from the
/// handshake's SNI) and that site's title (`http-title` over HTTP and
/// HTTPS, from `Host:`), as nmap 7.93 does in the same run, and every
/// service event carries the name. By address, the TLS port (which
/// refuses a handshake that names no site) shows no certificate, and
/// HTTP shows the default site, as nmap's. Before, every scan showed the
/// default site: no SNI and `Host: <address>`.
#[test]
fn each_name_shows_its_own_site_and_certificate_as_nmap_does() {
    let _lab = lab();
    for name in NAMES {
        let site = format!("site {}", name.split('.').next().unwrap_or(""));
        // No -n: moonscan's -n refuses a name (nmap's only stops reverse lookups).
        let (out, evs) = lab_scan(&["-Pn", "-sV", "-sC", "-p", PORTS, name]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let services = of_type(&evs, "service");
        assert_eq!(services.len(), 2, "{evs:#?}");
        assert!(services.iter().all(|s| s["targetname"] == name && s["ip"] == NAMED), "{services:#?}");
        let nmap = nmap(name);
        for port in [8181, 8543] {
            let title = ours(&evs, "http-title", port);
            assert_eq!(title.as_deref(), Some(site.as_str()), "{name}:{port}: {evs:#?}");
            assert_eq!(title, theirs(&nmap, "http-title", port), "{name}:{port}\n{nmap}");
        }
        let cert = ours(&evs, "ssl-cert", 8543).expect("ssl-cert ran on the TLS port");
        assert!(cert.contains(&format!("commonName={name}")), "{cert}");
        assert_eq!(Some(cert), theirs(&nmap, "ssl-cert", 8543), "{name}\n{nmap}");
    }
    // By address: no name to send.
    let (out, evs) = lab_scan(&["-n", "-Pn", "-sV", "-sC", "-p", PORTS, NAMED]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(of_type(&evs, "service").iter().all(|s| s["targetname"].is_null()), "{evs:#?}");
    let nmap = nmap(NAMED);
    assert_eq!(ours(&evs, "http-title", 8181).as_deref(), Some("no such site"), "{evs:#?}");
    assert_eq!(ours(&evs, "http-title", 8181), theirs(&nmap, "http-title", 8181), "{nmap}");
    assert_eq!(ours(&evs, "ssl-cert", 8543), None, "{evs:#?}");
    assert_eq!(theirs(&nmap, "ssl-cert", 8543), None, "{nmap}");
}
