//! The plugin host from the command line against the lab: the sandbox test
//! plugins of tests/sandbox/, the step budget flag, default scripts, text
//! reports, script arguments and installed packs. Without the lab:
//! tests/plugins.rs.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::util::{lab, lab_scan, of_type, repo, stderr, stdout, TARGET};

/// What one plugin produced on one port: error kinds, finding titles
/// (`ctx:finding`) and script results' texts (what `run` returned).
#[derive(Clone, Debug, Default)]
struct Said {
    errors: Vec<String>,
    findings: Vec<String>,
    scripts: Vec<String>,
}

/// (port, plugin) -> what it produced.
fn by_plugin(evs: &[Value]) -> BTreeMap<(u64, String), Said> {
    let mut m: BTreeMap<(u64, String), Said> = BTreeMap::new();
    for e in evs {
        let (Some(plugin), Some(port)) = (e["plugin"].as_str(), e["port"].as_u64()) else { continue };
        let entry = m.entry((port, plugin.to_string())).or_default();
        let text = |k: &str| e[k].as_str().unwrap_or_else(|| panic!("no {k} in {e}")).to_string();
        match e["type"].as_str() {
            Some("error") => entry.errors.push(e["kind"].as_str().unwrap_or("").to_string()),
            // A finding by its title (it has no text of a script result);
            // a script result by its text (it has no title).
            Some("finding") => {
                assert!(e.get("output").is_none(), "a finding with a script result's text: {e}");
                entry.findings.push(text("title"));
            }
            Some("script") => {
                assert!(e.get("title").is_none() && e.get("severity").is_none(), "{e}");
                entry.scripts.push(text("output"));
            }
            _ => {}
        }
    }
    m
}

#[test]
fn hostile_plugins_are_contained_and_the_scan_completes() {
    let _lab = lab();
    let sandbox = repo().join("tests/sandbox/");
    let expr = format!("{},http-title", sandbox.display());
    let started = std::time::Instant::now();
    let (out, evs) = lab_scan(&[
        "-sV",
        "-n",
        "-p",
        "80,443",
        "--script",
        &expr,
        "--script-timeout",
        "500ms",
        "--script-max-memory",
        "32",
        "--exclude",
        "198.18.0.4",
        TARGET,
    ]);
    let took = started.elapsed();
    // Plugin errors are errors: the scan says so in its exit status, and still completes.
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let m = by_plugin(&evs);
    let expect: &[(&str, &[&str])] = &[
        ("sandbox-bytecode", &["plugin"]),
        ("sandbox-io", &["plugin"]),
        ("sandbox-loop", &["budget"]),
        ("sandbox-loop-pcall", &["budget"]),
        ("sandbox-pattern", &["budget"]),
        ("sandbox-rep-bomb", &["budget"]),
        ("sandbox-table-bomb", &["budget"]),
        ("sandbox-connect-other", &["sandbox"]),
        ("sandbox-connect-excluded", &["sandbox"]),
        ("sandbox-connect-name", &["sandbox"]),
        ("sandbox-errors", &["plugin"]),
        ("sandbox-garbage", &["parse"]),
        ("sandbox-finding-bomb", &["budget"]),
        ("sandbox-return-bomb", &["budget"]),
        ("sandbox-slow-calls", &["budget"]),
        ("sandbox-slow-portrule", &["budget"]),
        ("sandbox-unknown-keys", &[]),
    ];
    for port in [80u64, 443] {
        for (plugin, kinds) in expect {
            let said = m.get(&(port, plugin.to_string())).cloned().unwrap_or_default();
            assert_eq!(said.errors, *kinds, "{plugin} on {port}: {m:?}");
            let escaped = said.findings.iter().chain(&said.scripts).any(|t| t.starts_with("escaped"));
            assert!(!escaped, "{plugin} on {port} escaped: {said:?}");
        }
        // Edits to libraries and globals did not reach the next plugin.
        let check = evs
            .iter()
            .find(|e| e["plugin"] == "sandbox-zcheck-globals" && e["port"] == port && e["type"] == "finding")
            .unwrap_or_else(|| panic!("no check finding on {port}"));
        assert_eq!(check["data"], serde_json::json!({ "upper": "A", "marker": "none", "hijack": "nil" }));
        // Metamethods of returned data are never called; a yield is just a pause.
        assert_eq!(m[&(port, "sandbox-meta-return".to_string())].errors, Vec::<String>::new());
        assert_eq!(m[&(port, "sandbox-yields".to_string())].findings, ["resumed after a yield"]);
        // Unknown keys are refused by name, not ignored.
        let refused = evs
            .iter()
            .find(|e| e["plugin"] == "sandbox-unknown-keys" && e["port"] == port && e["type"] == "finding")
            .unwrap_or_else(|| panic!("no unknown-keys finding on {port}"));
        let said = |k: &str| refused["data"][k].as_str().unwrap_or_default().to_string();
        assert!(said("connect").contains("unknown key 'ip'"), "{refused}");
        assert!(said("finding").contains("unknown key 'cves'"), "{refused}");
        assert!(said("tls").contains("unknown key 'verify'"), "{refused}");
        assert!(said("http").contains("unknown key 'follow'"), "{refused}");
        assert!(said("ssh").contains("unknown key 'password'"), "{refused}");
        assert!(said("host_keys").contains("unknown key 'host'"), "{refused}");
        assert!(said("udp").contains("unknown key 'tls'"), "{refused}");
        assert!(said("host").contains("host is 8388608 bytes"), "{refused}");
        assert!(said("host").len() < 2000, "the host is not quoted: {refused}");
        // The well-behaved plugin's result is there on both ports: a script result, no finding.
        assert_eq!(m[&(port, "http-title".to_string())].scripts, ["moonscan lab"], "{m:?}");
        assert_eq!(m[&(port, "http-title".to_string())].findings, Vec::<String>::new(), "{m:?}");
    }
    assert_eq!(of_type(&evs, "service").len(), 2);
    let budgets: Vec<&str> = of_type(&evs, "error")
        .iter()
        .filter(|e| e["kind"] == "budget")
        .map(|e| e["message"].as_str().unwrap())
        .collect();
    assert!(budgets.iter().any(|m| m.contains("longer than 500 ms")), "{budgets:?}");
    assert!(budgets.iter().any(|m| m.contains("33554432 bytes of memory")), "{budgets:?}");
    assert!(took.as_secs() < 20, "took {took:?}");
}

#[test]
fn the_step_budget_flag_trips() {
    let _lab = lab();
    let loop_plugin = repo().join("tests/sandbox/loop.lua");
    let (out, evs) =
        lab_scan(&["-n", "-p", "80", "--script", loop_plugin.to_str().unwrap(), "--script-max-steps", "5000", TARGET]);
    assert_eq!(out.status.code(), Some(1));
    let errors = of_type(&evs, "error");
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0]["kind"], "budget");
    assert!(errors[0]["message"].as_str().unwrap().contains("5000 steps"));
}

#[test]
fn default_plugins_run_with_sc() {
    let _lab = lab();
    let (out, evs) = lab_scan(&["-sV", "-sC", "-n", "-p", "80,443", TARGET]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let m = by_plugin(&evs);
    assert_eq!(m[&(80, "http-title".to_string())].scripts, ["moonscan lab"]);
    let cert = &m[&(443, "ssl-cert".to_string())];
    // nmap's text for ssl-cert (its script result), then the findings.
    assert_eq!(cert.scripts.len(), 1, "{cert:?}");
    assert!(
        cert.scripts[0]
            == "Subject: commonName=lab.moonscan.test/organizationName=moonscan lab\n\
                Subject Alternative Name: DNS:lab.moonscan.test, DNS:www.lab.moonscan.test"
            || cert.scripts[0].starts_with(
                "Subject: commonName=lab.moonscan.test/organizationName=moonscan lab\n\
                 Subject Alternative Name: DNS:lab.moonscan.test, DNS:www.lab.moonscan.test\nNot valid before: "
            ),
        "{cert:?}"
    );
    assert!(cert.findings.contains(&"Self-signed certificate".to_string()), "{cert:?}");
    assert!(!m.contains_key(&(80, "ssl-cert".to_string())), "ssl-cert runs on TLS ports only");
    // tls-versions-and-alpn's result is a script result; its one finding, TLS 1.3 missing.
    let tls = &m[&(443, "tls-versions-and-alpn".to_string())];
    assert_eq!(tls.scripts, ["TLS TLSv1.2; ALPN http/1.1, http/1.0, http/0.9"], "{tls:?}");
    assert_eq!(tls.findings, ["TLS 1.3 not supported"], "{tls:?}");
    let tls = evs.iter().find(|e| e["plugin"] == "tls-versions-and-alpn" && e["type"] == "script").unwrap();
    assert_eq!(tls["data"]["alpn"], serde_json::json!(["http/1.1", "http/1.0", "http/0.9"]));
    assert_eq!(tls["data"]["versions"], serde_json::json!(["TLSv1.2"]));
    // Findings and script results stream with their port: each comes after its port's service event.
    for f in of_type(&evs, "finding").into_iter().chain(of_type(&evs, "script")) {
        let at = |t: &str| evs.iter().position(|e| e["type"] == t && e["port"] == f["port"]).unwrap();
        assert!(at("service") < evs.iter().position(|e| e == f).unwrap());
    }
    let end = evs.last().unwrap();
    assert_eq!(end["type"], "scan_end");
    assert_eq!(end["findings"].as_u64(), Some(of_type(&evs, "finding").len() as u64));
    assert_eq!(end["scripts"].as_u64(), Some(of_type(&evs, "script").len() as u64));
}

/// On a terminal, stdout is nmap's screen: the host's report with the PORT
/// STATE SERVICE VERSION table and each script's output under its port
/// (nmap's text, not JSON), then the summary; -v adds the discoveries.
#[test]
fn a_terminal_gets_nmaps_report() {
    let _lab = lab();
    for verbose in [false, true] {
        let cmd = format!(
            "ip netns exec msscan {} -sV -n -p 22,80 --script ssh-hostkey,http-title {} {TARGET} 2>/dev/null",
            crate::util::bin(),
            if verbose { "-v" } else { "" }
        );
        let out = std::process::Command::new("script")
            .args(["-qec", &cmd, "/dev/null"])
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let tty = String::from_utf8_lossy(&out.stdout).replace('\r', "");
        assert!(out.status.success(), "{tty}");
        let report =
            tty.find(&format!("moonscan scan report for {TARGET}\nHost is up")).unwrap_or_else(|| panic!("{tty}"));
        let table =
            "\nPORT   STATE SERVICE VERSION\n22/tcp open  ssh     OpenSSH 9.2p1 Debian 2+deb12u10 (protocol 2.0)\n\
                     | ssh-hostkey: \n|   3072 ";
        assert!(tty.contains(table), "{tty}");
        assert!(tty.contains("\n80/tcp open  http    nginx 1.22.1\n|_http-title: moonscan lab\n"), "{tty}");
        let done = tty.find("moonscan done: ").unwrap_or_else(|| panic!("{tty}"));
        assert!(report < done, "{tty}");
        // Discoveries as they come only with -v, before the report.
        let discovered = tty.find("Discovered open port 22/tcp on 198.18.0.2");
        assert_eq!(discovered.is_some(), verbose, "{tty}");
        assert!(discovered.is_none_or(|d| d < report), "{tty}");
    }
}

#[test]
fn text_output_shows_findings_under_their_port() {
    let _lab = lab();
    let out = crate::util::in_lab(crate::util::bin())
        .args(["-n", "-p", "80", "--script", "http-title", TARGET])
        .output()
        .unwrap();
    let text = stdout(&out);
    // A script result: its text, as nmap's http-title prints it.
    assert!(text.contains("| http-title on 80/tcp on 198.18.0.2: moonscan lab"), "{text}");
    // Counted as a script result, not a finding.
    assert!(text.contains(" 0 findings, 1 script results, "), "{text}");
}

#[test]
fn script_args_come_from_the_flag_and_the_file() {
    let _lab = lab();
    let dir = tempfile::tempdir().unwrap();
    let plugin = dir.path().join("args.lua");
    std::fs::write(
        &plugin,
        "return { id = 'args', description = 'd', categories = {'test'}, ports = {80}, args = {'a', 'b'},\n\
         run = function(ctx) return { a = ctx.args.a, b = ctx.args.b, c = ctx.args.c } end }",
    )
    .unwrap();
    let file = dir.path().join("args.txt");
    std::fs::write(&file, "# plugin arguments\na=1\nb = two words\n").unwrap();
    let (out, evs) = lab_scan(&[
        "-n",
        "-p",
        "80",
        "--script",
        plugin.to_str().unwrap(),
        "--script-args-file",
        file.to_str().unwrap(),
        "--script-args",
        "c=3,a=flag wins",
        TARGET,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // What run returned: a script result.
    assert!(of_type(&evs, "finding").is_empty(), "{evs:?}");
    let f = of_type(&evs, "script");
    assert_eq!(f.len(), 1);
    assert_eq!(f[0]["data"], serde_json::json!({ "a": "flag wins", "b": "two words", "c": "3" }));
    // The plugin declares a and b: c is said to be read by no selected plugin.
    let said = stderr(&out);
    assert!(said.lines().any(|l| l == "moonscan: --script-args: no selected plugin reads c"), "{said}");
}

/// examples/packs/acme-web: redis-keyspace against the lab's Redis with keys in it.
#[test]
fn the_example_pack_counts_the_lab_redis_keys() {
    let _lab = lab();
    let redis = |args: &[&str]| {
        let st = std::process::Command::new("ip")
            .args(["netns", "exec", "mstarget", "redis-cli", "-h", "198.18.0.2"])
            .args(args)
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(st.success(), "redis-cli {args:?}");
    };
    for (db, key) in [("0", "a"), ("0", "b"), ("0", "c"), ("2", "d")] {
        redis(&["-n", db, "SET", key, "1"]);
    }
    let plugin = repo().join("examples/packs/acme-web/redis-keyspace.lua");
    let (out, evs) = lab_scan(&["-n", "-p", "6379", "--script", plugin.to_str().unwrap(), TARGET]);
    redis(&["FLUSHALL"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let f = of_type(&evs, "finding");
    assert_eq!(f.len(), 1, "{evs:?}");
    assert!(of_type(&evs, "script").is_empty(), "it returns nothing: {evs:?}");
    assert_eq!(f[0]["severity"], "medium");
    assert_eq!(f[0]["data"], serde_json::json!({ "databases": { "db0": 3, "db2": 1 }, "total": 4 }));
}

/// From the example pack folder to findings: keygen, sign, trust, install,
/// select by `pack:*`; then an untrusted install runs only by name, and a
/// lock file that pins another version stops the scan.
#[test]
fn an_installed_pack_is_selected_by_name_category_and_lock() {
    let _lab = lab();
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let pack = work.path().join("acme-web");
    std::fs::create_dir(&pack).unwrap();
    for f in ["pack.yaml", "robots-txt.lua", "redis-keyspace.lua"] {
        std::fs::copy(repo().join("examples/packs/acme-web").join(f), pack.join(f)).unwrap();
    }
    let moonscan = |args: &[&str]| {
        let o = std::process::Command::new(crate::util::bin())
            .args(args)
            .env("MOONSCAN_HOME", home.path())
            .current_dir(work.path())
            .output()
            .unwrap();
        (o.status.code(), format!("{}{}", stdout(&o), stderr(&o)))
    };
    let scan = |extra: &[&str]| {
        let o = crate::util::in_lab(crate::util::bin())
            .args(["-n", "-p", "6379", TARGET, "-oJ", "-"])
            .args(extra)
            .env("MOONSCAN_HOME", home.path())
            .current_dir(work.path())
            .output()
            .unwrap();
        (o.status.code(), crate::util::events(&stdout(&o)), stderr(&o))
    };
    // The plugins that said something: a finding or a script result.
    let plugin_names = |evs: &[Value]| -> Vec<String> {
        evs.iter()
            .filter(|e| e["type"] == "finding" || e["type"] == "script")
            .map(|e| e["plugin"].as_str().unwrap().to_string())
            .collect()
    };
    let key = work.path().join("acme");
    assert_eq!(moonscan(&["pack", "keygen", "-o", key.to_str().unwrap()]).0, Some(0));
    let keyfile = format!("{}.key", key.display());
    let pubfile = format!("{}.pub", key.display());
    let (code, text) = moonscan(&["pack", "sign", pack.to_str().unwrap(), "--key", &keyfile]);
    assert_eq!(code, Some(0), "{text}");

    // Signed by a key not trusted: installs only with --allow-unsigned, and then runs only by name.
    let (code, text) = moonscan(&["pack", "install", pack.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{text}");
    let (code, text) = moonscan(&["pack", "install", pack.to_str().unwrap(), "--allow-unsigned"]);
    assert_eq!(code, Some(0), "{text}");
    let (code, evs, err) = scan(&["--script", "discovery"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(!plugin_names(&evs).iter().any(|p| p.starts_with("acme-web:")), "a category ran an untrusted plugin");
    let (_, evs, err) = scan(&["--script", "acme-web:redis-keyspace"]);
    assert_eq!(plugin_names(&evs), ["acme-web:redis-keyspace"], "{err}");

    // Trusted: categories and pack globs select it too.
    assert_eq!(moonscan(&["pack", "trust", "add", &pubfile]).0, Some(0));
    let (code, evs, err) = scan(&["--script", "acme-web:*"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(plugin_names(&evs), ["acme-web:redis-keyspace"]);
    let (_, evs, _) = scan(&["--script", "discovery and not redis-info and not banner"]);
    assert!(plugin_names(&evs).contains(&"acme-web:redis-keyspace".to_string()));

    // A lock file pins the pack; a different version installed is refused.
    assert_eq!(moonscan(&["pack", "lock", "-o", "moonscan.lock"]).0, Some(0));
    let (code, _, err) = scan(&["--script", "acme-web:*"]);
    assert_eq!(code, Some(0), "the lock matches: {err}");
    let yaml = std::fs::read_to_string(pack.join("pack.yaml")).unwrap().replace("version: 1.0.0", "version: 1.1.0");
    std::fs::write(pack.join("pack.yaml"), yaml).unwrap();
    assert_eq!(moonscan(&["pack", "sign", pack.to_str().unwrap(), "--key", &keyfile]).0, Some(0));
    assert_eq!(moonscan(&["pack", "install", pack.to_str().unwrap()]).0, Some(0));
    let (code, evs, err) = scan(&["--script", "acme-web:*"]);
    assert_ne!(code, Some(0));
    assert!(err.contains("acme-web") && err.contains("moonscan.lock"), "{err}");
    assert!(evs.is_empty(), "nothing ran");
}
