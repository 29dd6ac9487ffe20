//! The core plugins (plugins/*.lua) against the lab's real services, a few
//! loopback servers for answers the lab does not give, and recorded bytes
//! (`moonscan plugins test`, offline) for services the lab does not run.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use serde_json::Value;

use crate::util::{events, lab, lab_scan, of_type, repo, run, stderr, stdout, TARGET};

/// The lab's second host: vsftpd, exim, PostgreSQL, memcached.
const TARGET2: &str = "198.18.0.3";

fn plugin_file(id: &str) -> String {
    repo().join("plugins").join(format!("{id}.lua")).to_string_lossy().into_owned()
}

fn banner_file(name: &str) -> String {
    repo().join("tests/data/banners").join(name).to_string_lossy().into_owned()
}

/// Findings (`ctx:finding`) of `plugin` on `ip:port`.
fn findings<'a>(evs: &'a [Value], plugin: &str, ip: &str, port: u16) -> Vec<&'a Value> {
    of_type(evs, "finding")
        .into_iter()
        .filter(|f| f["plugin"] == plugin && f["ip"] == ip && f["port"] == port)
        .collect()
}

/// Script results (what `run` returned) of `plugin` on `ip:port`.
fn scripts<'a>(evs: &'a [Value], plugin: &str, ip: &str, port: u16) -> Vec<&'a Value> {
    of_type(evs, "script").into_iter().filter(|r| r["plugin"] == plugin && r["ip"] == ip && r["port"] == port).collect()
}

/// The one script result of `plugin` on `ip:port`: a script event, never a
/// finding (no severity, no title).
fn script<'a>(evs: &'a [Value], plugin: &str, ip: &str, port: u16) -> &'a Value {
    let all = scripts(evs, plugin, ip, port);
    assert_eq!(all.len(), 1, "want one {plugin} script result on {ip}:{port}, have {all:#?}");
    assert!(all[0].get("severity").is_none() && all[0].get("title").is_none(), "{}", all[0]);
    let said = findings(evs, plugin, ip, port);
    assert!(!said.iter().any(|f| f["title"] == plugin || f.get("output").is_some()), "{said:#?}");
    all[0]
}

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

fn strings(v: &Value) -> Vec<&str> {
    v.as_array().unwrap_or_else(|| panic!("not a list: {v}")).iter().map(|s| s.as_str().unwrap()).collect()
}

/// `moonscan plugins test` of a core plugin; returns (exit status, events).
fn offline(id: &str, port: &str, extra: &[&str]) -> (Option<i32>, Vec<Value>) {
    let file = plugin_file(id);
    let mut args = vec!["plugins", "test", file.as_str(), "--port", port, "--json"];
    args.extend_from_slice(extra);
    let out = run(&args);
    (out.status.code(), events(&stdout(&out)))
}

/// A loopback server answering each connection with `answer(request bytes)`
/// once the request is complete (as `complete` says); runs until the test
/// process ends.
fn loopback_server(complete: fn(&[u8]) -> bool, answer: fn(&[u8]) -> Vec<u8>) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut conn) = conn else { continue };
            std::thread::spawn(move || serve(&mut conn, complete, answer));
        }
    });
    port
}

fn serve(conn: &mut TcpStream, complete: fn(&[u8]) -> bool, answer: fn(&[u8]) -> Vec<u8>) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
    let mut req = Vec::new();
    let mut buf = [0u8; 4096];
    while !complete(&req) && req.len() < 65536 {
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => req.extend_from_slice(&buf[..n]),
        }
    }
    let _ = conn.write_all(&answer(&req));
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
    // STARTTLS: the lab's Exim offers TLS (tests/tls.rs reads its chain).
    let result = script(&evs, "smtp-commands", TARGET2, 25);
    assert_eq!(
        result["output"],
        "lab.moonscan.test Hello nmap.scanme.org [198.18.0.1], SIZE 52428800, 8BITMIME, PIPELINING, PIPECONNECT, \
         CHUNKING, STARTTLS, SMTPUTF8, HELP\n Commands supported: AUTH STARTTLS HELO EHLO MAIL RCPT DATA BDAT NOOP QUIT RSET HELP"
    );
}

#[test]
fn mysql_info_decodes_recorded_greetings() {
    let (code, evs) =
        offline("mysql-info", "3306", &["--service", "mysql", "--banner-file", &banner_file("mysql-8.bin")]);
    assert_eq!(code, Some(0), "{evs:#?}");
    assert!(of_type(&evs, "error").is_empty(), "the banner is enough: no connection: {evs:#?}");
    assert!(of_type(&evs, "finding").is_empty(), "{evs:#?}");
    let f = of_type(&evs, "script");
    assert_eq!(f.len(), 1, "{evs:#?}");
    // nmap's mysql-info table (the lower 16 capability bits, nmap's names).
    assert_eq!(f[0]["plugin"], "mysql-info");
    let d = &f[0]["data"];
    assert_eq!(
        (d["Protocol"].as_u64(), d["Version"].as_str(), d["Thread ID"].as_u64()),
        (Some(10), Some("8.0.36"), Some(13))
    );
    assert_eq!(d["Auth Plugin Name"], "caching_sha2_password");
    assert_eq!(d["Capabilities flags"], 65535);
    let caps = strings(&d["Some Capabilities"]);
    for c in
        ["LongPassword", "Speaks41ProtocolNew", "SwitchToSSLAfterHandshake", "Support41Auth", "SupportsAuthPlugins"]
    {
        assert!(caps.contains(&c), "{c} missing from {caps:?}");
    }
    assert_eq!(d["Status"], "Autocommit");
    assert!(d["Salt"].as_str().is_some_and(|s| s.len() >= 20), "{d}");
    let text = f[0]["output"].as_str().unwrap();
    assert!(
        text.starts_with("\n  Protocol: 10\n  Version: 8.0.36\n  Thread ID: 13\n  Capabilities flags: 65535\n"),
        "{text:?}"
    );
    assert!(text.contains("\n  Some Capabilities: ") && text.contains("\n  Status: Autocommit\n"), "{text:?}");

    let (code, evs) =
        offline("mysql-info", "3306", &["--service", "mysql", "--banner-file", &banner_file("mysql-mariadb.bin")]);
    assert_eq!(code, Some(0), "{evs:#?}");
    assert!(of_type(&evs, "finding").is_empty(), "{evs:#?}");
    let f = of_type(&evs, "script");
    assert_eq!(f.len(), 1, "{evs:#?}");
    assert_eq!(f[0]["plugin"], "mysql-info");
    let d = &f[0]["data"];
    assert_eq!(d["Version"], "5.5.5-10.11.6-MariaDB-0+deb12u1");
    assert_eq!(d["Auth Plugin Name"], "mysql_native_password");
    assert_eq!(d["Capabilities flags"], 63486);
    let caps = strings(&d["Some Capabilities"]);
    assert!(!caps.contains(&"LongPassword") && !caps.contains(&"SwitchToSSLAfterHandshake"), "{caps:?}");
    assert!(caps.contains(&"Speaks41ProtocolNew") && caps.contains(&"SupportsAuthPlugins"), "{caps:?}");

    // Not a greeting (an FTP banner): no result; it would connect, and offline it cannot.
    let (code, evs) =
        offline("mysql-info", "3306", &["--service", "mysql", "--banner-file", &banner_file("ftp-vsftpd.bin")]);
    assert_eq!(code, Some(1), "{evs:#?}");
    assert!(of_type(&evs, "finding").is_empty(), "{evs:#?}");
    assert!(of_type(&evs, "script").is_empty(), "{evs:#?}");
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

/// nmap's common `--script-args`: `http.useragent` is every HTTP request's
/// User-Agent (a server that echoes it as its title shows it), keys nmap
/// users pass for what moonscan does not do are refused with the reason,
/// and an unknown key is said, not silently kept.
#[test]
fn nmaps_script_args_are_honoured_or_refused_with_a_reason() {
    let port = loopback_server(
        |req| req.windows(4).any(|w| w == b"\r\n\r\n"),
        |req| {
            let text = String::from_utf8_lossy(req);
            let agent = text.lines().find_map(|l| l.strip_prefix("User-Agent: ")).unwrap_or("(none)").to_string();
            let body = format!("<title>{agent}</title>");
            format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len()).into_bytes()
        },
    );
    let p = port.to_string();
    let title = |extra: &[&str]| {
        let mut args = vec!["-sT", "-sV", "-n", "-p", &p, "--script", "http-title", "127.0.0.1", "-oJ", "-"];
        args.extend(extra);
        let out = run(&args);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let evs = events(&stdout(&out));
        (script(&evs, "http-title", "127.0.0.1", port)["output"].as_str().unwrap().to_string(), stderr(&out))
    };
    assert_eq!(title(&[]).0, "moonscan");
    // nmap's quoting: a browser's User-Agent holds a comma.
    let (got, said) = title(&["--script-args", "http.useragent=\"Mozilla/5.0 (KHTML, like Gecko) Agent/7\",x=1"]);
    assert_eq!(got, "Mozilla/5.0 (KHTML, like Gecko) Agent/7");
    assert!(said.contains("no selected plugin reads x\n") && !said.contains("http.useragent"), "{said}");

    // Refused: exit 2 and one line that says why, before any probe.
    for (arg, why) in [
        ("mysqluser=root", "--script-args mysqluser: no moonscan plugin logs in to MySQL"),
        ("http.max-cache-size=1000000", "--script-args http.max-cache-size: ctx.http keeps no cache"),
        ("brute.firstonly=true", "--script-args brute.firstonly: moonscan has no brute-force plugins"),
        ("http.useragent=a\rb", "--script-args http.useragent: a header value holds no line break"),
    ] {
        let out = run(&["-sT", "-n", "-p", &p, "--script", "http-title", "127.0.0.1", "--script-args", arg]);
        assert_eq!(out.status.code(), Some(2), "{arg}: {}{}", stdout(&out), stderr(&out));
        let err = stderr(&out);
        assert!(err.contains(why) && err.trim().lines().count() == 1, "{arg}: {err}");
        assert!(stdout(&out).is_empty(), "{arg}: nothing scanned: {}", stdout(&out));
    }
    // Unknown: said once, and the scan goes on.
    let (got, said) = title(&["--script-args", "htp.useragent=x"]);
    assert_eq!(got, "moonscan");
    assert!(said.contains("--script-args: no selected plugin reads htp.useragent"), "{said}");
}
