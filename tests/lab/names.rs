//! Names: a target given by name travels with its host to service
//! detection and plugins (TLS SNI, HTTP `Host:`), two names of one address
//! are two targets, and hosts are named by reverse DNS, each as nmap 7.93
//! does in the same run. The lab's resolver is dnsmasq on 198.18.0.2
//! (msscan's resolv.conf; forward and reverse zones), beside msscan's
//! hosts file (scripts/lab.sh, scripts/lab-udp.sh).

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::util::{bin, in_lab, lab, lab_scan, of_type, stderr, stdout};

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
        // -n: no reverse DNS; the name given is still resolved, as nmap's.
        let (out, evs) = lab_scan(&["-n", "-Pn", "-sV", "-sC", "-p", PORTS, name]);
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

/// Each host report of a normal output: its first lines (the "scan
/// report for" line, and "Other addresses" and "rDNS record" lines), and
/// the first line of `http-title` on 8181 and 8543 and `ssl-cert` on 8543.
fn reports(text: &str) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = text
        .split("Nmap scan report for ")
        .skip(1)
        .map(|r| {
            let mut lines: Vec<String> = r.lines().take(1).map(String::from).collect();
            lines.extend(
                r.lines()
                    .filter(|l| l.starts_with("Other addresses for ") || l.starts_with("rDNS record for "))
                    .map(String::from),
            );
            for (script, port) in [("http-title", 8181), ("http-title", 8543), ("ssl-cert", 8543)] {
                lines.push(format!("{script}/{port}: {:?}", theirs(r, script, port)));
            }
            lines
        })
        .collect();
    out.sort();
    out
}

/// Two names of one address and the address itself are three targets,
/// each detected and scripted under its own name (its site, its
/// certificate) and reported on its own, with the address's reverse DNS
/// name where it is not the name given, as nmap 7.93 reports the same
/// targets in the same run (nmap's order is the command line's; moonscan's
/// is the address's, then its names').
#[test]
fn two_names_and_their_address_are_three_targets_as_nmap_scans_them() {
    let _lab = lab();
    let targets = [NAMES[0], NAMES[1], NAMED];
    let ours = in_lab(bin()).args(["-Pn", "-sV", "-sC", "-p", PORTS, "-oN", "-"]).args(targets).output().unwrap();
    assert_eq!(ours.status.code(), Some(0), "{}", stderr(&ours));
    let theirs = in_lab("nmap").args(["-Pn", "-sV", "-sC", "-p", PORTS, "-oN", "-"]).args(targets).output().unwrap();
    let (ours, theirs) = (stdout(&ours), stdout(&theirs));
    // The address given alone has no name to send in SNI, and its TLS
    // port refuses a handshake without one: no certificate in both. Its
    // HTTP requests name its reverse DNS name in Host: in both (nmap's
    // stdnse.get_hostname). nmap's nsock also sends that name in the SNI
    // of its own TLS connections (not ssl-cert's), so its http-title on
    // the TLS port reads alpha's site there; moonscan sends in SNI only a
    // name given, and reads that port as the plain HTTP nginx answers.
    let same = |mut reports: Vec<Vec<String>>| {
        for r in &mut reports {
            if r.iter().any(|l| l == "ssl-cert/8543: None") {
                r.retain(|l| !l.starts_with("http-title/8543"));
            }
        }
        reports
    };
    let got = same(reports(&ours));
    assert_eq!(got.len(), 3, "{ours}");
    assert_eq!(got, same(reports(&theirs)), "moonscan:\n{ours}\nnmap:\n{theirs}");
    let bare = got.iter().find(|r| r.iter().any(|l| l == "ssl-cert/8543: None")).expect("the address's report");
    assert!(bare.contains(&"http-title/8181: Some(\"site alpha\")".to_string()), "Host: its PTR name: {bare:?}");
    // What each target saw: beta's own site, under beta's name.
    let beta = got.iter().find(|r| r[0].starts_with("beta.")).unwrap();
    assert_eq!(beta[1], "rDNS record for 198.18.0.12: alpha.lab.moonscan.test");
    assert!(beta[2].contains("site beta") && beta[4].contains("commonName=beta.lab.moonscan.test"), "{beta:?}");
    assert!(ours.contains("(3 hosts up)"), "{ours}");
}

/// The "scan report for" lines (with "[host down]" and "rDNS record"
/// lines) of a normal output, sorted.
fn heads(text: &str) -> Vec<String> {
    let mut out: Vec<String> = text
        .lines()
        .filter(|l| l.starts_with("Nmap scan report for ") || l.starts_with("rDNS record for "))
        .map(String::from)
        .collect();
    out.sort();
    out
}

/// Reverse DNS names each host found up, as nmap's does: through
/// resolv.conf's server (moonscan's own resolver, many lookups at once),
/// `--dns-servers` and `--system-dns` (getnameinfo: hosts file, then
/// DNS) alike; every format carries the name (normal, XML's `PTR`
/// hostname, grepable, the NDJSON `rdns` event) and `-n` asks nothing.
#[test]
fn reverse_dns_names_each_host_as_nmap_does_through_each_resolver() {
    let _lab = lab();
    // target and target2 by DNS only; 198.18.0.12 in the hosts file too;
    // 198.18.0.9 (the zoo's firewalled address) has no name.
    let targets = ["198.18.0.2", "198.18.0.3", "198.18.2.17", "198.18.0.12", "198.18.0.5"];
    let nmap = in_lab("nmap").args(["-sT", "-p", "22,80", "-oN", "-"]).args(targets).output().unwrap();
    let want = heads(&stdout(&nmap));
    assert!(want.contains(&"Nmap scan report for target.lab.moonscan.test (198.18.0.2)".to_string()), "{want:?}");
    assert!(want.contains(&"Nmap scan report for 198.18.0.5".to_string()), "{want:?}");
    for via in [&[][..], &["--dns-servers", "198.18.0.2"], &["--system-dns"]] {
        let dir = tempfile::tempdir().unwrap();
        let [x, g] = ["x.xml", "g.txt"].map(|f| dir.path().join(f));
        let out = in_lab(bin())
            .args(["-sT", "-p", "22,80", "-oN", "-", "-oJ"])
            .arg(dir.path().join("j.json"))
            .arg("-oX")
            .arg(&x)
            .arg("-oG")
            .arg(&g)
            .args(via)
            .args(targets)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{via:?}: {}", stderr(&out));
        assert_eq!(heads(&stdout(&out)), want, "{via:?}: {}", stdout(&out));
        let xml = std::fs::read_to_string(&x).unwrap();
        assert!(xml.contains("<hostname name=\"live17.lab.moonscan.test\" type=\"PTR\"/>"), "{via:?}: {xml}");
        let grep = std::fs::read_to_string(&g).unwrap();
        assert!(grep.contains("Host: 198.18.0.3 (target2.lab.moonscan.test)\tStatus: Up"), "{via:?}: {grep}");
        let evs = crate::util::events(&std::fs::read_to_string(dir.path().join("j.json")).unwrap());
        let named: Vec<&str> = of_type(&evs, "rdns").iter().filter_map(|r| r["name"].as_str()).collect();
        assert_eq!(named.len(), 4, "{via:?}: {named:?}");
        assert!(of_type(&evs, "error").is_empty(), "{via:?}: {evs:#?}");
    }
    let (out, evs) = lab_scan(&["-n", "-sT", "-p", "22,80", targets[0], targets[1]]);
    assert_eq!(out.status.code(), Some(0));
    assert!(of_type(&evs, "rdns").is_empty() && of_type(&evs, "host").len() == 2, "-n: {evs:#?}");
}

/// `-R` names every target, a host down too; without it only the hosts
/// up are looked up, as nmap's; a DNS server that never answers costs the
/// scan's end at most reverse DNS's grace (3 s), says so, and fails
/// nothing.
#[test]
fn minus_r_names_hosts_down_too_and_a_silent_server_costs_at_most_the_grace() {
    let _lab = lab();
    for flags in [&["-R"][..], &[]] {
        let args = [flags, &["-sn", "-v", "-oN", "-", "198.18.2.5", "198.18.2.3"]].concat();
        let nmap = in_lab("nmap").args(&args).output().unwrap();
        let ours = in_lab(bin()).args(&args).output().unwrap();
        assert_eq!(ours.status.code(), Some(0), "{}", stderr(&ours));
        let want = heads(&stdout(&nmap));
        assert_eq!(heads(&stdout(&ours)), want, "{flags:?}: {}", stdout(&ours));
        let down = if flags.is_empty() {
            "198.18.2.5 [host down]"
        } else {
            "dead5.lab.moonscan.test (198.18.2.5) [host down]"
        };
        assert!(want.iter().any(|l| l.ends_with(down)), "{flags:?}: {want:?}");
    }
    // 198.18.2.6 is dead: a DNS server there answers nothing.
    let t0 = Instant::now();
    let (out, evs) = lab_scan(&["-sT", "-p", "22", "--dns-servers", "198.18.2.6", "198.18.0.2"]);
    let took = t0.elapsed();
    assert_eq!(out.status.code(), Some(0), "a silent DNS server fails no scan: {}", stderr(&out));
    assert!(took < Duration::from_secs(6), "{took:?}");
    assert!(of_type(&evs, "rdns").is_empty());
    let said: Vec<&str> = of_type(&evs, "error").iter().filter_map(|e| e["message"].as_str()).collect();
    assert!(said.iter().any(|m| m.contains("reverse DNS: 1 of 1 lookups got no answer")), "{said:?}");
    assert_eq!(of_type(&evs, "scan_end")[0]["errors"], 0);
}

/// A name's addresses as nmap takes them: its first IPv4 address, the
/// others said not scanned; every one with `--resolve-all`; its IPv6
/// address with `-6`; a name with only an IPv6 address refused without
/// -6 in one line that says to add it.
#[test]
fn a_names_addresses_are_scanned_as_nmap_scans_them() {
    let _lab = lab();
    for args in [
        &["-sT", "-p", "22", "two.lab.moonscan.test"][..],
        &["--resolve-all", "-sT", "-p", "22", "two.lab.moonscan.test"],
        &["-6", "-sT", "-p", "22", "six.lab.moonscan.test"],
    ] {
        let nmap = in_lab("nmap").args(args).args(["-oN", "-"]).output().unwrap();
        let ours = in_lab(bin()).args(args).args(["-oN", "-"]).output().unwrap();
        assert_eq!(ours.status.code(), Some(0), "{args:?}: {}", stderr(&ours));
        let lines = |t: &str| {
            let mut l: Vec<String> = t
                .lines()
                .filter(|l| {
                    ["Nmap scan report", "Other addresses", "rDNS record", "22/tcp"].iter().any(|p| l.starts_with(p))
                })
                .map(String::from)
                .collect();
            l.sort();
            l
        };
        let want = lines(&stdout(&nmap));
        assert!(!want.is_empty(), "{args:?}: {}", stdout(&nmap));
        assert_eq!(lines(&stdout(&ours)), want, "{args:?}: {}", stdout(&ours));
    }
    let out = in_lab(bin()).args(["-sT", "-p", "22", "six.lab.moonscan.test"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("'six.lab.moonscan.test' has only IPv6 addresses (AAAA records): scan it with -6"), "{err}");
}
