//! nmap's formats (`-oX`, `-oN`, `-oG`, `-oA`) as nmap's own clients read
//! them: python-libnmap reads the XML of a lab scan and finds what the
//! scan's NDJSON says, the XML is valid against nmap's DTD, and Debian's
//! ndiff compares two scans and reports the port that changed.
//! scripts/test.sh installs python3-libnmap, ndiff and xmllint.
//! What needs no lab is in tests/outputs.rs.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

use crate::service::{add_hostile_address, Hostile, HOSTILE_IP as CHANGING};
use crate::util::{bin, events, in_lab, lab, stderr, stdout, wait_for_events, TARGET};

/// Debian's Python, where python3-libnmap is installed (a Python of one's
/// own may come first on PATH).
fn python() -> &'static str {
    if Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    }
}

/// What python-libnmap reads from an nmap XML file, as JSON.
const LIBNMAP_SUMMARY: &str = r#"
import json, sys
from libnmap.parser import NmapParser

r = NmapParser.parse_fromfile(sys.argv[1])
hosts = {}
for h in r.hosts:
    ports = {}
    for s in h.services:
        b = s.banner_dict
        ports[str(s.port)] = {
            "state": s.state,
            "service": s.service,
            "tunnel": s.tunnel,
            "product": b.get("product", ""),
            "version": b.get("version", ""),
            "extrainfo": b.get("extrainfo", ""),
            "scripts": {sc["id"]: sc["output"] for sc in s.scripts_results},
        }
    hosts[h.address] = {"up": h.is_up(), "ports": ports}
print(json.dumps({
    "version": r.version,
    "scan_type": r.scan_type,
    "numservices": r.numservices,
    "hosts_up": r.hosts_up,
    "hosts_total": r.hosts_total,
    "elapsed": r.elapsed,
    "consistent": r.is_consistent(),
    "hosts": hosts,
}))
"#;

/// Each script's `output` as moonscan writes it, from what its plugin said
/// (`=text` for the result, titles for findings): the result's text, with
/// the plugin's findings under `moonscan-findings`; else the findings'
/// titles, each line starting one (their data follows it).
fn script_texts(said: BTreeMap<String, Vec<String>>) -> Value {
    let mut out = serde_json::Map::new();
    let mut extra = Vec::new();
    for (id, items) in said {
        match items.iter().find_map(|i| i.strip_prefix('=')) {
            Some(text) => {
                out.insert(id.clone(), text.into());
                extra.extend(items.iter().filter(|i| !i.starts_with('=')).map(|t| format!("{id}: {t}")));
            }
            None => {
                out.insert(id, Value::from(format!("titles: {}", items.join(" | "))));
            }
        }
    }
    if !extra.is_empty() {
        out.insert("moonscan-findings".into(), Value::from(format!("findings: {}", extra.join(" | "))));
    }
    Value::Object(out)
}

/// Whether the `output` libnmap read is what `script_texts` expects.
fn output_matches(want: &str, got: &str) -> bool {
    if let Some(titles) = want.strip_prefix("titles: ") {
        let lines: Vec<&str> = got.lines().collect();
        titles.split(" | ").all(|t| lines.contains(&t))
    } else if let Some(findings) = want.strip_prefix("findings: ") {
        findings.split(" | ").all(|f| got.lines().any(|l| l.ends_with(&format!("] {f}"))))
    } else {
        want == got
    }
}

/// The same summary, from the scan's NDJSON events.
fn ndjson_summary(evs: &[Value]) -> Value {
    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
    let mut hosts: BTreeMap<String, BTreeMap<String, Value>> = BTreeMap::new();
    let mut scripts: BTreeMap<(String, String), BTreeMap<String, Vec<String>>> = BTreeMap::new();
    for e in evs {
        let (ip, port) = (s(&e["ip"]), e["port"].to_string());
        match e["type"].as_str() {
            Some("port") => {
                hosts.entry(ip).or_default().insert(
                    port,
                    json!({"state": e["state"], "service": "", "tunnel": "",
                    "product": "", "version": "", "extrainfo": ""}),
                );
            }
            Some("service") => {
                let p = hosts.get_mut(&ip).and_then(|h| h.get_mut(&port)).expect("a service on a reported port");
                p["service"] = e["service"].clone();
                p["tunnel"] = s(&e["tunnel"]).into();
                p["product"] = s(&e["product"]).into();
                p["version"] = s(&e["version"]).into();
                p["extrainfo"] = s(&e["info"]).into();
            }
            // A script result by its text (the whole `output`); a finding by its title.
            Some("script") => {
                let said = format!("={}", e["output"].as_str().unwrap_or_else(|| panic!("no output: {e}")));
                scripts.entry((ip, port)).or_default().entry(s(&e["plugin"])).or_default().push(said);
            }
            Some("finding") => {
                assert!(e.get("output").is_none(), "a finding with a script result's text: {e}");
                scripts.entry((ip, port)).or_default().entry(s(&e["plugin"])).or_default().push(s(&e["title"]));
            }
            _ => {}
        }
    }
    let end = evs.last().expect("events");
    assert_eq!(end["type"], "scan_end");
    let mut out = serde_json::Map::new();
    for (ip, ports) in hosts {
        let mut pm = serde_json::Map::new();
        for (port, mut p) in ports {
            let said = scripts.remove(&(ip.clone(), port.clone())).unwrap_or_default();
            p["scripts"] = script_texts(said);
            pm.insert(port, p);
        }
        out.insert(ip, json!({"up": true, "ports": pm}));
    }
    assert!(scripts.is_empty(), "findings on unreported ports: {scripts:?}");
    let start = &evs[0];
    json!({
        "version": env!("CARGO_PKG_VERSION"),
        "scan_type": start["scan_type"],
        "numservices": 4,
        "hosts_up": out.len(),
        "hosts_total": 1,
        "elapsed": format!("{:.2}", end["elapsed"].as_f64().unwrap()).parse::<f64>().unwrap(),
        "consistent": true,
        "hosts": out,
    })
}

#[test]
fn libnmap_reads_the_xml_of_a_lab_scan_as_the_ndjson_says() {
    let _lab = lab();
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("scan");
    let json_path = dir.path().join("scan.json");
    let out = in_lab(bin())
        .args(["-n", "-sV", "-sC", "-p", "22,80,443,6379", TARGET, "-oA"])
        .arg(&base)
        .arg("-oJ")
        .arg(&json_path)
        .output()
        .expect("moonscan runs in the lab");
    let ndjson = std::fs::read_to_string(&json_path).unwrap_or_default();
    let errors: Vec<&str> = ndjson.lines().filter(|l| l.contains(r#""type":"error""#)).collect();
    assert_eq!(out.status.code(), Some(0), "{}{errors:#?}", stderr(&out));
    let evs = events(&ndjson);
    let want = ndjson_summary(&evs);
    let xml = dir.path().join("scan.xml");

    // python-libnmap finds the same hosts, ports, services and scripts.
    let py = Command::new(python())
        .arg("-c")
        .arg(LIBNMAP_SUMMARY)
        .arg(&xml)
        .output()
        .expect("python3 runs (scripts/test.sh installs python3-libnmap)");
    assert!(py.status.success(), "libnmap could not read the XML: {}", stderr(&py));
    let got: Value = serde_json::from_str(&stdout(&py)).unwrap();
    let mut read = got.clone();
    // Scripts: each output as script_texts says; the rest must be equal.
    let mut want = want;
    for (port, p) in want["hosts"][TARGET]["ports"].as_object_mut().unwrap() {
        let theirs = read["hosts"][TARGET]["ports"][port]["scripts"].take();
        let mine = p["scripts"].take();
        let (theirs, mine) = (theirs.as_object().unwrap(), mine.as_object().unwrap());
        assert_eq!(theirs.keys().collect::<Vec<_>>(), mine.keys().collect::<Vec<_>>(), "scripts on {port}");
        for (id, text) in mine {
            let (want, got) = (text.as_str().unwrap(), theirs[id].as_str().unwrap());
            assert!(output_matches(want, got), "{port} {id}: libnmap read {got:?}, the NDJSON says {want:?}");
        }
    }
    assert_eq!(read, want, "libnmap read (left) differs from the NDJSON (right)");
    // The scan is the real thing: four services with versions, plugins' scripts on each.
    let ports = got["hosts"][TARGET]["ports"].as_object().unwrap();
    let mut numbers: Vec<u16> = ports.keys().map(|p| p.parse().unwrap()).collect();
    numbers.sort_unstable();
    assert_eq!(numbers, [22, 80, 443, 6379]);
    assert_eq!((ports["22"]["service"].as_str(), ports["22"]["product"].as_str()), (Some("ssh"), Some("OpenSSH")));
    assert_eq!(ports["443"]["tunnel"], "ssl");
    assert!(ports["443"]["scripts"]["http-headers"].as_str().unwrap().contains("\n  Server: nginx/1.22.1\n"));
    assert!(ports["443"]["scripts"]["moonscan-findings"].as_str().unwrap().contains("[medium] http-headers: "));
    assert!(ports.values().all(|p| !p["scripts"].as_object().unwrap().is_empty()), "{ports:?}");

    // Valid against nmap's own DTD, but for the scanner's name (the DTD
    // allows only "nmap" there).
    let dtd = std::fs::read_to_string("/usr/share/nmap/nmap.dtd").expect("nmap's DTD (scripts/test.sh installs nmap)");
    let relaxed = dtd.replace("scanner\t\t(nmap)", "scanner CDATA");
    assert_ne!(relaxed, dtd, "the DTD's scanner attribute was found");
    let dtd_path = dir.path().join("nmap.dtd");
    std::fs::write(&dtd_path, relaxed).unwrap();
    let lint = Command::new("xmllint")
        .args(["--noout", "--dtdvalid"])
        .arg(&dtd_path)
        .arg(&xml)
        .output()
        .expect("xmllint runs (scripts/test.sh installs libxml2-utils)");
    assert!(lint.status.success(), "not valid against nmap.dtd: {}", stderr(&lint));

    // -oA also wrote the normal and grepable formats, with the same ports.
    let normal = std::fs::read_to_string(dir.path().join("scan.nmap")).unwrap();
    let grepable = std::fs::read_to_string(dir.path().join("scan.gnmap")).unwrap();
    assert!(normal.starts_with("# moonscan 0.1.0 scan initiated "), "{normal}");
    assert!(normal.contains(&format!("Nmap scan report for {TARGET}\n")), "{normal}");
    assert!(normal.contains("\nPORT     STATE SERVICE  VERSION\n"), "{normal}");
    assert!(normal.lines().last().unwrap().contains("-- 1 IP address (1 host up) scanned in "), "{normal}");
    let ports_line = grepable
        .lines()
        .find_map(|l| l.strip_prefix(&format!("Host: {TARGET} ()\tPorts: ")))
        .unwrap_or_else(|| panic!("no Ports line: {grepable}"));
    let mut seen = Vec::new();
    for entry in ports_line.split(", ") {
        let f: Vec<&str> = entry.split('/').collect();
        assert_eq!(f.len(), 8, "{entry}");
        let p = &ports[f[0]];
        let name = p["service"].as_str().unwrap();
        let tunnel = if p["tunnel"] == "ssl" { "ssl|" } else { "" };
        let version = [&p["product"], &p["version"]]
            .iter()
            .filter_map(|v| v.as_str().filter(|v| !v.is_empty()))
            .collect::<Vec<_>>()
            .join(" ");
        let version = match p["extrainfo"].as_str().unwrap() {
            "" => version,
            info => format!("{version} ({info})"),
        };
        assert_eq!(&f[1..], ["open", "tcp", "", &format!("{tunnel}{name}"), "", &version.replace('/', "|"), ""]);
        let row = normal.lines().find(|l| l.starts_with(&format!("{}/tcp ", f[0]))).unwrap();
        assert!(row.ends_with(&version), "{row}");
        for (id, output) in p["scripts"].as_object().unwrap() {
            let first = output.as_str().unwrap().lines().next().unwrap();
            assert!(normal.lines().any(|l| l == format!("| {id}: {first}") || l == format!("|_{id}: {first}")), "{id}");
        }
        seen.push(f[0]);
    }
    assert_eq!(seen, ["22", "80", "443", "6379"]);
}

#[test]
fn ndiff_reports_the_port_that_opened_between_two_scans() {
    let _lab = lab();
    add_hostile_address();
    let dir = tempfile::tempdir().unwrap();
    let scan = |name: &str| {
        let path = dir.path().join(name);
        // -v lists the closed port too, so the change is closed -> open.
        let out = in_lab(bin()).args(["-v", "-n", "-p", "22,7005", CHANGING, "-oX"]).arg(&path).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        path
    };
    let before = scan("before.xml");
    let listener = Hostile::start("endless_banner.py", 7005, &[]);
    let after = scan("after.xml");
    drop(listener);

    let ndiff = |a: &Path, b: &Path| {
        Command::new("ndiff").arg(a).arg(b).output().expect("ndiff runs (scripts/test.sh installs ndiff)")
    };
    // ndiff's exit status: 0 the same, 1 different, 2 an error.
    let out = ndiff(&before, &after);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}{}", stderr(&out));
    let lines: Vec<&str> = text.lines().collect();
    // The host, with the MAC its ARP answer gave (" 198.18.0.4, 76:EB:...:").
    assert!(lines.iter().any(|l| l.starts_with(" 198.18.0.4") && l.ends_with(':')), "{text}");
    assert!(lines.contains(&"-7005/tcp closed"), "{text}");
    assert!(lines.contains(&"+7005/tcp open"), "{text}");
    // sshd answered on 22 both times: not a difference.
    assert!(!text.contains("22/tcp"), "{text}");
    assert!(text.starts_with("-moonscan 0.1.0 scan initiated "), "{text}");

    let same = ndiff(&after, &after);
    assert_eq!(same.status.code(), Some(0), "{}{}", stdout(&same), stderr(&same));
}

/// nmaptocsv (PyPI), a tool that parses nmap's normal and XML outputs,
/// reads moonscan's -oN and -oX of a lab scan: every open port with its
/// service and version, as the NDJSON says.
#[test]
fn nmaptocsv_reads_the_normal_and_xml_outputs() {
    let _lab = lab();
    let tool = crate::util::repo().join("target/pyvenv/bin/nmaptocsv");
    assert!(tool.exists(), "{} is missing: scripts/test.sh installs it", tool.display());
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("scan");
    let out = in_lab(bin()).args(["-n", "-sV", "-sC", "-p", "22,80,443,6379", TARGET, "-oA"]).arg(&base).output();
    let out = out.expect("moonscan runs in the lab");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let want = [
        ("22", "ssh", "OpenSSH 9.2p1 Debian 2+deb12u10"),
        ("80", "http", "nginx 1.22.1"),
        ("443", "http", "nginx 1.22.1"),
        ("6379", "redis", "Redis key-value store 7.0.15"),
    ];
    for (flag, file) in [("-i", "scan.nmap"), ("-x", "scan.xml")] {
        let csv = Command::new(&tool).arg(flag).arg(dir.path().join(file)).output().expect("nmaptocsv runs");
        let text = stdout(&csv);
        assert!(csv.status.success(), "{file}: {}{text}", stderr(&csv));
        let rows: Vec<Vec<String>> = text
            .lines()
            .skip(1)
            .filter(|l| !l.trim().is_empty())
            .map(|l| l.split(';').map(|c| c.trim_matches('"').to_string()).collect())
            .collect();
        assert_eq!(rows.len(), want.len(), "{file}: {text}");
        for (row, (port, service, version)) in rows.iter().zip(want) {
            assert_eq!((row[0].as_str(), row[2].as_str(), row[3].as_str()), (TARGET, port, "tcp"), "{file}: {text}");
            // -oN names the tunnel as nmap does (ssl/http); -oX keeps it in an attribute.
            assert!(row[4] == service || row[4] == format!("ssl/{service}"), "{file}: {text}");
            assert!(row[5].starts_with(version), "{file}: {text}");
        }
    }
}

/// `--sarif FILE` writes SARIF 2.1.0 that the OASIS schema accepts
/// (jsonschema from PyPI, formats checked): one result per finding the
/// NDJSON reports, each naming its plugin's rule, and the rules carrying
/// the plugins' metadata (CWE, references, remediation) and the findings
/// their own (ssl-cert's self-signed certificate: CWE-295).
#[test]
fn sarif_is_valid_and_has_one_result_per_finding() {
    let _lab = lab();
    let repo = crate::util::repo();
    let python = repo.join("target/pyvenv/bin/python");
    assert!(python.exists(), "{} is missing: scripts/test.sh makes it", python.display());
    let dir = tempfile::tempdir().unwrap();
    let (sarif, json) = (dir.path().join("scan.sarif"), dir.path().join("scan.json"));
    let out = in_lab(bin())
        .args(["-n", "-sV", "-sC", "-p", "21,22,80,443,6379,11211", "198.18.0.3", "--sarif"])
        .arg(&sarif)
        .arg("-oJ")
        .arg(&json)
        .output()
        .expect("moonscan runs in the lab");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let check = Command::new(&python)
        .arg(repo.join("tests/sarif_check.py"))
        .arg(repo.join("tests/data/sarif-schema-2.1.0.json"))
        .arg(&sarif)
        .output()
        .expect("the virtualenv's python runs");
    assert!(check.status.success(), "{}{}", stdout(&check), stderr(&check));

    let evs = events(&std::fs::read_to_string(&json).unwrap());
    let findings: Vec<Value> = evs.iter().filter(|e| e["type"] == "finding").cloned().collect();
    // Script results (what the plugins returned) are not findings: SARIF leaves them out.
    let scripts: Vec<&Value> = evs.iter().filter(|e| e["type"] == "script").collect();
    let log: Value = serde_json::from_str(&std::fs::read_to_string(&sarif).unwrap()).unwrap();
    let run = &log["runs"][0];
    let results = run["results"].as_array().unwrap();
    assert!(findings.len() >= 10, "{findings:?}");
    assert!(scripts.len() >= 3, "{scripts:?}");
    assert_eq!(results.len(), findings.len());
    let rules = run["tool"]["driver"]["rules"].as_array().unwrap();
    for (r, f) in results.iter().zip(&findings) {
        assert_eq!(r["ruleId"], f["plugin"]);
        assert_eq!(rules[r["ruleIndex"].as_u64().unwrap() as usize]["id"], f["plugin"]);
        assert_eq!(r["properties"]["severity"], f["severity"]);
        assert_eq!(r["message"]["text"], f["title"]);
        let uri = format!("tcp://198.18.0.3:{}", f["port"]);
        assert_eq!(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"], uri.as_str());
    }
    let redis = rules.iter().find(|r| r["id"] == "redis-info").expect("redis-info's rule");
    assert_eq!(redis["properties"]["cwe"], json!(["CWE-306"]));
    assert!(redis["helpUri"].as_str().is_some_and(|u| u.starts_with("https://redis.io/")), "{redis}");
    assert!(redis["help"]["text"].as_str().is_some_and(|t| t.contains("requirepass")), "{redis}");
    let open = results.iter().find(|r| r["ruleId"] == "redis-info" && r["level"] == "error");
    assert!(open.is_some(), "the unauthenticated Redis is an error-level result: {results:?}");
    let self_signed = results.iter().find(|r| r["message"]["text"] == "Self-signed certificate").expect("self-signed");
    assert_eq!(self_signed["properties"]["cwe"], json!(["CWE-295"]));
    assert_eq!(self_signed["level"], "note");
    let ndjson_self_signed = findings.iter().find(|f| f["title"] == "Self-signed certificate").unwrap();
    assert_eq!(ndjson_self_signed["about"]["cwe"], json!(["CWE-295"]), "the NDJSON keeps a finding's own metadata");
}

/// The ports a scan does not list come out as nmap's: python-libnmap
/// reads the same `extraports` state, count and reasons from moonscan's
/// -oX as from nmap's own of the same SYN scan, and -oN's "Not shown" line
/// is nmap's.
#[test]
fn ports_not_shown_read_as_nmaps() {
    let _lab = lab();
    let dir = tempfile::tempdir().unwrap();
    let scan = ["-n", "-Pn", "-sS", "-p", "1-100", TARGET];
    let mut said = Vec::new();
    for (tool, name) in [("nmap", "nmap"), (bin(), "moonscan")] {
        let (xml, normal) = (dir.path().join(format!("{name}.xml")), dir.path().join(format!("{name}.nmap")));
        let out = in_lab(tool).args(scan).arg("-oX").arg(&xml).arg("-oN").arg(&normal).output();
        let out = out.expect("the scanner runs in the lab");
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        let read = Command::new(python())
            .arg("-c")
            .arg(
                "import json, sys\n\
                 from libnmap.parser import NmapParser\n\
                 h = NmapParser.parse_fromfile(sys.argv[1]).hosts[0]\n\
                 reasons = [{k: v for k, v in r.items() if k != 'ports'} for r in h.extraports_reasons or []]\n\
                 print(json.dumps([h.extraports_state, reasons]))",
            )
            .arg(&xml)
            .output()
            .expect("python3 runs");
        assert!(read.status.success(), "{}", stderr(&read));
        let text = std::fs::read_to_string(&normal).unwrap();
        let line = text.lines().find(|l| l.starts_with("Not shown: ")).map(str::to_string);
        said.push((stdout(&read), line));
    }
    assert_eq!(said[0], said[1], "nmap's, then moonscan's");
    assert_eq!(said[1].1.as_deref(), Some("Not shown: 98 closed tcp ports (reset)"));
}

/// A host whose every scanned port is closed is up and has its report, as
/// in nmap's (it used to vanish: no `<host>`, "0 hosts up"): python-libnmap
/// reads the same hosts, states and port rows from moonscan's -oX as from
/// nmap's (a state with at most 25 ports is listed port by port), -oN has
/// nmap's rows and summary, and -oG, NDJSON and the store (its export) say
/// the same. An interrupted -Pn scan keeps the hosts that answered.
#[test]
fn hosts_with_only_closed_ports_are_up_as_in_nmaps_reports() {
    let _lab = lab();
    let dir = tempfile::tempdir().unwrap();
    let scan = ["-n", "-Pn", "-sS", "-p", "81,82", TARGET, "198.18.0.3"];
    let mut said = Vec::new();
    for (tool, name) in [("nmap", "nmap"), (bin(), "moonscan")] {
        let (xml, normal) = (dir.path().join(format!("{name}.xml")), dir.path().join(format!("{name}.nmap")));
        let mut cmd = in_lab(tool);
        cmd.args(scan).arg("-oX").arg(&xml).arg("-oN").arg(&normal);
        if name == "moonscan" {
            let d = dir.path();
            cmd.arg("-oG").arg(d.join("m.gnmap")).arg("-oJ").arg(d.join("m.ndjson")).arg("--db").arg(d.join("m.db"));
        }
        let out = cmd.output().expect("the scanner runs in the lab");
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        let read = Command::new(python())
            .arg("-c")
            .arg(
                "import json, sys\n\
                 from libnmap.parser import NmapParser\n\
                 r = NmapParser.parse_fromfile(sys.argv[1])\n\
                 print(json.dumps([r.hosts_up, [[h.address, h.status, \
                   [[s.port, s.protocol, s.state, s.reason] for s in h.services]] for h in r.hosts]]))",
            )
            .arg(&xml)
            .output()
            .expect("python3 runs");
        assert!(read.status.success(), "{}", stderr(&read));
        let text = std::fs::read_to_string(&normal).unwrap();
        let rows: Vec<String> = text
            .lines()
            .filter(|l| l.starts_with("81/") || l.starts_with("82/") || l.contains("hosts up)"))
            .map(|l| l.split(" -- ").last().unwrap_or(l).split(" scanned").next().unwrap_or(l).to_string())
            .collect();
        said.push((stdout(&read), rows));
    }
    assert_eq!(said[0], said[1], "nmap's, then moonscan's");
    assert!(said[1].0.starts_with("[2, "), "two hosts up: {}", said[1].0);
    let grep = std::fs::read_to_string(dir.path().join("m.gnmap")).unwrap();
    assert!(grep.contains("Ports: 81/closed/tcp//hosts2-ns///, 82/closed/tcp//xfer///"), "{grep}");
    let evs = events(&std::fs::read_to_string(dir.path().join("m.ndjson")).unwrap());
    let up: Vec<&Value> = evs.iter().filter(|e| e["type"] == "host" && e["state"] == "up").collect();
    assert_eq!(up.len(), 2, "a host event for each host that answered");
    assert!(up.iter().all(|h| h["reason"] == "user-set"), "as nmap's -Pn: {up:?}");
    let db = dir.path().join("m.db");
    let db = db.to_str().unwrap();
    let list = Command::new(bin()).args(["db", "--db", db, "list"]).output().unwrap();
    let id = stdout(&list).lines().nth(1).and_then(|l| l.split_whitespace().next()).unwrap().to_string();
    let export = Command::new(bin()).args(["db", "--db", db, "export", &id, "--output-xml", "-"]).output().unwrap();
    let xml = stdout(&export);
    assert!(xml.contains("<hosts up=\"2\" down=\"0\" total=\"2\"/>"), "{xml}");
    assert!(xml.contains("portid=\"81\"><state state=\"closed\" reason=\"reset\""), "{xml}");

    // Interrupted: the host that answered (closed ports, 4 open) is up,
    // with what it answered so far.
    let xml = dir.path().join("cut.xml");
    let ndjson = dir.path().join("cut.json");
    let mut child = in_lab(bin())
        .args(["-n", "-Pn", "-sS", "-p-", "--max-rate", "3000", TARGET, "-oX"])
        .arg(&xml)
        .arg("-oJ")
        .arg(&ndjson)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Interrupted once the host has answered: an open port is on disk (and
    // closed ones, the other 65,531, with it).
    let open = |e: &Value| e["type"] == "port" && e["state"] == "open";
    wait_for_events(&ndjson, 1, open, std::time::Duration::from_secs(20));
    assert!(Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap().success());
    assert_eq!(child.wait().unwrap().code(), Some(1), "an interrupted scan exits 1");
    let cut = std::fs::read_to_string(&xml).unwrap();
    assert!(cut.contains("<hosts up=\"1\""), "{cut}");
    assert!(cut.contains("<extraports state=\"closed\""), "{cut}");
}
