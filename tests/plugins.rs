//! The plugin host from the command line, without the lab: selection, the
//! send budget flag, the `plugins list|show|test` tooling on recorded
//! replies, and what a plugin returns. The sandbox test plugins of
//! tests/sandbox/ against the lab: tests/lab/plugins.rs.

use serde_json::Value;

use crate::util::{of_type, repo, run, stderr, stdout};

#[test]
fn selection_errors_are_clear() {
    let o = run(&["--script", "no-such-plugin", "-p", "80", "127.0.0.1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("'no-such-plugin' did not match a category, plugin id or path"), "{}", stderr(&o));
    let o = run(&["--script", "default and (safe", "-p", "80", "127.0.0.1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("unbalanced parenthesis"), "{}", stderr(&o));
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.lua");
    std::fs::write(&bad, "return { id = 'bad', description = 'd', categories = {'safe'}, ports = {80} }").unwrap();
    let o = run(&["--script", bad.to_str().unwrap(), "-p", "80", "127.0.0.1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("bad.lua: field 'run' is missing"), "{}", stderr(&o));
    assert!(!stderr(&o).contains("panicked"));
    let o = run(&["--script-timeout", "1s", "-p", "80", "127.0.0.1"]);
    assert_eq!(o.status.code(), Some(2), "--script-* without --script is refused");
}

#[test]
fn plugins_list_and_show() {
    let o = run(&["plugins", "list"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let all = stdout(&o);
    for id in ["http-title", "ssl-cert", "tls-versions-and-alpn"] {
        assert!(all.lines().any(|l| l.starts_with(id)), "{id} missing from {all}");
    }
    let o = run(&["plugins", "list", "http-* and not http-title"]);
    let some = stdout(&o);
    assert!(!some.contains("http-title") && !some.contains("ssl-cert"), "{some}");
    let o = run(&["plugins", "list", "default"]);
    assert!(stdout(&o).lines().any(|l| l.starts_with("ssl-cert") && l.contains("default")), "{}", stdout(&o));
    let o = run(&["plugins", "show", "http-title"]);
    assert_eq!(o.status.code(), Some(0));
    let show = stdout(&o);
    assert!(show.contains("categories:  default, discovery, safe") && show.contains("http-title.lua"), "{show}");
    assert_eq!(run(&["plugins", "show", "nope"]).status.code(), Some(1));
}

#[test]
fn plugins_test_runs_offline_against_a_recorded_chain() {
    let plugin = repo().join("plugins/ssl-cert.lua");
    let chain = repo().join("tests/data/tls/lab-cert.pem");
    let o = run(&[
        "plugins",
        "test",
        plugin.to_str().unwrap(),
        "--port",
        "443",
        "--tls-chain",
        chain.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let evs = crate::util::events(&stdout(&o));
    // The finding (ctx:finding), then the script result (what run returned).
    let said: Vec<(&str, &str)> = evs
        .iter()
        .filter(|e| e["type"] == "finding" || e["type"] == "script")
        .map(|e| (e["type"].as_str().unwrap(), e["title"].as_str().unwrap_or(e["plugin"].as_str().unwrap())))
        .collect();
    assert_eq!(said, [("finding", "Self-signed certificate"), ("script", "ssl-cert")]);
    // The result: nmap's ssl-cert table and text (named, so one level more verbose).
    let result = &of_type(&evs, "script")[0];
    assert!(result.get("title").is_none() && result.get("severity").is_none(), "{result}");
    let data = &result["data"];
    assert_eq!(
        data["subject"],
        serde_json::json!({"commonName": "lab.moonscan.test", "organizationName": "moonscan lab"})
    );
    assert_eq!(data["pubkey"]["type"], "rsa");
    assert_eq!(data["pubkey"]["bits"], 2048);
    let san = data["extensions"].as_array().unwrap().iter().find(|e| e["name"] == "X509v3 Subject Alternative Name");
    assert_eq!(san.unwrap()["value"], "DNS:lab.moonscan.test, DNS:www.lab.moonscan.test");
    assert!(data["pem"].as_str().unwrap().starts_with("-----BEGIN CERTIFICATE-----\n"));
    let text = result["output"].as_str().unwrap();
    assert!(text.starts_with("Subject: commonName=lab.moonscan.test/organizationName=moonscan lab\n"), "{text}");
    assert!(text.contains("\nPublic Key bits: 2048\n") && text.contains("\nSHA-1: "), "{text}");
    // A plugin that needs the network gets a clean refusal offline.
    let title = repo().join("plugins/http-title.lua");
    let o = run(&["plugins", "test", title.to_str().unwrap(), "--port", "80", "--json"]);
    assert_eq!(o.status.code(), Some(1));
    let evs = crate::util::events(&stdout(&o));
    assert!(of_type(&evs, "error")
        .iter()
        .any(|e| e["kind"] == "sandbox" && e["message"].as_str().unwrap().contains("offline")));
}

/// plugins/ is the pack "core": its pack.yaml lists every plugin file with
/// its sha256, and nothing else.
#[test]
fn the_core_pack_manifest_matches_the_plugins() {
    use sha2::Digest;
    let dir = repo().join("plugins");
    let manifest: Value = serde_yaml::from_str(&std::fs::read_to_string(dir.join("pack.yaml")).unwrap()).unwrap();
    assert_eq!(manifest["name"], "core");
    let mut listed: Vec<(String, String)> = manifest["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["file"].as_str().unwrap().to_string(), p["sha256"].as_str().unwrap().to_string()))
        .collect();
    listed.sort();
    let mut actual: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "lua"))
        .map(|p| {
            let hash = sha2::Sha256::digest(std::fs::read(&p).unwrap());
            let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
            (p.file_name().unwrap().to_string_lossy().into_owned(), hex)
        })
        .collect();
    actual.sort();
    let yaml: String = actual.iter().map(|(f, h)| format!("  - file: {f}\n    sha256: {h}\n")).collect();
    assert_eq!(listed, actual, "plugins/pack.yaml is out of date; its plugins list should be:\n{yaml}");
}

/// A loopback server that answers every connection with `answer` after reading a request.
fn replay(answer: Vec<u8>) -> u16 {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut s in l.incoming().flatten().take(64) {
            let mut b = [0u8; 1024];
            let _ = s.set_read_timeout(Some(std::time::Duration::from_millis(500)));
            let _ = s.read(&mut b);
            let _ = s.write_all(&answer);
        }
    });
    port
}

/// examples/packs/acme-web: robots-txt against its recorded answer.
#[test]
fn the_example_pack_reads_a_recorded_robots_txt() {
    let pack = repo().join("examples/packs/acme-web");
    let port = replay(std::fs::read(pack.join("tests/robots-answer.bin")).unwrap());
    let plugin = pack.join("robots-txt.lua");
    let o = run(&["-sV", "-n", "-p", &port.to_string(), "127.0.0.1", "--script", plugin.to_str().unwrap(), "-oJ", "-"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let evs = crate::util::events(&stdout(&o));
    let f = of_type(&evs, "finding");
    assert_eq!(f.len(), 1, "{evs:?}");
    // Its own results: the recorded server is no service a rule names, so
    // -sV adds its fingerprint-strings, as nmap does when scripts run.
    let own: Vec<_> = of_type(&evs, "script").into_iter().filter(|e| e["plugin"] == "robots-txt").collect();
    assert!(own.is_empty(), "it returns nothing: {evs:?}");
    assert_eq!(f[0]["title"], "2 disallowed path(s) in robots.txt");
    assert_eq!(f[0]["data"]["disallowed"], serde_json::json!(["/admin/", "/backup.tar.gz"]));
}

/// A server no rule names: -sV keeps its replies as nmap's service
/// fingerprint (-oX `servicefp`, the -oN submission block), and scripts
/// (not -sV's own version plugins alone) add nmap's fingerprint-strings.
#[test]
fn an_unrecognised_service_gets_nmaps_fingerprint_and_fingerprint_strings_with_scripts() {
    let port = replay(b"MOONSCAN-TEST-SERVICE 4.2 ready\r\n".to_vec());
    let p = port.to_string();
    let dir = tempfile::tempdir().unwrap();
    let (xml, normal) = (dir.path().join("scan.xml"), dir.path().join("scan.nmap"));
    let (xml_s, normal_s) = (xml.to_str().unwrap(), normal.to_str().unwrap());
    let o = run(&["-sV", "-n", "-p", &p, "127.0.0.1", "-oJ", "-", "-oX", xml_s, "-oN", normal_s]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let evs = crate::util::events(&stdout(&o));
    let s = of_type(&evs, "service").into_iter().next().expect("a service event");
    assert!(s["replies"].as_array().is_some_and(|r| !r.is_empty()), "{s}");
    assert!(of_type(&evs, "script").iter().all(|e| e["plugin"] != "fingerprint-strings"), "{evs:?}");
    let xml = std::fs::read_to_string(&xml).unwrap();
    assert!(xml.contains(&format!("servicefp=\"SF-Port{port}-TCP:V=moonscan-")), "{xml}");
    assert!(xml.contains("MOONSCAN-TEST-SERVICE\\x204\\.2"), "{xml}");
    let normal = std::fs::read_to_string(&normal).unwrap();
    assert!(normal.contains("1 service unrecognized despite returning data."), "{normal}");
    assert!(normal.contains(&format!("SF-Port{port}-TCP:V=moonscan-")), "{normal}");
    // With scripts: fingerprint-strings, its text the reply's (a server of
    // its own: each serves 64 connections).
    let p = replay(b"MOONSCAN-TEST-SERVICE 4.2 ready\r\n".to_vec()).to_string();
    let plugin = repo().join("examples/packs/acme-web/robots-txt.lua");
    let o = run(&["-sV", "-n", "-p", &p, "127.0.0.1", "--script", plugin.to_str().unwrap(), "-oJ", "-"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let evs = crate::util::events(&stdout(&o));
    let fs = of_type(&evs, "script")
        .into_iter()
        .find(|e| e["plugin"] == "fingerprint-strings")
        .expect("fingerprint-strings");
    assert!(fs["output"].as_str().unwrap().contains("MOONSCAN-TEST-SERVICE 4.2 ready"), "{fs}");
}

/// --script-max-send: a plugin sending bulk to a loopback listener is
/// stopped at the budget (no lab).
#[test]
fn the_send_budget_flag_trips() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port().to_string();
    let plugin = repo().join("tests/data/plugins/send-bulk.lua");
    let args = ["-sT", "-n", "-p", &port, "--script", plugin.to_str().unwrap(), "--script-max-send", "200000"];
    let out = run(&[&args[..], &["-oJ", "-", "127.0.0.1"]].concat());
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let evs = crate::util::events(&stdout(&out));
    let errors = of_type(&evs, "error");
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0]["kind"], "budget");
    assert!(errors[0]["message"].as_str().unwrap().contains("sent more than 200000 bytes"), "{errors:?}");
    assert!(of_type(&evs, "finding").is_empty(), "{evs:?}");
    assert!(of_type(&evs, "script").is_empty(), "{evs:?}");
}

/// What a plugin's `run` returns is a script event (no severity, no
/// title); `ctx:finding` makes a finding event (never with a script
/// result's `output`); scan_end counts each apart. Four plugins on two
/// loopback ports (no lab): one returns a table and its text and makes two
/// findings, one returns text alone, host-scoped, one makes a finding and
/// returns nothing, one returns `nil, why` (a log line, neither event).
#[test]
fn returned_values_are_script_events_and_ctx_finding_calls_are_findings() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = |id: &str, body: &str| {
        let path = dir.path().join(format!("{id}.lua"));
        std::fs::write(
            &path,
            format!(
                "return {{ id = '{id}', description = 'd', categories = {{'test'}},\n\
                 portrule = function() return true end,\n{body} }}"
            ),
        )
        .unwrap();
        path.to_str().unwrap().to_string()
    };
    let both = plugin(
        "both",
        "volatile = {'when'},\n\
         run = function(ctx)\n\
           ctx:finding{ severity = 'low', title = 'first', data = { n = 1 } }\n\
           ctx:finding{ severity = 'high', title = 'second' }\n\
           return { k = 'v', when = 'now' }, 'the text'\n\
         end",
    );
    let text = plugin("text", "scope = 'host',\nrun = function(ctx) return 'hello' end");
    let found = plugin("found", "run = function(ctx) ctx:finding{ title = 'only a finding' } end");
    let quiet = plugin("quiet", "run = function(ctx) return nil, 'nothing to say' end");
    let listeners: Vec<_> = (0..2).map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap()).collect();
    let ports: Vec<u16> = listeners.iter().map(|l| l.local_addr().unwrap().port()).collect();
    let port_list = format!("{},{}", ports[0], ports[1]);
    let scripts = [both, text, found, quiet].join(",");
    let o = run(&["-sT", "-n", "-p", &port_list, "--script", &scripts, "127.0.0.1", "-oJ", "-"]);
    drop(listeners);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let evs = crate::util::events(&stdout(&o));
    let findings = of_type(&evs, "finding");
    let results = of_type(&evs, "script");

    // Findings: only the ctx:finding calls, with severity and title, never an output.
    let mut titles: Vec<(u64, &str, &str, &str)> = findings
        .iter()
        .map(|f| {
            assert!(f.get("output").is_none(), "a finding with a script result's text: {f}");
            let s = |k: &str| f[k].as_str().unwrap_or_else(|| panic!("no {k}: {f}"));
            (f["port"].as_u64().unwrap(), s("plugin"), s("severity"), s("title"))
        })
        .collect();
    titles.sort();
    let mut want = Vec::new();
    for &p in &ports {
        want.extend([
            (p as u64, "both", "high", "second"),
            (p as u64, "both", "low", "first"),
            (p as u64, "found", "info", "only a finding"),
        ]);
    }
    want.sort();
    assert_eq!(titles, want, "{evs:#?}");
    assert_eq!(findings.iter().find(|f| f["title"] == "first").unwrap()["data"], serde_json::json!({"n": 1}));

    // Script results: what run returned, with no severity or title.
    for r in &results {
        assert_eq!((r["ip"].as_str(), r["proto"].as_str()), (Some("127.0.0.1"), Some("tcp")), "{r}");
        assert!(r.get("severity").is_none() && r.get("title").is_none() && r.get("about").is_none(), "{r}");
        assert!(r["scan_id"].is_string() && r["t"].is_number(), "{r}");
    }
    for &p in &ports {
        let of = |plugin: &str| -> Vec<&Value> {
            results.iter().copied().filter(|r| r["plugin"] == plugin && r["port"] == p).collect()
        };
        let table = of("both");
        assert_eq!(table.len(), 1, "{evs:#?}");
        assert_eq!(table[0]["output"], "the text");
        assert_eq!(table[0]["data"], serde_json::json!({"k": "v", "when": "now"}));
        assert_eq!(table[0]["volatile"], serde_json::json!(["when"]));
        assert!(table[0].get("host").is_none(), "{}", table[0]);
        let host = of("text");
        assert_eq!(host.len(), 1, "{evs:#?}");
        assert_eq!(host[0]["output"], "hello");
        assert_eq!(host[0]["host"], true);
        // Text alone: no data; nothing declared volatile: no list.
        assert!(host[0].get("data").is_none() && host[0].get("volatile").is_none(), "{}", host[0]);
        assert!(of("found").is_empty() && of("quiet").is_empty(), "{evs:#?}");
    }
    assert_eq!(results.len(), 4, "{evs:#?}");
    // `nil, why` is neither: a log line.
    assert!(!findings.iter().any(|f| f["plugin"] == "quiet"), "{evs:#?}");
    assert!(of_type(&evs, "log").iter().any(|l| l["message"].as_str().unwrap().contains("nothing to say")));

    // scan_end counts each apart.
    let end = evs.last().unwrap();
    assert_eq!(end["type"], "scan_end", "{end}");
    assert_eq!(end["findings"].as_u64(), Some(findings.len() as u64), "{end}");
    assert_eq!(end["scripts"].as_u64(), Some(results.len() as u64), "{end}");
    assert_eq!((findings.len(), results.len()), (6, 4));
}
