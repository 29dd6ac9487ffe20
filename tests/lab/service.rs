//! Service detection (-sV) against the lab: the real services come out as
//! nmap 7.93 names them, and hostile servers (tests/hostile/*.py) cost a
//! bounded time and memory while the rest of the scan completes.
//! What needs no lab is in tests/service.rs.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::util::{bin, in_lab, lab, lab_scan, of_type, repo, stderr, stdout, TARGET};

/// The `service` event of a port.
fn service<'a>(evs: &'a [Value], ip: &str, port: u16) -> &'a Value {
    of_type(evs, "service")
        .into_iter()
        .find(|e| e["ip"] == ip && e["port"] == port)
        .unwrap_or_else(|| panic!("no service event for {ip}:{port} in {evs:#?}"))
}

fn field<'a>(e: &'a Value, name: &str) -> &'a str {
    e[name].as_str().unwrap_or("")
}

#[test]
fn lab_services_come_out_as_nmap_names_them() {
    let _lab = lab();
    let (out, evs) = lab_scan(&["-sV", "-n", "-p", "22,80,443,6379", TARGET]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let expect = [
        (22, "ssh", "OpenSSH", "9.2p1 Debian 2+deb12u10", "protocol 2.0"),
        (80, "http", "nginx", "1.22.1", ""),
        (443, "http", "nginx", "1.22.1", ""),
        (6379, "redis", "Redis key-value store", "7.0.15", ""),
    ];
    for (port, name, product, version, info) in expect {
        let s = service(&evs, TARGET, port);
        assert_eq!(
            (field(s, "service"), field(s, "product"), field(s, "version"), field(s, "info")),
            (name, product, version, info),
            "port {port}: {s}"
        );
        assert_eq!(s["method"], "probed", "{s}");
        assert_eq!(s["tunnel"].as_str(), (port == 443).then_some("ssl"), "{s}");
    }
    assert_eq!(service(&evs, TARGET, 80)["cpe"][0], "cpe:/a:igor_sysoev:nginx:1.22.1");
    assert!(field(service(&evs, TARGET, 22), "banner").starts_with("SSH-2.0-OpenSSH_9.2p1"));

    // The 443 chain: the lab's self-signed certificate with both SANs.
    let tls = &service(&evs, TARGET, 443)["tls"];
    assert!(tls["version"].as_str().unwrap().starts_with("TLSv1."), "{tls}");
    assert!(!tls["cipher"].as_str().unwrap().is_empty(), "{tls}");
    assert_eq!(tls["alpn"], "http/1.1");
    let chain = tls["chain"].as_array().unwrap();
    assert_eq!(chain.len(), 1, "{tls}");
    let leaf = &chain[0];
    assert_eq!(leaf["subject"], "CN=lab.moonscan.test, O=moonscan lab");
    assert_eq!(leaf["issuer"], leaf["subject"]);
    assert_eq!(leaf["self_signed"], true);
    assert_eq!(leaf["san"], serde_json::json!(["DNS:lab.moonscan.test", "DNS:www.lab.moonscan.test"]));
    assert_eq!((&leaf["key_type"], &leaf["key_bits"]), (&Value::from("rsa"), &Value::from(2048)));
    assert_eq!(leaf["signature_algorithm"], "sha256WithRSAEncryption");
    assert_eq!(leaf["sha256"].as_str().unwrap().len(), 64);
    assert!(leaf["not_after"].as_str().unwrap() > leaf["not_before"].as_str().unwrap());

    // Streaming: each port is in detection once found, not after discovery ends,
    // and its service event follows its port event.
    for port in [22, 80, 443, 6379] {
        let at = |t: &str| evs.iter().position(|e| e["type"] == t && e["port"] == port).unwrap();
        assert!(at("port") < at("service"), "port {port}");
    }
}

/// The second lab host, 198.18.0.3: vsftpd, exim, PostgreSQL and memcached.
#[test]
fn more_lab_services_come_out_as_nmap_names_them() {
    let _lab = lab();
    let host = "198.18.0.3";
    let (out, evs) = lab_scan(&["-sV", "-n", "-p", "21,25,5432,11211", host]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let expect = [
        (21, "ftp", "vsftpd", "3.0.3"),
        (25, "smtp", "Exim smtpd", "4.96"),
        (5432, "postgresql", "PostgreSQL DB", "9.6.0 or later"),
        (11211, "memcached", "Memcached", "1.6.18"),
    ];
    for (port, name, product, version) in expect {
        let s = service(&evs, host, port);
        assert_eq!(
            (field(s, "service"), field(s, "product"), field(s, "version")),
            (name, product, version),
            "port {port}: {s}"
        );
    }
    assert_eq!(field(service(&evs, host, 25), "hostname"), "lab.moonscan.test");
    assert_eq!(service(&evs, host, 21)["cpe"][0], "cpe:/a:vsftpd:vsftpd:3.0.3");
}

#[test]
fn service_lines_show_in_text_output() {
    let _lab = lab();
    let out = in_lab(bin()).args(["-sV", "-n", "-p", "22,443", TARGET]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("Service on 22/tcp on 198.18.0.2: ssh OpenSSH 9.2p1 Debian 2+deb12u10 (protocol 2.0)"),
        "{text}"
    );
    assert!(text.contains("Service on 443/tcp on 198.18.0.2: ssl/http nginx 1.22.1"), "{text}");
    assert!(text.contains("Subject Alternative Names: DNS:lab.moonscan.test, DNS:www.lab.moonscan.test"), "{text}");
}

#[test]
fn intensity_zero_still_tries_the_ports_own_probes() {
    let _lab = lab();
    let (out, evs) = lab_scan(&["-sV", "--version-intensity", "0", "-n", "-p", "80,6379", TARGET]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(field(service(&evs, TARGET, 80), "product"), "nginx");
    assert_eq!(field(service(&evs, TARGET, 6379), "version"), "7.0.15");
}

/// Adds the hostile servers' address to the lab's target namespace.
pub(crate) fn add_hostile_address() {
    let st = Command::new("ip")
        .args(["-n", "mstarget", "addr", "replace", &format!("{HOSTILE_IP}/24"), "dev", "ms-tgt0"])
        .status()
        .unwrap();
    assert!(st.success(), "cannot add {HOSTILE_IP} to the lab");
}

/// A hostile server from tests/hostile/, run in the target namespace on
/// 198.18.0.4 until dropped.
pub(crate) struct Hostile(Child);

pub(crate) const HOSTILE_IP: &str = "198.18.0.4";

impl Hostile {
    pub(crate) fn start(script: &str, port: u16, extra: &[&str]) -> Hostile {
        Hostile::start_on(HOSTILE_IP, script, port, extra)
    }

    fn start_on(host: &str, script: &str, port: u16, extra: &[&str]) -> Hostile {
        add_hostile_address();
        let python = if std::path::Path::new("/usr/bin/python3").exists() { "/usr/bin/python3" } else { "python3" };
        let mut child = Command::new("ip")
            .args(["netns", "exec", "mstarget", python])
            .arg(repo().join("tests/hostile").join(script))
            .args(["--host", host, "--port", &port.to_string()])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 runs");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "ready", "{script} did not start");
        Hostile(child)
    }
}

impl Drop for Hostile {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Peak RSS in kB of a `-sV` scan of the lab's real SSH, HTTP and HTTPS
/// services by the same binary: what hostile servers' scans are measured
/// against. The design's 40 MB is a release build's (bench.sh svcmem); a
/// debug build's code pages and relocations alone take about 30 MB, and
/// grow with every crate linked, so the tests bound what hostile servers
/// add to a benign scan, not the binary's size.
pub(crate) fn benign_rss() -> u64 {
    let (out, rss) = time_v(&["-sV", "-n", "-Pn", "--service-timeout", "4s", "-p", "22,80,443", TARGET, "-oJ", "-"]);
    assert!(out.status.success(), "{}", stderr(&out));
    rss
}

/// Peak RSS in kB of a command run under /usr/bin/time, with its stdout.
pub(crate) fn time_v(args: &[&str]) -> (std::process::Output, u64) {
    let out = Command::new("ip")
        .args(["netns", "exec", "msscan", "/usr/bin/time", "-f", "maxrss=%M", bin()])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("/usr/bin/time runs (scripts/test.sh installs it)");
    let err = stderr(&out);
    let rss = err.lines().find_map(|l| l.strip_prefix("maxrss=")).and_then(|v| v.trim().parse().ok());
    (out, rss.unwrap_or_else(|| panic!("no maxrss in {err}")))
}

#[test]
fn hostile_servers_cost_bounded_time_and_memory() {
    let _lab = lab();
    let workdir = tempfile::tempdir().unwrap();
    let _servers = [
        Hostile::start("endless_banner.py", 7001, &[]),
        Hostile::start("huge_response.py", 7002, &[]),
        Hostile::start("garbage_tls_alert.py", 7003, &[]),
        Hostile::start("slow_drip_http.py", 8080, &[]),
        Hostile::start("tls_garbage.py", 4443, &[]),
        Hostile::start("tls_close_notify.py", 8443, &[]),
        Hostile::start("tls_long_chain.py", 9443, &["--workdir", workdir.path().to_str().unwrap()]),
    ];
    let started = Instant::now();
    let (out, rss_kb) = time_v(&[
        "-sV",
        "-n",
        "--service-timeout",
        "4s",
        "-p",
        "22,4443,7001,7002,7003,8080,8443,9443",
        HOSTILE_IP,
        TARGET,
        "-oJ",
        "-",
    ]);
    let took = started.elapsed();
    let evs = crate::util::events(&stdout(&out));

    // The real service in the same scan is fully detected.
    assert_eq!(field(service(&evs, TARGET, 22), "product"), "OpenSSH");
    // Every hostile port ends with a service event, within the port budget.
    for port in [7001, 7002, 7003, 8080, 4443, 8443, 9443] {
        let s = service(&evs, HOSTILE_IP, port);
        assert!(field(s, "banner").len() <= 4 * 512, "banner is capped: {s}");
    }
    assert!(took < Duration::from_secs(20), "took {took:?}; the port budget is 4 s");
    let benign = benign_rss();
    assert!(
        rss_kb < benign + 8 * 1024,
        "peak RSS {rss_kb} kB while servers sent 100 MB and endless data ({benign} kB for the lab's real services)"
    );

    // One byte a second: each probe's read ends at the idle gap after its
    // byte, and with every probe out side by side the port is judged (no
    // rule names it) before its budget, not cut by it (the budget's cut of a
    // drip is service/detect_tests.rs's the_port_budget_ends_a_slow_drip).
    let errors = of_type(&evs, "error");
    let error_at = |port: u16| errors.iter().find(|e| e["ip"] == HOSTILE_IP && e["port"] == port);
    assert_eq!(error_at(7001), None, "{errors:?}");
    let drip = service(&evs, HOSTILE_IP, 7001);
    assert!(field(drip, "banner").starts_with('A'));
    let opened = evs.iter().find(|e| e["type"] == "port" && e["ip"] == HOSTILE_IP && e["port"] == 7001).unwrap();
    let took = drip["t"].as_f64().unwrap() - opened["t"].as_f64().unwrap();
    assert!(took < 4.0, "7001 took {took} s of its 4 s budget");
    // 100 MB without a newline: one buffer's worth was read, no more.
    assert!(field(service(&evs, HOSTILE_IP, 7002), "banner").starts_with("xxxxxxxx"));
    // A TLS alert on a plain port: known to be TLS, and the handshake error said.
    assert_eq!(field(service(&evs, HOSTILE_IP, 7003), "service"), "ssl");
    assert!(error_at(7003).is_some_and(|e| field(e, "message").contains("TLS")), "{errors:?}");
    // HTTP headers that never end: still HTTP.
    assert_eq!(field(service(&evs, HOSTILE_IP, 8080), "service"), "http");
    // Garbage after ServerHello and close_notify mid-handshake: no TLS object, no crash.
    for port in [4443, 8443] {
        assert!(service(&evs, HOSTILE_IP, port)["tls"].is_null(), "port {port}");
    }
    // A 100-certificate chain: its first 16 are kept, the rest counted, and
    // HTTP is found inside it.
    let s = service(&evs, HOSTILE_IP, 9443);
    let chain = s["tls"]["chain"].as_array().unwrap_or_else(|| panic!("no chain: {s}"));
    assert_eq!((chain.len(), &s["tls"]["chain_cut"]), (16, &Value::from(84)));
    assert_eq!(chain[0]["subject"], "CN=long-chain.moonscan.test");
    assert_eq!(chain[15]["subject"], "CN=hostile chain intermediate 15");
    assert_eq!((field(s, "service"), field(s, "tunnel"), field(s, "product")), ("http", "ssl", "hostile-chain"));

    let end = evs.last().unwrap();
    assert_eq!(end["type"], "scan_end");
    // sshd listens on every address of the target namespace, 198.18.0.4 too.
    assert_eq!(end["open"], 9);
}

/// Many ports of a server sending 100 MB each cost no more memory than one:
/// memory is the buffer pool, never what servers send.
#[test]
fn memory_does_not_grow_with_what_servers_send() {
    let _lab = lab();
    // On every address of the target namespace, 198.19.0.0/16 included.
    let _huge = Hostile::start_on("0.0.0.0", "huge_response.py", 7012, &[]);
    let scan = |targets: &str| {
        let (out, rss) = time_v(&["-sV", "-n", "--service-timeout", "3s", "-p", "7012", targets, "-oJ", "-"]);
        let evs = crate::util::events(&stdout(&out));
        (of_type(&evs, "service").len(), rss)
    };
    let (n1, one) = scan("198.19.0.1");
    // 64 connections at once, each offered 100 MB.
    let (n64, many) = scan("198.19.0.0/26");
    assert_eq!((n1, n64), (1, 64));
    assert!(many < one + 8 * 1024, "one port {one} kB, 64 at once {many} kB");
    // One hostile port costs little more than the lab's real services.
    let benign = benign_rss();
    assert!(one < benign + 8 * 1024, "{one} kB ({benign} kB for the lab's real services)");
}

/// A server that speaks only TLS and drops anything else without a word is
/// found through the TLSSessionReq probe's ClientHello (a port no probe
/// lists), then identified inside TLS, with its certificate.
#[test]
fn a_silent_tls_only_server_is_found_by_offering_tls() {
    let _lab = lab();
    let _server = Hostile::start("tls_silent.py", 7020, &[]);
    let (out, evs) = lab_scan(&["-n", "-sV", "-p", "7020", "--service-timeout", "15s", HOSTILE_IP]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let s = service(&evs, HOSTILE_IP, 7020);
    assert_eq!((field(s, "service"), field(s, "tunnel"), field(s, "product")), ("http", "ssl", "silent-tls"), "{s}");
    assert_eq!(s["tls"]["chain"][0]["subject"], "CN=silent-tls.moonscan.test", "{s}");
    // No ALPN is offered on a port no HTTP probe lists as TLS.
    assert!(s["tls"]["alpn"].is_null(), "{s}");
}
