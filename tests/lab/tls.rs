//! TLS beyond rustls: the lab's legacy servers (TLS 1.0 or 1.1 only, RSA
//! key exchange, 1024-bit DHE, NULL and anonymous suites) give their chain
//! under -sV, read from their first flight; hostile TLS servers end in clear
//! errors with bounded memory.

use serde_json::Value;

use crate::service::{Hostile, HOSTILE_IP};
use crate::util::{lab, lab_scan, of_type, stderr, TARGET};

fn service<'a>(evs: &'a [Value], ip: &str, port: u16) -> &'a Value {
    of_type(evs, "service")
        .into_iter()
        .find(|e| e["ip"] == ip && e["port"] == port)
        .unwrap_or_else(|| panic!("no service event for {ip}:{port} in {evs:#?}"))
}

#[test]
fn legacy_servers_give_their_chain_under_sv() {
    let _lab = lab();
    let targets = ["198.18.0.7", "198.18.0.8", "198.18.0.9", "198.18.0.10", "198.18.0.11"];
    let mut args = vec!["-sV", "-n", "-Pn", "-p", "443", TARGET];
    args.extend(targets);
    let (out, evs) = lab_scan(&args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // (address, version, key exchange, its bits, a suite property)
    let expect = [
        ("198.18.0.7", "TLSv1.0", "ecdhe", 253, "_CBC_"),
        ("198.18.0.8", "TLSv1.1", "ecdhe", 253, "_CBC_"),
        ("198.18.0.9", "TLSv1.2", "rsa", 2048, "TLS_RSA_WITH_"),
        ("198.18.0.10", "TLSv1.2", "dhe", 1024, "TLS_DHE_RSA_WITH_"),
        ("198.18.0.11", "TLSv1.2", "ecdhe", 253, "_WITH_NULL_"),
    ];
    for (ip, version, kx, bits, suite) in expect {
        let s = service(&evs, ip, 443);
        let tls = &s["tls"];
        assert_eq!(tls["path"], "hello", "{ip}: {s}");
        assert_eq!(
            (tls["version"].as_str(), tls["kx"].as_str(), tls["kx_bits"].as_u64()),
            (Some(version), Some(kx), Some(bits)),
            "{ip}: {tls}"
        );
        assert!(tls["cipher"].as_str().unwrap().contains(suite), "{ip}: {tls}");
        let chain = tls["chain"].as_array().unwrap();
        assert_eq!(chain.len(), 1, "{ip}: {tls}");
        assert_eq!(chain[0]["subject"], "CN=lab.moonscan.test, O=moonscan lab");
        assert_eq!((chain[0]["key_type"].as_str(), chain[0]["key_bits"].as_u64()), (Some("rsa"), Some(2048)));
        assert_eq!(tls["ja3s"].as_str().map(str::len), Some(32), "{tls}");
        assert!(tls["ja4s"].as_str().unwrap().starts_with(&format!("t{}", &version[4..].replace('.', ""))), "{tls}");
        // The service inside, from what it answers in the clear: nginx.
        assert_eq!(
            (s["service"].as_str(), s["tunnel"].as_str(), s["product"].as_str()),
            (Some("http"), Some("ssl"), Some("nginx")),
            "{ip}: {s}"
        );
    }
    // A server rustls talks to is read by rustls, fingerprinted too.
    let tls = &service(&evs, TARGET, 443)["tls"];
    assert_eq!(tls["path"], "rustls");
    assert_eq!((tls["kx"].as_str(), tls["group"].as_str()), (Some("ecdhe"), Some("x25519")), "{tls}");
    assert!(tls["ja4s"].as_str().unwrap().starts_with("t1"), "{tls}");
    assert!(of_type(&evs, "error").is_empty(), "{:?}", of_type(&evs, "error"));
}

/// A TLS 1.0-only server on a port no probe lists as TLS (10443 on every
/// address of 198.19.0.0/16): what it answers a GET in the clear says it is
/// HTTPS, so it is reported as TLS with its chain, never as cleartext.
#[test]
fn a_legacy_server_on_an_unlisted_port_is_reported_as_tls() {
    let _lab = lab();
    let (out, evs) = lab_scan(&["-sV", "-n", "-Pn", "-p", "10443", "198.19.4.0/30"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    for i in 0..4 {
        let ip = format!("198.19.4.{i}");
        let s = service(&evs, &ip, 10443);
        assert_eq!(
            (s["service"].as_str(), s["tunnel"].as_str(), s["product"].as_str()),
            (Some("http"), Some("ssl"), Some("nginx")),
            "{ip}: {s}"
        );
        let tls = &s["tls"];
        assert_eq!((tls["path"].as_str(), tls["version"].as_str()), (Some("hello"), Some("TLSv1.0")), "{tls}");
        assert_eq!(tls["chain"][0]["subject"], "CN=lab.moonscan.test, O=moonscan lab");
    }
    // Elsewhere the port is closed (the lab's firewall resets it).
    let (_, evs) = lab_scan(&["-sT", "-n", "-Pn", "-p", "10443", TARGET]);
    let end = of_type(&evs, "scan_end")[0];
    assert_eq!((end["open"].as_u64(), end["closed"].as_u64()), (Some(0), Some(1)), "{end}");
}

#[test]
fn hostile_tls_servers_end_in_clear_errors_with_bounded_memory() {
    let _lab = lab();
    let _servers = [
        Hostile::start("tls_huge_extensions.py", 990, &[]),
        Hostile::start("tls_huge_certificate.py", 992, &[]),
        Hostile::start("tls_version_shuffle.py", 3269, &[]),
    ];
    let started = std::time::Instant::now();
    let (out, rss_kb) = crate::service::time_v(&[
        "-sV",
        "-n",
        "-Pn",
        "--service-timeout",
        "5s",
        "-p",
        "990,992,3269",
        HOSTILE_IP,
        "-oJ",
        "-",
    ]);
    let took = started.elapsed();
    let evs = crate::util::events(&crate::util::stdout(&out));
    let errors = of_type(&evs, "error");
    let message = |port: u16| {
        let e = errors.iter().find(|e| e["port"] == port).unwrap_or_else(|| panic!("no error for {port}: {errors:?}"));
        e["message"].as_str().unwrap().to_string()
    };
    for port in [990, 992, 3269] {
        assert!(service(&evs, HOSTILE_IP, port)["tls"].is_null(), "port {port}");
    }
    // 16 MB claimed: refused from the header.
    let m = message(992);
    assert!(m.contains("Certificate message claims 16777215 bytes"), "{m}");
    // A 64 KB extension block, then 1 MB of handshake that never ends the
    // flight: read one message at a time until the server gives up.
    let m = message(990);
    assert!(m.contains("own ClientHello: malformed TLS from the server: the server closed the connection in the middle of its first flight"), "{m}");
    // A different version on every connection, none offered the same way.
    let m = message(3269);
    assert!(m.contains("own ClientHello:") && (m.contains("did not offer") || m.contains("malformed")), "{m}");
    assert!(took < std::time::Duration::from_secs(20), "took {took:?}");
    let benign = crate::service::benign_rss();
    assert!(rss_kb < benign + 8 * 1024, "peak RSS {rss_kb} kB ({benign} kB for the lab's real services)");
}

#[test]
fn starttls_services_give_their_chain_under_sv() {
    let _lab = lab();
    let (out, evs) = lab_scan(&["-sV", "-n", "-Pn", "-p", "21,25,110,143,389,5432", "198.18.0.3", "198.18.0.5"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let expect = [
        ("198.18.0.3", 21, "ftp", "ftp"),
        ("198.18.0.3", 25, "smtp", "smtp"),
        ("198.18.0.3", 5432, "postgresql", "postgresql"),
        ("198.18.0.5", 110, "pop3", "pop3"),
        ("198.18.0.5", 143, "imap", "imap"),
        ("198.18.0.5", 389, "ldap", "ldap"),
    ];
    for (ip, port, service_name, starttls) in expect {
        let s = service(&evs, ip, port);
        // The service keeps its name (no ssl/ prefix); the tunnel says how.
        assert_eq!((s["service"].as_str(), s["tunnel"].as_str()), (Some(service_name), Some("starttls")), "{s}");
        let tls = &s["tls"];
        assert_eq!(tls["starttls"], starttls, "{tls}");
        assert_eq!(tls["chain"][0]["subject"], "CN=lab.moonscan.test, O=moonscan lab", "{tls}");
        assert!(tls["version"].as_str().unwrap().starts_with("TLSv1."), "{tls}");
    }
    // ProFTPD here offers no AUTH TLS: found in the clear, no tls object.
    let proftpd = service(&evs, "198.18.0.5", 21);
    assert!(proftpd["tls"].is_null() && proftpd["tunnel"].is_null(), "{proftpd}");
}

#[test]
fn plugins_upgrade_their_sockets_with_starttls() {
    let _lab = lab();
    let plugin = crate::util::repo().join("tests/data/plugins/starttls-chain.lua");
    let (out, evs) =
        lab_scan(&["-sV", "-n", "-Pn", "-p", "25,80,5432", "--script", plugin.to_str().unwrap(), "198.18.0.3", TARGET]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let finding = |ip: &str, port: u16| {
        of_type(&evs, "finding")
            .into_iter()
            .find(|f| f["ip"] == ip && f["port"] == port)
            .unwrap_or_else(|| panic!("no finding for {ip}:{port}: {evs:#?}"))
            .clone()
    };
    for (port, proto) in [(25, "smtp"), (5432, "postgresql")] {
        let f = finding("198.18.0.3", port);
        assert_eq!(f["title"], "starttls", "{f}");
        assert_eq!(f["data"]["starttls"], proto, "{f}");
        assert_eq!(f["data"]["subject"], "CN=lab.moonscan.test, O=moonscan lab", "{f}");
    }
    // HTTP has no STARTTLS: a clear error, not a hang.
    let f = finding(TARGET, 80);
    assert_eq!(f["title"], "starttls failed", "{f}");
    assert!(f["data"]["error"].as_str().unwrap().contains("no STARTTLS for \"http\""), "{f}");
}

/// Accepted suites per version, as sslscan (Debian's) reports them:
/// version name to IANA suite names, in sslscan's order.
fn sslscan(target: &str) -> std::collections::BTreeMap<String, Vec<String>> {
    let out = crate::util::in_lab("sslscan")
        .args(["--xml=-", "--no-colour", "--no-heartbleed", "--no-renegotiation", "--no-compression", "--no-fallback"])
        .arg(format!("{target}:443"))
        .output()
        .expect("sslscan runs (scripts/test.sh installs it)");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut map: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for line in text.lines().filter(|l| l.trim_start().starts_with("<cipher ")) {
        let attr = |name: &str| {
            let at =
                line.find(&format!(" {name}=\"")).unwrap_or_else(|| panic!("no {name} in {line}")) + name.len() + 3;
            line[at..].split('"').next().unwrap().to_string()
        };
        let id = u16::from_str_radix(attr("id").trim_start_matches("0x"), 16).unwrap();
        map.entry(attr("sslversion")).or_default().push(moonscan::wire::hello::suite_name(id));
    }
    map
}

/// The ssl-enum-ciphers script result of each address (nmap's table): version to suite names in order.
fn enumerated(evs: &[Value]) -> std::collections::BTreeMap<String, std::collections::BTreeMap<String, Vec<String>>> {
    let mut all: std::collections::BTreeMap<String, std::collections::BTreeMap<String, Vec<String>>> =
        Default::default();
    for f in of_type(evs, "script").into_iter().filter(|r| r["plugin"] == "ssl-enum-ciphers") {
        let per = all.entry(f["ip"].as_str().unwrap().to_string()).or_default();
        for (version, v) in f["data"].as_object().unwrap() {
            if let Some(ciphers) = v["ciphers"].as_array() {
                per.insert(version.clone(), ciphers.iter().map(|c| c["name"].as_str().unwrap().to_string()).collect());
            }
        }
    }
    all
}

#[test]
fn ssl_enum_ciphers_finds_what_sslscan_finds() {
    let _lab = lab();
    let targets = [TARGET, "198.18.0.7", "198.18.0.8", "198.18.0.9", "198.18.0.10", "198.18.0.11"];
    let mut args = vec!["-sV", "-n", "-Pn", "-p", "443", "--script", "ssl-enum-ciphers"];
    args.extend(targets);
    let (out, evs) = lab_scan(&args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let ours = enumerated(&evs);
    for t in targets {
        let theirs = sslscan(t);
        assert!(!theirs.is_empty(), "sslscan found nothing on {t}");
        let mine = ours.get(t).unwrap_or_else(|| panic!("no ssl-enum-ciphers result for {t}"));
        assert_eq!(mine.keys().collect::<Vec<_>>(), theirs.keys().collect::<Vec<_>>(), "{t}: versions");
        for (version, suites) in &theirs {
            let (mut a, mut b) = (mine[version].clone(), suites.clone());
            // Where the server imposes its order, the order too.
            let server_order = of_type(&evs, "script").iter().any(|f| {
                f["ip"] == t && f["plugin"] == "ssl-enum-ciphers" && f["data"][version]["cipher preference"] == "server"
            });
            if server_order {
                assert_eq!(a, b, "{t} {version}: suites in the server's order");
            }
            a.sort();
            b.sort();
            assert_eq!(a, b, "{t} {version}: suites");
        }
    }
}

/// -sV and ssl-enum-ciphers on `port` of `targets`, the plugin told `hostname`.
fn enum_scan(port: &str, hostname: &str, targets: &[&str]) -> (std::process::Output, Vec<Value>) {
    let name = format!("ssl-enum-ciphers.hostname={hostname}");
    let mut args = vec!["-sV", "-n", "-Pn", "-p", port, "--script", "ssl-enum-ciphers", "--script-args", &name];
    args.extend(targets);
    lab_scan(&args)
}

/// The titles of one address's findings from one plugin (its weaknesses:
/// nmap's table is its script result, not a finding).
fn titles(evs: &[Value], ip: &str, plugin: &str) -> Vec<String> {
    of_type(evs, "finding")
        .into_iter()
        .filter(|f| f["ip"] == ip && f["plugin"] == plugin)
        .map(|f| f["title"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn weak_tls_configurations_trip_findings_and_a_sound_one_stays_quiet() {
    let _lab = lab();
    let (out, evs) =
        enum_scan("443", "www.lab.moonscan.test", &[TARGET, "198.18.0.7", "198.18.0.9", "198.18.0.10", "198.18.0.11"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let has = |ip: &str, title: &str| {
        let t = titles(&evs, ip, "ssl-enum-ciphers");
        assert!(t.iter().any(|x| x.starts_with(title)), "{ip}: no {title:?} in {t:?}");
    };
    // The lab's nginx: only its self-signed certificate, no weak protocol or suite.
    assert_eq!(titles(&evs, TARGET, "ssl-enum-ciphers"), ["Self-signed certificate"]);
    has("198.18.0.7", "TLSv1.0 is enabled");
    has("198.18.0.7", "CBC cipher suites with TLS 1.0 or older only");
    has("198.18.0.7", "Neither TLS 1.2 nor TLS 1.3 is accepted");
    has("198.18.0.9", "No forward secrecy");
    has("198.18.0.9", "NULL (unencrypted) cipher suites accepted");
    has("198.18.0.10", "Key exchange under 2048 bits");
    has("198.18.0.10", "Anonymous (unauthenticated) cipher suites accepted");
    has("198.18.0.11", "TLSv1.1 is enabled");
    // Grades (the script result, nmap's table): nginx's least strength A; NULL suites F.
    let least = |ip: &str| {
        of_type(&evs, "script")
            .into_iter()
            .find(|r| r["ip"] == ip && r["plugin"] == "ssl-enum-ciphers")
            .map(|r| r["data"]["least strength"].as_str().unwrap().to_string())
    };
    assert_eq!(least(TARGET).as_deref(), Some("A"));
    assert_eq!(least("198.18.0.11").as_deref(), Some("F"));
}

#[test]
fn findings_for_what_no_library_still_serves_trip_on_a_simulated_server() {
    let _lab = lab();
    // SSLv2, SSLv3, TLS 1.0; RC4, DES, 3DES, export; an expired SHA-1 RSA
    // 1024 leaf followed by an unrelated certificate (tests/hostile/).
    let _sim = Hostile::start("tls_legacy_sim.py", 8443, &[]);
    let (out, evs) = enum_scan("8443", "www.example.com", &[HOSTILE_IP]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let got = titles(&evs, HOSTILE_IP, "ssl-enum-ciphers");
    for want in [
        "SSLv2 is enabled",
        "SSLv3 is enabled",
        "TLSv1.0 is enabled",
        "Export-grade cipher suites accepted",
        "RC4 cipher suites accepted",
        "DES cipher suites accepted",
        "3DES cipher suites accepted",
        "Key exchange under 2048 bits",
        "CBC cipher suites with TLS 1.0 or older only",
        "No forward secrecy",
        "Neither TLS 1.2 nor TLS 1.3 is accepted",
        "Certificate rsa key of 1024 bits",
        "Certificate signed with SHA-1",
        "Certificate expired on 2016-01-01T00:00:00Z",
        "Certificate chain is broken",
        "Certificate does not match host name www.example.com",
    ] {
        assert!(got.iter().any(|t| t.starts_with(want)), "no {want:?} in {got:?}");
    }
    // The server's order, and grades: RC4 at most C, export F (the script result, nmap's table).
    let info = of_type(&evs, "script").into_iter().find(|r| r["plugin"] == "ssl-enum-ciphers").unwrap();
    let v = &info["data"]["SSLv3"];
    assert_eq!(v["cipher preference"], "server", "{v}");
    let grades: Vec<(&str, &str)> = v["ciphers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap(), c["strength"].as_str().unwrap()))
        .collect();
    assert_eq!(
        grades,
        [
            ("TLS_RSA_WITH_RC4_128_SHA", "C"),
            ("TLS_RSA_WITH_3DES_EDE_CBC_SHA", "D"),
            ("TLS_RSA_WITH_DES_CBC_SHA", "D"),
            ("TLS_RSA_EXPORT_WITH_RC4_40_MD5", "F")
        ]
    );
    assert_eq!(info["data"]["least strength"], "F");
    // The right name stays quiet.
    let (_, evs) = enum_scan("443", "www.lab.moonscan.test", &[TARGET]);
    assert!(!titles(&evs, TARGET, "ssl-enum-ciphers").iter().any(|t| t.contains("host name")));
}

#[test]
fn tls_enum_runs_once_per_run_within_the_read_budget() {
    let _lab = lab();
    let plugin = crate::util::repo().join("tests/data/plugins/tls-enum-limits.lua");
    let call = |evs: &[Value], n: &str| {
        of_type(evs, "finding")
            .into_iter()
            .find(|f| f["title"] == n)
            .unwrap_or_else(|| panic!("no {n}: {evs:#?}"))
            .clone()
    };
    let (_, evs) = lab_scan(&["-n", "-Pn", "-p", "443", "--script", plugin.to_str().unwrap(), TARGET]);
    let (first, second) = (call(&evs, "call 1"), call(&evs, "call 2"));
    assert_eq!((first["data"]["ok"].as_bool(), first["data"]["versions"].as_u64()), (Some(true), Some(1)), "{first}");
    assert_eq!(second["data"]["ok"], false, "{second}");
    assert!(second["data"]["err"].as_str().unwrap().contains("once per run"), "{second}");
    // A read budget of 20 kB (the enumeration reads some 40 kB): no hello
    // starts past it, and the run is stopped for reading more than it.
    let (out, evs) = lab_scan(&[
        "-n",
        "-Pn",
        "-p",
        "443",
        "--script",
        plugin.to_str().unwrap(),
        "--script-max-read",
        "20000",
        TARGET,
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let errors = of_type(&evs, "error");
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(
        (errors[0]["kind"].as_str(), errors[0]["message"].as_str()),
        (Some("budget"), Some("read more than 20000 bytes"))
    );
    assert!(of_type(&evs, "finding").is_empty());
}

/// ssl-date reads a server's clock from its ServerHello random: the
/// simulated legacy server puts its time there (within a second or two of
/// the scanner's), nginx sends noise ("TLS randomness does not represent
/// time", as nmap says of it).
#[test]
fn ssl_date_reads_the_clock_in_a_server_random_and_tells_noise() {
    let _lab = lab();
    let _sim = Hostile::start("tls_legacy_sim.py", 8443, &[]);
    let (out, evs) = lab_scan(&["-n", "-Pn", "-p", "443,8443", "--script", "ssl-date", HOSTILE_IP, TARGET]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // What ssl-date returns: a script result; it makes no finding.
    assert!(!of_type(&evs, "finding").iter().any(|f| f["plugin"] == "ssl-date"), "{evs:#?}");
    let result = |ip: &str, port: u16| {
        let found = of_type(&evs, "script").into_iter();
        found.into_iter().find(|f| f["plugin"] == "ssl-date" && f["ip"] == ip && f["port"] == port).cloned()
    };
    let sim = result(HOSTILE_IP, 8443).unwrap_or_else(|| panic!("{evs:#?}"));
    let delta = sim["data"]["delta"].as_i64().unwrap_or_else(|| panic!("{sim}"));
    assert!(delta.abs() <= 2, "{sim}");
    let text = sim["output"].as_str().unwrap();
    let date = sim["data"]["date"].as_str().unwrap();
    assert!(date.len() == 25 && date.ends_with("+00:00") && date.as_bytes()[10] == b'T', "{sim}");
    assert_eq!(text, format!("{date}; {}{}s from scanner time.", if delta < 0 { "-" } else { "+" }, delta.abs()));
    let nginx = result(TARGET, 443).unwrap_or_else(|| panic!("{evs:#?}"));
    assert_eq!(nginx["output"], "TLS randomness does not represent time");
    assert!(nginx["data"].as_array().is_some_and(Vec::is_empty) || nginx["data"] == serde_json::json!({}), "{nginx}");
}
