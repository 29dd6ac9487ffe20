//! Service detection on real daemons: every port of the lab's daemon zoo
//! (scripts/lab-daemons.sh) and its core services, scanned with
//! `moonscan -sV` and with nmap 7.93's `-sV` in the same test run, compared
//! port by port by tests/sv_compare.py. moonscan must name every port nmap
//! names as nmap does (service, product, and version where nmap gives one).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::util::{bin, in_lab, lab, repo, stderr, stdout};

/// The targets of `scripts/lab.sh ports`: address and its ports.
fn lab_targets() -> Vec<(String, Vec<u16>)> {
    let out = Command::new("bash").arg(repo().join("scripts/lab.sh")).arg("ports").output().expect("lab.sh runs");
    assert!(out.status.success(), "{}", stderr(&out));
    stdout(&out)
        .lines()
        .map(|l| {
            let (addr, ports) = l.split_once(':').unwrap_or_else(|| panic!("bad lab.sh ports line {l:?}"));
            (addr.to_string(), ports.split(',').map(|p| p.parse().expect("a port")).collect())
        })
        .collect()
}

/// Runs tests/sv_compare.py: one JSON object per port, then the summary.
fn compare(nmap: &Path, ours: &Path) -> (Vec<Value>, Value) {
    let out = Command::new("python3")
        .arg(repo().join("tests/sv_compare.py"))
        .args([nmap, ours])
        .output()
        .expect("python3 runs (scripts/test.sh installs it)");
    assert!(out.status.success(), "sv_compare.py: {}", stderr(&out));
    let mut lines: Vec<Value> = stdout(&out).lines().map(|l| serde_json::from_str(l).expect("JSON")).collect();
    let summary = lines.pop().expect("a summary line");
    (lines, summary)
}

fn said(s: &Value) -> String {
    let f = |k: &str| s[k].as_str().unwrap_or("").to_string();
    format!("{} | {} | {} | {}", f("name"), f("product"), f("version"), f("extrainfo"))
}

#[test]
fn every_lab_daemon_is_named_as_nmap_names_it() {
    // Both scans hold the lab, nmap's three minutes too: its connections
    // would show up in what other tests watch (TIME_WAIT, packet counts).
    let _lab = lab();
    let targets = lab_targets();
    let mut all: Vec<u16> = targets.iter().flat_map(|(_, p)| p.iter().copied()).collect();
    all.sort();
    all.dedup();
    let ports = all.iter().map(u16::to_string).collect::<Vec<_>>().join(",");
    let addrs: Vec<&str> = targets.iter().map(|(a, _)| a.as_str()).collect();
    let dir = tempfile::tempdir().unwrap();
    let (nmap_xml, ours_xml) = (dir.path().join("nmap.xml"), dir.path().join("moonscan.xml"));

    let nmap = in_lab("nmap")
        .args(["-n", "-Pn", "-sV", "-p", &ports, "-oX"])
        .arg(&nmap_xml)
        .args(&addrs)
        .output()
        .expect("nmap runs (scripts/test.sh installs it)");
    assert!(nmap.status.success(), "nmap: {}", stderr(&nmap));
    let ours = in_lab(bin())
        .args(["-n", "-sV", "-p", &ports, "-oX"])
        .arg(&ours_xml)
        .args(&addrs)
        .output()
        .expect("moonscan runs");
    assert_eq!(ours.status.code(), Some(0), "{}", stderr(&ours));

    let (rows, summary) = compare(&nmap_xml, &ours_xml);
    let by_port: BTreeMap<(String, u64), &Value> =
        rows.iter().map(|r| ((r["addr"].as_str().unwrap().to_string(), r["port"].as_u64().unwrap()), r)).collect();
    let table = rows
        .iter()
        .map(|r| {
            format!(
                "{:<9} {}:{:<5} nmap: {:<55} moonscan: {}",
                r["verdict"].as_str().unwrap(),
                r["addr"].as_str().unwrap(),
                r["port"],
                said(&r["nmap"]),
                said(&r["moonscan"])
            )
        })
        .collect::<Vec<_>>()
        .join("\n");

    // Every daemon of the lab is up and open to both scanners: a daemon that
    // did not start fails here, by name of its port, never silently.
    let mut closed = vec![];
    for (addr, ports) in &targets {
        for &p in ports {
            if !by_port.contains_key(&(addr.clone(), u64::from(p))) {
                closed.push(format!("{addr}:{p}"));
            }
        }
    }
    assert!(
        closed.is_empty(),
        "every lab daemon's port open to both scanners expected; open to neither: {closed:?} (their daemons did not \
         come up: scripts/lab.sh status)\n{table}"
    );

    // Every port nmap names, moonscan names the same: those nmap names
    // beyond its probes too (rpcbind on 111 by its RPC grinder, time on 37
    // by its rfc868-time version script; engine/service/rpc.rs and
    // ctx:set_service do the same).
    let wrong: Vec<&Value> =
        rows.iter().filter(|r| matches!(r["verdict"].as_str(), Some("missing" | "different"))).collect();
    assert!(wrong.is_empty(), "{} port(s) named otherwise than nmap names them:\n{table}", wrong.len());
    let (n, m) = (summary["nmap_identified"].as_u64().unwrap(), summary["moonscan_identified"].as_u64().unwrap());
    assert!(n >= 60, "nmap identified only {n} lab ports: is the zoo up?\n{table}");
    assert!(m >= n, "moonscan identified {m} ports, nmap {n}\n{table}");
}

/// nmap's RPC grinder names rpcbind's port by its program and versions;
/// moonscan's -sV (engine/service/rpc.rs) names it the same, as nmap
/// 7.93 writes it: `rpcbind 2-4 (RPC #100000)`, method probed, in -oX.
#[test]
fn rpcbind_is_named_by_the_rpc_grinder_as_nmap_names_it() {
    let _lab = lab();
    let dir = tempfile::tempdir().unwrap();
    let xml = dir.path().join("rpc.xml");
    let ours = in_lab(bin()).args(["-n", "-Pn", "-sV", "-p", "111", "198.18.0.5", "-oX"]).arg(&xml).output().unwrap();
    assert_eq!(ours.status.code(), Some(0), "{}", stderr(&ours));
    let text = std::fs::read_to_string(&xml).unwrap();
    let want = r#"<service name="rpcbind" version="2-4" extrainfo="RPC #100000" method="probed" conf="10"/>"#;
    assert!(text.contains(want), "{text}");
}
