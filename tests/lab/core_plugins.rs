//! The core plugins (plugins/*.lua) against the lab's real services (and a
//! loopback server beside them where the lab does not give an answer).
//! Loopback servers and recorded bytes alone: tests/core_plugins.rs.

use serde_json::Value;

use crate::util::{events, lab, lab_scan, of_type, run, stderr, stdout, TARGET};

#[path = "../core_plugins/common.rs"]
mod common;
use common::*;

/// The lab's second host: vsftpd, exim, PostgreSQL, memcached.
const TARGET2: &str = "198.18.0.3";

/// The one finding of `plugin` on `ip:port` with this title.
fn titled<'a>(evs: &'a [Value], plugin: &str, ip: &str, port: u16, title: &str) -> &'a Value {
    let all = findings(evs, plugin, ip, port);
    let found: Vec<_> = all.iter().filter(|f| f["title"] == title).collect();
    assert_eq!(found.len(), 1, "want one {plugin} finding {title:?} on {ip}:{port}, have {all:#?}");
    found[0]
}

/// A lab scan that must succeed with no error event.
fn clean_lab_scan(args: &[&str]) -> Vec<Value> {
    let (out, evs) = lab_scan(args);
    assert_eq!(out.status.code(), Some(0), "{}\n{evs:#?}", stderr(&out));
    let errors = of_type(&evs, "error");
    assert!(errors.is_empty(), "error events: {errors:#?}");
    evs
}

#[test]
fn banner_shows_what_ssh_and_ftp_sent_first() {
    let _lab = lab();
    let evs = clean_lab_scan(&["-sV", "-n", "-p", "21,22", "--script", "banner", TARGET, TARGET2]);
    // nmap's banner: what the service sent first, as text (its line end trimmed), a script result.
    assert!(of_type(&evs, "finding").is_empty(), "banner makes no finding: {evs:#?}");
    let ssh = script(&evs, "banner", TARGET, 22);
    assert_eq!(ssh["output"], "SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u10", "{ssh}");
    assert!(ssh.get("data").is_none(), "text alone: {ssh}");
    let ftp = script(&evs, "banner", TARGET2, 21);
    assert_eq!(ftp["output"], "220 (vsFTPd 3.0.3)", "{ftp}");
    assert!(scripts(&evs, "banner", TARGET, 21).is_empty(), "21 is closed on {TARGET}");

    // Offline: escapes, the 256-character cap, and nothing without a banner.
    let dir = tempfile::tempdir().unwrap();
    let long = dir.path().join("long.bin");
    let mut bytes = b"A\\B\x00\xff\r\n".to_vec();
    bytes.extend(std::iter::repeat_n(b'z', 400));
    std::fs::write(&long, &bytes).unwrap();
    let (code, evs) = offline("banner", "9999", &["--banner-file", long.to_str().unwrap()]);
    assert_eq!(code, Some(0));
    assert!(of_type(&evs, "finding").is_empty(), "{evs:#?}");
    let r = of_type(&evs, "script");
    assert_eq!(r.len(), 1, "{evs:#?}");
    assert_eq!(r[0]["plugin"], "banner");
    let text = r[0]["output"].as_str().unwrap();
    assert!(text.starts_with("A\\\\B\\x00\\xFF\\x0D\\x0Azzz"), "{text}");
    assert_eq!(text.len(), 256);
    // Only line ends: no banner, nothing reported.
    let blank = dir.path().join("blank.bin");
    std::fs::write(&blank, b"\r\n").unwrap();
    let (code, evs) = offline("banner", "9999", &["--banner-file", blank.to_str().unwrap()]);
    assert_eq!(code, Some(0));
    assert!(of_type(&evs, "finding").is_empty(), "{evs:#?}");
    assert!(of_type(&evs, "script").is_empty(), "{evs:#?}");
    assert!(of_type(&evs, "log").iter().any(|l| l["message"].as_str().unwrap().contains("no banner")), "{evs:#?}");
    // No banner given: it would connect to read one, and offline it cannot.
    let (code, evs) = offline("banner", "9999", &[]);
    assert_eq!(code, Some(1), "{evs:#?}");
    assert!(of_type(&evs, "finding").is_empty(), "{evs:#?}");
    assert!(of_type(&evs, "script").is_empty(), "{evs:#?}");
    assert!(of_type(&evs, "error").iter().any(|e| e["kind"] == "sandbox"), "{evs:#?}");
}

#[test]
fn http_server_header_is_nginx_and_the_title_is_the_lab_page() {
    let _lab = lab();
    let evs = clean_lab_scan(&["-sV", "-n", "-p", "80,443", "--script", "http-server-header,http-title", TARGET]);
    for port in [80, 443] {
        // nmap's layouts: a list of Server values; { title }, and their text.
        let f = script(&evs, "http-server-header", TARGET, port);
        assert!(findings(&evs, "http-server-header", TARGET, port).is_empty(), "{evs:#?}");
        assert_eq!((&f["data"], f["output"].as_str()), (&serde_json::json!(["nginx/1.22.1"]), Some("nginx/1.22.1")));
        let t = script(&evs, "http-title", TARGET, port);
        assert!(findings(&evs, "http-title", TARGET, port).is_empty(), "{evs:#?}");
        assert_eq!(
            (&t["data"], t["output"].as_str()),
            (&serde_json::json!({"title": "moonscan lab"}), Some("moonscan lab"))
        );
    }
}

#[test]
fn http_headers_lists_headers_and_flags_missing_hsts_on_tls_only() {
    let _lab = lab();
    let evs = clean_lab_scan(&["-sV", "-n", "-p", "80,443", "--script", "http-headers", TARGET]);
    let hsts = "Missing Strict-Transport-Security header";
    for port in [80, 443] {
        // nmap's http-headers: text only, the header lines as sent, then the request type.
        let list = script(&evs, "http-headers", TARGET, port);
        let text = list["output"].as_str().unwrap();
        assert!(text.contains("\n  Server: nginx/1.22.1\n"), "{text:?}");
        assert!(text.contains("\n  Content-Type: text/html\n"), "{text:?}");
        assert!(text.ends_with("\n  \n  (Request type: HEAD)\n"), "{text:?}");
        assert!(list["data"].is_null(), "{list}");
        for (title, severity) in [
            ("Missing Content-Security-Policy header", "low"),
            ("Missing X-Content-Type-Options header", "low"),
            ("Missing X-Frame-Options header", "low"),
        ] {
            assert_eq!(titled(&evs, "http-headers", TARGET, port, title)["severity"], severity, "{title} on {port}");
        }
    }
    assert_eq!(titled(&evs, "http-headers", TARGET, 443, hsts)["severity"], "medium");
    let plain = findings(&evs, "http-headers", TARGET, 80);
    assert!(!plain.iter().any(|f| f["title"] == hsts), "no HSTS finding over plain HTTP: {plain:#?}");
    // Three missing headers (the result is a script result); over TLS, HSTS too.
    assert_eq!(plain.len(), 3, "{plain:#?}");
    assert_eq!(findings(&evs, "http-headers", TARGET, 443).len(), 4);
}

#[test]
fn http_methods_reports_nginx_405_and_risky_methods_of_a_server_that_lists_them() {
    let _lab = lab();
    let evs = clean_lab_scan(&["-sV", "-n", "-p", "80,443", "--script", "http-methods", TARGET]);
    for port in [80, 443] {
        // Named in --script: one level of verbosity, so nmap's table shows
        // the supported methods (nginx's static pages: GET and HEAD).
        let said = findings(&evs, "http-methods", TARGET, port);
        assert!(said.is_empty(), "{said:#?}");
        let result = script(&evs, "http-methods", TARGET, port);
        assert_eq!(result["data"], serde_json::json!({"Supported Methods": ["GET", "HEAD"]}));
        assert_eq!(result["output"], "\n  Supported Methods: GET HEAD");
    }
    drop(_lab);

    // A loopback server that lists PUT, DELETE and TRACE in Allow.
    let port = loopback_server(
        |req| req.windows(4).any(|w| w == b"\r\n\r\n"),
        |req| {
            if req.starts_with(b"OPTIONS ") {
                b"HTTP/1.1 200 OK\r\nAllow: GET, HEAD, OPTIONS, PUT, DELETE, TRACE\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_vec()
            } else {
                b"HTTP/1.1 200 OK\r\nServer: test\r\nContent-Type: text/html\r\nContent-Length: 13\r\nConnection: close\r\n\r\n<p>hello</p>\n".to_vec()
            }
        },
    );
    let p = port.to_string();
    let out = run(&["-sT", "-sV", "-n", "-p", &p, "--script", "http-methods", "127.0.0.1", "-oJ", "-"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let evs = events(&stdout(&out));
    let result = script(&evs, "http-methods", "127.0.0.1", port);
    assert_eq!(strings(&result["data"]["Potentially risky methods"]), ["PUT", "DELETE", "TRACE"]);
    let text = result["output"].as_str().unwrap();
    assert!(text.ends_with("\n  Potentially risky methods: PUT DELETE TRACE"), "{text:?}");
    let risky = titled(&evs, "http-methods", "127.0.0.1", port, "Potentially risky methods: PUT, DELETE, TRACE");
    assert_eq!(risky["severity"], "medium");
    assert_eq!(strings(&risky["data"]["risky"]), ["PUT", "DELETE", "TRACE"]);
}

#[test]
fn redis_info_reads_the_lab_redis_and_flags_no_auth_as_high() {
    let _lab = lab();
    let evs = clean_lab_scan(&["-sV", "-n", "-p", "6379", "--script", "redis-info", TARGET]);
    // nmap's redis-info table: strings under nmap's keys, and its text in nmap's order.
    let info = script(&evs, "redis-info", TARGET, 6379);
    let d = &info["data"];
    assert_eq!((d["Version"].as_str(), d["Role"].as_str()), (Some("7.0.15"), Some("master")), "{d}");
    assert_eq!(d["Architecture"], "64 bits");
    assert!(d["Operating System"].as_str().unwrap().starts_with("Linux "), "{d}");
    assert!(d["Connected clients"].as_str().unwrap().parse::<u32>().unwrap() >= 1, "{d}");
    assert_eq!(strings(&d["Client connections"]), ["198.18.0.1"]);
    let text = info["output"].as_str().unwrap();
    assert!(text.starts_with("\n  Version: 7.0.15\n  Operating System: Linux "), "{text:?}");
    let open = titled(&evs, "redis-info", TARGET, 6379, "Redis answers without authentication");
    assert_eq!(open["severity"], "high");
    assert_eq!(open["data"]["version"], "7.0.15");
    drop(_lab);

    // A Redis with requirepass answers -NOAUTH: an info finding, nothing high.
    let port = loopback_server(|req| !req.is_empty(), |_| b"-NOAUTH Authentication required.\r\n".to_vec());
    let p = port.to_string();
    let out = run(&["-sT", "-sV", "-n", "-p", &p, "--script", "redis-info", "127.0.0.1", "-oJ", "-"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let evs = events(&stdout(&out));
    let all = findings(&evs, "redis-info", "127.0.0.1", port);
    assert_eq!(all.len(), 1, "{evs:#?}");
    assert_eq!(all[0]["title"], "Redis requires authentication");
    assert_eq!(all[0]["severity"], "info");
    assert!(scripts(&evs, "redis-info", "127.0.0.1", port).is_empty(), "no INFO to show: {evs:#?}");
}

#[test]
fn ftp_anon_logs_in_to_the_lab_vsftpd() {
    let _lab = lab();
    let evs = clean_lab_scan(&["-sV", "-n", "-p", "21", "--script", "ftp-anon", TARGET2]);
    let f = titled(&evs, "ftp-anon", TARGET2, 21, "Anonymous FTP login allowed");
    assert_eq!(f["severity"], "medium");
    assert_eq!(f["data"]["code"], 230);
    assert_eq!(f["data"]["banner"], "220 (vsFTPd 3.0.3)");
    assert_eq!(f["data"]["reply"], "230 Login successful.");
    // nmap's text: the login line, then the listing (the lab's README).
    let text = script(&evs, "ftp-anon", TARGET2, 21)["output"].as_str().unwrap().to_string();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("Anonymous FTP login allowed (FTP code 230)"), "{text:?}");
    let readme = lines.next().unwrap_or_default();
    assert!(readme.starts_with("-rw-r--r--") && readme.ends_with(" README"), "{text:?}");
}

#[test]
fn smtp_commands_lists_exims_ehlo_extensions() {
    let _lab = lab();
    let evs = clean_lab_scan(&["-sV", "-n", "-p", "25", "--script", "smtp-commands", TARGET2]);
    let said = findings(&evs, "smtp-commands", TARGET2, 25);
    assert!(said.is_empty(), "{said:#?}");
    // nmap's text: the EHLO reply on one line, then what HELP lists.
    // STARTTLS: the lab's Exim offers TLS (tests/lab/tls.rs reads its chain).
    let result = script(&evs, "smtp-commands", TARGET2, 25);
    assert_eq!(
        result["output"],
        "lab.moonscan.test Hello nmap.scanme.org [198.18.0.1], SIZE 52428800, 8BITMIME, PIPELINING, PIPECONNECT, \
         CHUNKING, STARTTLS, SMTPUTF8, HELP\n Commands supported: AUTH STARTTLS HELO EHLO MAIL RCPT DATA BDAT NOOP QUIT RSET HELP"
    );
}

#[test]
fn memcached_info_reads_the_lab_memcached_and_flags_no_auth() {
    let _lab = lab();
    let evs = clean_lab_scan(&["-sV", "-n", "-p", "11211", "--script", "memcached-info", TARGET2]);
    // nmap's memcached-info table: strings under nmap's keys.
    let info = script(&evs, "memcached-info", TARGET2, 11211);
    let d = &info["data"];
    assert!(d["Process ID"].as_str().unwrap().parse::<u32>().unwrap() > 1, "{d}");
    assert!(d["Uptime"].as_str().unwrap().ends_with(" seconds"), "{d}");
    assert!(d["Current connections"].as_str().unwrap().parse::<u32>().unwrap() >= 1, "{d}");
    assert_eq!((d["Architecture"].as_str(), d["TCP Port"].as_str()), (Some("64 bit"), Some("11211")), "{d}");
    assert_eq!(d["Authentication"], "no");
    let open = titled(&evs, "memcached-info", TARGET2, 11211, "memcached answers without authentication");
    assert_eq!(open["severity"], "medium");
}

/// The topics an MQTT broker in the lab retains: those it sends, with the
/// RETAIN flag, to a client that subscribes to `$SYS/#` and `#` (within
/// 2 s; what it publishes meanwhile comes without the flag and is left out).
fn retained_topics(addr: &str, port: u16) -> Vec<String> {
    let script = r##"
import socket, struct, sys, time
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2)
cid = b"moonscan-test"
var = struct.pack(">H", 4) + b"MQTT" + bytes([4, 2]) + struct.pack(">H", 30)
body = var + struct.pack(">H", len(cid)) + cid
s.sendall(bytes([0x10, len(body)]) + body)
subs = b"".join(struct.pack(">H", len(t)) + t + b"\x00" for t in (b"$SYS/#", b"#"))
s.sendall(bytes([0x82, len(subs) + 2]) + b"\x00\x01" + subs)
buf, end = b"", time.time() + 2
while time.time() < end:
    s.settimeout(max(0.01, end - time.time()))
    try:
        d = s.recv(65536)
    except socket.timeout:
        break
    if not d:
        break
    buf += d
topics, i = set(), 0
while i < len(buf):
    t, n, shift, i = buf[i], 0, 0, i + 1
    while True:
        b = buf[i]; i += 1
        n |= (b & 127) << shift; shift += 7
        if b < 128:
            break
    pkt, i = buf[i:i + n], i + n
    if t >> 4 == 3 and t & 1 and len(pkt) == n:
        (tl,) = struct.unpack(">H", pkt[:2])
        topics.add(pkt[2:2 + tl].decode())
print("\n".join(sorted(topics)))
"##;
    let out = crate::util::in_lab("python3").args(["-c", script, addr, &port.to_string()]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let topics: Vec<String> = stdout(&out).lines().map(str::to_string).collect();
    assert!(topics.iter().any(|t| t == "$SYS/broker/version"), "the broker's retained topics: {topics:?}");
    topics
}

/// `-sV` runs the plugins of the version category, as nmap's `-sV` runs
/// its version scripts: mqtt-subscribe on Mosquitto and rfc868-time on
/// xinetd's time service, and no other plugin (redis-info is not one);
/// what they learn names the port as nmap's scripts name it (rfc868-time:
/// `time (32 bits)`), and mqtt-subscribe ends as soon as the broker has
/// sent its retained topics, not after a fixed window.
#[test]
fn service_detection_runs_the_version_plugins() {
    let _lab = lab();
    let retained = retained_topics("198.18.0.5", 1883);
    let started = std::time::Instant::now();
    let evs = clean_lab_scan(&["-sV", "-n", "-Pn", "-p", "37,1883,6379", "198.18.0.5"]);
    let took = started.elapsed();
    // What they returned: script results (neither makes findings here).
    let plugins: std::collections::BTreeSet<(&str, u64)> =
        of_type(&evs, "script").iter().map(|r| (r["plugin"].as_str().unwrap(), r["port"].as_u64().unwrap())).collect();
    let want = [("mqtt-subscribe", 1883), ("rfc868-time", 37)].into_iter().collect();
    assert_eq!(plugins, want, "{evs:#?}");
    assert!(of_type(&evs, "finding").is_empty(), "{evs:#?}");
    // A port's last service event is what every output shows.
    let last = |port: u64| *of_type(&evs, "service").iter().rev().find(|s| s["port"] == port).expect("a service");
    let time = last(37);
    assert_eq!((time["service"].as_str(), time["info"].as_str()), (Some("time"), Some("32 bits")), "{time}");
    assert_eq!((time["method"].as_str(), time["probe"].as_str()), (Some("probed"), Some("rfc868-time")));
    let mqtt = last(1883);
    assert_eq!((mqtt["product"].as_str(), mqtt["version"].as_str()), (Some("Mosquitto"), Some("2.0.11")), "{mqtt}");
    let topics = &script(&evs, "mqtt-subscribe", "198.18.0.5", 1883)["data"]["Topics and their most recent payloads"];
    assert_eq!(topics["$SYS/broker/version"], "mosquitto version 2.0.11", "{topics}");
    // Every topic the broker retained just before, as a client of the
    // test's own saw (how many depends on the broker's history).
    for topic in retained {
        assert!(topics.get(&topic).is_some(), "{topic} is missing: {topics}");
    }
    assert!(took < std::time::Duration::from_secs(3), "-sV of three ports took {took:?}");
    // Their settings come with -sV alone; without -sV, -sC or --script they apply to nothing.
    let evs = clean_lab_scan(&["-sV", "-n", "-Pn", "-p", "6379", "198.18.0.5", "--script-timeout", "2s"]);
    assert!(of_type(&evs, "finding").is_empty(), "{evs:#?}");
    assert!(of_type(&evs, "script").is_empty(), "{evs:#?}");
    let o = run(&["-sT", "-n", "-p", "1", "--script-timeout", "2s", "127.0.0.1"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("apply with --script, -sC or -sV only"), "{}", stderr(&o));
}
