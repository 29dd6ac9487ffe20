//! What nmap users see after a scan, side by side with nmap 7.93 on the
//! same lab hosts: every up host's latency and MAC vendor, a TLS plugin on
//! a port nothing identified (nmap's shortport.ssl), ssl-enum-ciphers as
//! nmap prints it, and `db diff` of two scans of an unchanged host.

use std::process::Output;

use serde_json::Value;

use crate::util::*;

fn nmap(args: &[&str]) -> String {
    let out = in_lab("nmap").args(args).output().expect("nmap runs in the lab (scripts/test.sh installs it)");
    assert!(out.status.success(), "nmap {args:?}: {}", stderr(&out));
    stdout(&out)
}

fn moonscan_text(args: &[&str]) -> (Output, String) {
    let out = in_lab(bin()).args(args).output().expect("moonscan runs in the lab");
    let text = stdout(&out);
    (out, text)
}

fn line_starting<'a>(text: &'a str, start: &str) -> Option<&'a str> {
    text.lines().find(|l| l.starts_with(start))
}

#[test]
fn every_up_host_has_its_latency_and_its_mac_named_as_nmap_names_it() {
    let _lab = lab();
    // Host discovery (ARP on the lab's link), and -Pn: both say the latency.
    for pn in [false, true] {
        let mut args = vec!["-n", "-sS", "-p", "22,81", TARGET, "-oN", "-", "-oX", "/dev/null"];
        if pn {
            args.insert(0, "-Pn");
        }
        let (out, text) = moonscan_text(&args);
        assert!(out.status.success(), "{}", stderr(&out));
        let up = line_starting(&text, "Host is up (").unwrap_or_else(|| panic!("-Pn {pn}: no latency:\n{text}"));
        let secs: f64 = up["Host is up (".len()..].split('s').next().unwrap().parse().unwrap();
        assert!(secs > 0.0 && secs < 1.0, "{up}");
    }
    // nmap's MAC line for the same host, vendor included ("Unknown" for the
    // lab's locally administered addresses, as nmap says too).
    let (out, ours) = moonscan_text(&["-n", "-sS", "-p", "22", TARGET, "-oN", "-"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let theirs = nmap(&["-n", "-sS", "-p", "22", TARGET, "-oN", "-"]);
    let mac = |t: &str| line_starting(t, "MAC Address: ").map(str::to_string);
    assert!(mac(&theirs).is_some(), "{theirs}");
    assert_eq!(mac(&ours), mac(&theirs), "ours:\n{ours}\nnmap's:\n{theirs}");
    // -oX: <times> for the host, and the MAC's address element.
    let (out, xml) = moonscan_text(&["-n", "-Pn", "-sS", "-p", "22,81", TARGET, "-oX", "-"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(xml.contains("<times srtt=\""), "{xml}");
}

/// The ssl-enum-ciphers block of an -oN text, each suite's key exchange
/// left out (the server picks its curve from each client's list, and nmap
/// lists secp256r1 first).
fn cipher_block(text: &str) -> Vec<String> {
    let start = text.lines().position(|l| l.starts_with("| ssl-enum-ciphers:")).unwrap_or_else(|| panic!("{text}"));
    let mut out = Vec::new();
    for l in text.lines().skip(start) {
        out.push(match (l.find(" ("), l.rfind(") - ")) {
            (Some(a), Some(b)) if a < b => format!("{}{}", &l[..a], &l[b + 1..]),
            _ => l.trim_end().to_string(),
        });
        if l.starts_with("|_") {
            break;
        }
    }
    out
}

#[test]
fn a_tls_plugin_tries_tls_on_a_port_nothing_identified_and_prints_as_nmap() {
    let _lab = lab();
    // 10443 on 198.19.0.5 is TLS 1.0 only, on no list of TLS ports, and
    // without -sV nothing says what it is: nmap's shortport.ssl tries TLS.
    let host = "198.19.0.5";
    let args = ["-n", "-Pn", "-sS", "--script", "ssl-enum-ciphers", "-p", "10443", host];
    let (out, evs) = lab_scan(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let scripts = of_type(&evs, "script");
    let result: &Value =
        scripts.iter().find(|s| s["plugin"] == "ssl-enum-ciphers").unwrap_or_else(|| panic!("{evs:#?}"));
    let ours: Vec<&str> =
        result["data"]["TLSv1.0"]["ciphers"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert!(!ours.is_empty() && result["data"]["TLSv1.2"].is_null(), "{result}");
    // Not a finding: the findings are the weaknesses, each with a severity.
    assert!(of_type(&evs, "finding").iter().all(|f| f["severity"] != "info"), "{evs:#?}");
    let mut with_text: Vec<&str> = args.to_vec();
    with_text.extend(["-oN", "-"]);
    let (_, text) = moonscan_text(&with_text);
    let theirs = nmap(&["-n", "-Pn", "--script", "ssl-enum-ciphers", "-p", "10443", host, "-oN", "-"]);
    assert_eq!(cipher_block(&text), cipher_block(&theirs), "ours:\n{text}\nnmap's:\n{theirs}");
    // A port that does not speak TLS gets no result and no error.
    let (out, evs) = lab_scan(&["-n", "-Pn", "-sS", "--script", "ssl-cert", "-p", "22", TARGET]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(of_type(&evs, "script").is_empty() && of_type(&evs, "error").is_empty(), "{evs:#?}");
}

#[test]
fn two_default_scans_of_an_unchanged_host_have_nothing_to_diff() {
    let _lab = lab();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("scans.db");
    let db = db.to_str().unwrap();
    let mut ids = Vec::new();
    for _ in 0..2 {
        let (out, evs) = lab_scan(&["-n", "-sS", "-sV", "-sC", "-p", "22,80,443,6379", TARGET, "--db", db]);
        assert!(out.status.success(), "{}", stderr(&out));
        // http-headers and redis-info ran: their Date and counters differ each time.
        let ran: Vec<&str> = of_type(&evs, "script").iter().map(|s| s["plugin"].as_str().unwrap()).collect();
        assert!(ran.contains(&"http-headers") && ran.contains(&"redis-info"), "{ran:?}");
        ids.push(evs[0]["scan_id"].as_str().unwrap().to_string());
    }
    let out = std::process::Command::new(bin()).args(["db", "--db", db, "diff", &ids[0], &ids[1]]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains(
            "0 opened, 0 closed, 0 services changed, 0 new findings, 0 findings gone, 0 script results changed"
        ),
        "{text}"
    );
    assert!(!text.contains("not compared"), "{text}");
}
