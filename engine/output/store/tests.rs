use super::*;
use crate::findings::*;

/// Events are made with this id, then moved to their scan's.
const SCANID: &str = "00";

fn ip(s: &str) -> std::net::IpAddr {
    s.parse().unwrap()
}

fn start(id: &str, args: &[&str]) -> Event {
    Event::ScanStart(ScanStart {
        scan_id: id.into(),
        started: humantime::parse_rfc3339("2026-11-21T15:21:53.078Z").unwrap(),
        args: args.iter().map(|s| s.to_string()).collect(),
        scan_type: ScanType::Syn,
        seed: u64::MAX - 5,
        probes_planned: 65535,
        // What the command line asked for, as a scan records it.
        settings: ScanSettings {
            ports: if args.contains(&"-p-") { (1..=65535).collect() } else { vec![] },
            shard: args.iter().enumerate().find_map(|(i, a)| match a.strip_prefix("--shard") {
                Some("") => Some(args[i + 1].to_string()),
                Some(v) => v.strip_prefix('=').map(String::from),
                None => None,
            }),
            ..ScanSettings::default()
        },
    })
}

fn port(addr: &str, p: u16, t: f64) -> Event {
    Event::Port(PortEvent {
        scan_id: SCANID.into(),
        ip: ip(addr),
        port: p,
        proto: Proto::Tcp,
        state: PortState::Open,
        reason: Reason::SynAck,
        ttl: Some(64),
        t,
    })
}

fn service(addr: &str, p: u16, version: &str) -> Event {
    let mut s = Service::bare(SCANID.into(), ip(addr), p, Proto::Tcp);
    s.id = Identity {
        service: "http".into(),
        product: Some("nginx".into()),
        version: Some(version.into()),
        os: Some("Linux".into()),
        cpe: vec![format!("cpe:/a:igor_sysoev:nginx:{version}")],
        ..Identity::default()
    };
    s.method = ServiceMethod::Probed;
    s.tunnel = Some(Tunnel::Ssl);
    s.probe = Some("GetRequest".into());
    s.banner = b"it's \x00 'quoted'".to_vec();
    s.t = 0.26;
    s.targetname = Some("www.lab.example".into());
    Event::Service(Box::new(Service {
        tls: Some(Box::new(TlsInfo {
            version: "TLSv1.3".into(),
            cipher: "TLS13_AES_256_GCM_SHA384".into(),
            alpn: Some("http/1.1".into()),
            path: "hello".into(),
            kx: "dhe".into(),
            kx_bits: 1024,
            ja3s: "5d817310c965d9be5b4d4f6c3302424b".into(),
            ja4s: "t120300_009f_5e2616a54c73".into(),
            chain: vec![
                CertSummary {
                    subject: "CN=lab.moonscan.test, O=moonscan lab".into(),
                    issuer: "CN=ca".into(),
                    san: vec!["DNS:lab.moonscan.test".into(), "DNS:www.lab.moonscan.test".into()],
                    san_cut: 0,
                    not_before: "2026-11-21T15:57:00Z".into(),
                    not_after: "2036-11-18T15:57:00Z".into(),
                    serial: "0a1b".into(),
                    key_type: "ec".into(),
                    key_bits: 256,
                    curve: Some("P-256".into()),
                    signature_algorithm: "ecdsa-with-SHA256".into(),
                    self_signed: false,
                    sha256: "ab".repeat(32),
                    error: None,
                },
                CertSummary {
                    subject: "CN=ca".into(),
                    issuer: "CN=ca".into(),
                    self_signed: true,
                    key_type: "rsa".into(),
                    key_bits: 4096,
                    sha256: "cd".repeat(32),
                    ..CertSummary::default()
                },
            ],
            chain_cut: 2,
            ..TlsInfo::default()
        })),
        ..s
    }))
}

fn finding(addr: &str, p: u16, title: &str) -> Event {
    Event::Finding(Box::new(FindingEvent {
        scan_id: SCANID.into(),
        ip: ip(addr),
        port: p,
        proto: Proto::Tcp,
        plugin: "redis-info".into(),
        severity: Severity::High,
        title: title.into(),
        data: serde_json::json!({"version": "7.0.15", "nested": {"a": [1, 2.5, null, "x\u{0}y"]}}),
        about: Default::default(),
        host: false,
        targetname: Some("cache.lab.example".into()),
        t: 0.31,
    }))
}

/// A redis-info script result: its text, its data, and the keys it calls volatile.
fn script(addr: &str, p: u16, output: &str, data: serde_json::Value, volatile: &[&str]) -> Event {
    Event::Script(Box::new(ScriptEvent {
        scan_id: SCANID.into(),
        ip: ip(addr),
        port: p,
        proto: Proto::Tcp,
        plugin: "redis-info".into(),
        output: output.into(),
        data,
        volatile: volatile.iter().map(|v| v.to_string()).collect(),
        host: false,
        targetname: None,
        t: 0.32,
    }))
}

fn error(addr: Option<&str>, p: Option<u16>) -> Event {
    Event::Error(ErrorEvent {
        scan_id: SCANID.into(),
        ip: addr.map(ip),
        port: p,
        plugin: Some("ssl-cert".into()),
        kind: crate::error::ErrorKind::Timeout,
        message: "timed out after 10s".into(),
    })
}

fn end(id: &str, open: u64) -> Event {
    Event::ScanEnd(ScanEnd {
        scan_id: id.into(),
        elapsed: 0.25,
        probes_sent: 65535,
        open,
        closed: 65535 - open,
        filtered: 0,
        errors: 1,
        findings: 1,
        scripts: 1,
        hosts_up: 0,
        hosts_down: 0,
        interrupted: false,
        unshown_capped: false,
        slowdowns: 0,
        slowed: None,
    })
}

fn scan_events(id: &str) -> Vec<Event> {
    let mut evs = vec![
        start(id, &["moonscan", "-sS", "-p-", "--shard", "2/3", "198.18.0.2"]),
        port("198.18.0.2", 22, 0.001),
        port("198.18.0.2", 443, 0.002),
        port("2001:2::2", 6379, 0.003),
        Event::Rdns(crate::findings::RdnsEvent {
            scan_id: SCANID.into(),
            ip: ip("198.18.0.2"),
            name: "target.lab.moonscan.test".into(),
            t: 0.004,
        }),
        service("198.18.0.2", 443, "1.22.1"),
        finding("2001:2::2", 6379, "Redis answers without authentication"),
        script(
            "2001:2::2",
            6379,
            "\n  Version: 7.0.15\n  Uptime: 12 seconds",
            serde_json::json!({"Version": "7.0.15", "Uptime": "12 seconds", "nested": [1, 2.5, null, "x\u{0}y"]}),
            &["Uptime"],
        ),
        Event::Log(LogEvent {
            scan_id: SCANID.into(),
            ip: ip("2001:2::2"),
            port: 6379,
            plugin: "redis-info".into(),
            message: "hi".into(),
        }),
        error(Some("198.18.0.2"), Some(443)),
        error(None, None),
        Event::Extraports(ExtraportsEvent {
            scan_id: SCANID.into(),
            ip: ip("198.18.0.2"),
            proto: Proto::Tcp,
            state: PortState::Closed,
            reason: Reason::Reset,
            count: 65532,
            ports: vec![],
        }),
        end(id, 3),
    ];
    for e in &mut evs {
        e.set_scan_id(id.into());
    }
    evs
}

fn record_all(store: &mut Store, evs: &[Event]) {
    for e in evs {
        store.record(e).unwrap();
    }
}

fn count(db: &mut Db, table: &str) -> i64 {
    match db.query(&format!("SELECT count(*) FROM {table}"), &[]).unwrap()[0][0] {
        Cell::Int(n) => n,
        ref c => panic!("count is {c:?}"),
    }
}

#[test]
fn events_come_back_as_they_were_recorded() {
    let mut store = Store::memory();
    let evs = scan_events("00c0ffee00000001");
    record_all(&mut store, &evs);
    store.close().unwrap();
    let mut db = store.into_db();
    let back = db.events("00c0ffee00000001").unwrap();
    // Plugins' log lines are not stored.
    let expected: Vec<Event> = evs.into_iter().filter(|e| !matches!(e, Event::Log(_))).collect();
    // The NUL in the finding's data survives SQLite (JSON text escapes it).
    assert_eq!(back, expected);
}

#[test]
fn record_only_buffers_and_flush_commits() {
    let mut store = Store::memory();
    let evs = scan_events("00c0ffee00000002");
    record_all(&mut store, &evs[..3]);
    let n = |store: &mut Store| match store.db.query("SELECT count(*) FROM ports", &[]).unwrap()[0][0] {
        Cell::Int(n) => n,
        _ => -1,
    };
    assert_eq!(n(&mut store), 0, "record must not write");
    store.flush().unwrap();
    assert_eq!(n(&mut store), 2);
    store.flush().unwrap(); // nothing buffered: nothing written twice
    assert_eq!(n(&mut store), 2);
    record_all(&mut store, &evs[3..]);
    store.close().unwrap();
    let mut db = store.into_db();
    assert_eq!(count(&mut db, "ports"), 3);
    assert_eq!(count(&mut db, "services"), 1);
    assert_eq!(count(&mut db, "tls_certs"), 2);
    assert_eq!(count(&mut db, "findings"), 1);
    assert_eq!(count(&mut db, "errors"), 2);
}

#[test]
fn a_port_reported_twice_is_stored_once() {
    let mut store = Store::memory();
    record_all(&mut store, &[start("aa", &[]), port("198.18.0.2", 22, 0.1)]);
    store.flush().unwrap();
    record_all(&mut store, &[port("198.18.0.2", 22, 0.2), port("198.18.0.2", 22, 0.3)]);
    store.close().unwrap();
    let mut db = store.into_db();
    assert_eq!(count(&mut db, "ports"), 1);
}

#[test]
fn list_counts_open_ports_and_findings_and_reads_the_shard() {
    let mut store = Store::memory();
    record_all(&mut store, &scan_events("00c0ffee00000003"));
    // An unfinished scan: no scan_end.
    record_all(&mut store, &[start("00c0ffee00000004", &["moonscan", "--shard=1/2"]), port("198.18.0.3", 21, 0.1)]);
    store.close().unwrap();
    let mut db = store.into_db();
    let scans = db.scans().unwrap();
    assert_eq!(scans.len(), 2);
    let a = &scans[0];
    assert_eq!(a.id, "00c0ffee00000003");
    assert_eq!((a.open_ports, a.findings), (3, 1));
    assert_eq!(a.shard.as_deref(), Some("2/3"));
    assert_eq!(a.seed, (u64::MAX - 5).to_string(), "u64 seeds are kept exactly");
    assert_eq!(a.args[1], "-sS");
    assert!(a.ended.is_some() && !a.interrupted);
    let b = &scans[1];
    assert_eq!((b.open_ports, b.findings, b.ended.as_deref()), (1, 0, None));
    assert_eq!(b.shard.as_deref(), Some("1/2"));
    assert_eq!(db.scan("00c0ffee00000004").unwrap().as_ref(), Some(b));
    // An unfinished scan exports without scan_end.
    let evs = db.events("00c0ffee00000004").unwrap();
    assert!(matches!(evs.last(), Some(Event::Port(_))), "{evs:?}");
}

#[test]
fn scan_ids_resolve_from_a_unique_prefix() {
    let mut store = Store::memory();
    for id in ["abc123", "abd456", "ff0000"] {
        record_all(&mut store, &[start(id, &[])]);
    }
    store.close().unwrap();
    let mut db = store.into_db();
    assert_eq!(db.resolve("abc").unwrap(), "abc123");
    assert_eq!(db.resolve("f").unwrap(), "ff0000");
    assert_eq!(db.resolve("abd456").unwrap(), "abd456");
    let e = db.resolve("ab").unwrap_err();
    assert!(e.is_usage() && e.to_string().contains("ambiguous"), "{e}");
    let e = db.resolve("99").unwrap_err();
    assert!(e.is_usage() && e.to_string().contains("no scan"), "{e}");
    assert!(db.resolve("").is_err());
}

/// The start of a scan of `ports` (TCP) that ran `plugins`.
fn covering(id: &str, ports: &[u16], plugins: &[&str]) -> Event {
    let Event::ScanStart(mut s) = start(id, &[]) else { unreachable!() };
    s.settings.ports = ports.to_vec();
    s.settings.plugins = plugins.iter().map(|p| p.to_string()).collect();
    Event::ScanStart(s)
}

#[test]
fn diff_reports_ports_services_and_findings() {
    let a = vec![
        covering("a", &[22, 80, 443, 6379], &["redis-info"]),
        port("198.18.0.2", 22, 0.0),
        port("198.18.0.2", 80, 0.0),
        port("198.18.0.2", 443, 0.0),
        service("198.18.0.2", 443, "1.22.1"),
        finding("198.18.0.2", 443, "old"),
        finding("198.18.0.2", 443, "same"),
    ];
    let b = vec![
        covering("b", &[22, 80, 443, 6379], &["redis-info"]),
        port("198.18.0.2", 22, 0.0),
        port("198.18.0.2", 443, 0.0),
        port("198.18.0.2", 6379, 0.0),
        service("198.18.0.2", 443, "1.24.0"),
        finding("198.18.0.2", 443, "same"),
        finding("198.18.0.2", 6379, "new"),
    ];
    let d = diff(&a, &b);
    assert_eq!(d.opened, vec![(ip("198.18.0.2"), 6379, "tcp".to_string())]);
    assert_eq!(d.closed, vec![(ip("198.18.0.2"), 80, "tcp".to_string())]);
    assert_eq!(d.changed.len(), 1);
    assert_eq!(d.changed[0].before, "ssl/http nginx 1.22.1");
    assert_eq!(d.changed[0].after, "ssl/http nginx 1.24.0");
    assert_eq!(d.new_findings.iter().map(|f| f.title.as_str()).collect::<Vec<_>>(), ["new"]);
    assert_eq!(d.gone_findings.iter().map(|f| f.title.as_str()).collect::<Vec<_>>(), ["old"]);
    assert!(d.uncovered.is_empty(), "{:?}", d.uncovered);
    assert!(diff(&a, &a).is_empty());
}

#[test]
fn a_diff_compares_only_what_both_scans_covered() {
    let by = |plugin: &str, title: &str| {
        let mut f = finding("198.18.0.2", 22, title);
        if let Event::Finding(f) = &mut f {
            f.plugin = plugin.into();
        }
        f
    };
    let a = vec![
        covering("a", &[22, 80], &["redis-info", "ssl-cert"]),
        port("198.18.0.2", 22, 0.0),
        port("198.18.0.2", 80, 0.0),
        port("198.18.0.3", 22, 0.0),
        by("ssl-cert", "seen by a plugin b did not run"),
        // A plugin both ran, on a port b did not scan.
        finding("198.18.0.2", 80, "on a port b did not scan"),
    ];
    // b scanned only port 22, and only of 198.18.0.2, with one plugin of a's.
    let b = vec![
        covering("b", &[22], &["redis-info", "ssh-hostkey"]),
        port("198.18.0.2", 22, 0.0),
        by("ssh-hostkey", "b's plugin"),
    ];
    let d = diff(&a, &b);
    // 80 was not scanned by b and 198.18.0.3 not reported: neither is "no longer open".
    assert!(d.is_empty(), "{d:?}");
    assert_eq!((d.uncovered.open_only_in_a, d.uncovered.open_only_in_b), (2, 0));
    assert_eq!(d.uncovered.plugins_only_in_a, ["ssl-cert"]);
    assert_eq!(d.uncovered.plugins_only_in_b, ["ssh-hostkey"]);
    // A host b found down was not port-scanned: its port is not compared;
    // one b found up (its ports all closed) was: its port is closed now.
    let host = |state: HostState| {
        Event::Host(HostEvent {
            scan_id: SCANID.into(),
            ip: ip("198.18.0.3"),
            state,
            reason: Reason::NoResponse,
            ttl: None,
            latency: None,
            mac: None,
            t: 0.1,
        })
    };
    let mut down = b.clone();
    down.push(host(HostState::Down));
    assert!(diff(&a, &down).closed.is_empty(), "{:?}", diff(&a, &down));
    let mut b = b;
    b.push(host(HostState::Up));
    assert_eq!(diff(&a, &b).closed, vec![(ip("198.18.0.3"), 22, "tcp".to_string())]);
}

#[test]
fn a_script_result_changes_only_in_what_is_not_volatile() {
    let scan = |id: &str, r: Event| vec![covering(id, &[6379], &["redis-info"]), port("198.18.0.2", 6379, 0.0), r];
    let data = |version: &str, uptime: u32| serde_json::json!({"Version": version, "Stats": {"Uptime": uptime}});
    let text = |version: &str, uptime: u32| format!("\n  Version: {version}\n  Uptime: {uptime}");
    // Only the uptime differs, and the plugin calls it volatile: no change.
    let a = scan("a", script("198.18.0.2", 6379, &text("7.0.15", 1), data("7.0.15", 1), &["uptime"]));
    let b = scan("b", script("198.18.0.2", 6379, &text("7.0.15", 99), data("7.0.15", 99), &["uptime"]));
    assert!(diff(&a, &b).is_empty(), "{:?}", diff(&a, &b));
    // The same result without the declaration is a change.
    let c = scan("c", script("198.18.0.2", 6379, &text("7.0.15", 99), data("7.0.15", 99), &[]));
    let a_plain = scan("a", script("198.18.0.2", 6379, &text("7.0.15", 1), data("7.0.15", 1), &[]));
    assert_eq!(diff(&a_plain, &c).scripts.len(), 1);
    // A text-only result: its `Uptime:` lines are what is volatile.
    let t = |uptime: u32| {
        scan("t", script("198.18.0.2", 6379, &text("7.0.15", uptime), serde_json::json!(null), &["Uptime"]))
    };
    assert!(diff(&t(1), &t(2)).is_empty());
    // A version that changed is a change, before and after kept.
    let b2 = scan("b", script("198.18.0.2", 6379, &text("7.2.4", 99), data("7.2.4", 99), &["uptime"]));
    let d = diff(&a, &b2);
    assert_eq!(d.scripts.len(), 1);
    let (Some(x), Some(y)) = &d.scripts[0] else { panic!("{:?}", d.scripts) };
    assert_eq!((x.data["Version"].as_str(), y.data["Version"].as_str()), (Some("7.0.15"), Some("7.2.4")));
    // Script results are not findings.
    assert!(d.new_findings.is_empty() && d.gone_findings.is_empty());
    // A scan stored before the plugin declared its volatile keys (an
    // upgraded database has none) compares by the newer declaration.
    let old = scan("o", script("198.18.0.2", 6379, &text("7.0.15", 5), data("7.0.15", 5), &[]));
    assert!(diff(&old, &b).is_empty(), "{:?}", diff(&old, &b));
}

#[test]
fn a_write_error_is_an_io_error_that_names_the_database() {
    let mut store = Store::memory();
    record_all(&mut store, &[start("aa", &[])]);
    store.flush().unwrap();
    store.db.query("DROP TABLE ports", &[]).unwrap();
    store.record(&port("198.18.0.2", 22, 0.1)).unwrap();
    let e = store.flush().unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains(":memory:") && msg.contains("ports"), "{msg}");
    // Nothing of the failed batch was written, and the store still works.
    record_all(&mut store, &[error(None, None)]);
    store.close().unwrap();
}

#[test]
fn an_event_before_scan_start_is_an_error_not_a_panic() {
    let mut store = Store::memory();
    let e = store.record(&port("198.18.0.2", 22, 0.1)).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidData);
    assert!(e.to_string().contains("before scan_start"), "{e}");
}

#[test]
fn a_file_store_uses_wal_and_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("scans.db");
    let path = path.to_str().unwrap();
    assert!(Db::open(path, &Default::default()).is_err(), "reading never creates a database");
    assert!(!std::path::Path::new(path).exists());
    let mut sink = open(path, &Default::default()).unwrap();
    for e in scan_events("00c0ffee00000005") {
        sink.record(&e).unwrap();
    }
    sink.close().unwrap();
    drop(sink);
    // A second store on the same file keeps the first scan's rows.
    let mut sink = open(path, &Default::default()).unwrap();
    for e in scan_events("00c0ffee00000006") {
        sink.record(&e).unwrap();
    }
    sink.close().unwrap();
    drop(sink);
    let conn = rusqlite::Connection::open(path).unwrap();
    let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
    assert_eq!(mode, "wal");
    let version: i64 = conn.query_row("SELECT version FROM schema_version", [], |r| r.get(0)).unwrap();
    assert_eq!(version, schema::VERSION);
    let mut db = Db::open(path, &Default::default()).unwrap();
    assert_eq!(db.scans().unwrap().len(), 2);
    // A newer schema is refused with a clear message.
    conn.execute("UPDATE schema_version SET version = 99", []).unwrap();
    let e = Db::open(path, &Default::default()).err().expect("newer schema refused");
    assert!(e.to_string().contains("schema version 99"), "{e}");
    let e = open(path, &Default::default()).err().expect("newer schema refused");
    assert!(e.to_string().contains("schema version 99"), "{e}");
}

#[test]
fn a_file_that_is_not_a_database_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.txt");
    std::fs::write(&path, "not a database, just some text that is long enough to have a header").unwrap();
    let e = open(path.to_str().unwrap(), &Default::default()).err().expect("refused");
    assert!(e.to_string().contains("not a database"), "{e}");
    // The caller names the database; the message does not repeat it.
    let e = open("/nonexistent-dir/x.db", &Default::default()).err().expect("refused");
    assert_eq!(e.to_string(), "unable to open database file");
}

#[test]
fn urls_choose_postgres_and_messages_hide_passwords() {
    assert!(is_postgres("postgres://moonscan@198.18.0.3/moonscan"));
    assert!(is_postgres("PostgreSQL://u@h/d"));
    assert!(!is_postgres("moonscan.db"));
    assert!(!is_postgres("./postgres://x"));
    assert_eq!(display_name("postgres://u:secret@h:5432/d"), "postgres://u:***@h:5432/d");
    // Regression: a bare @ in the password showed what followed it.
    assert_eq!(display_name("postgres://u:se@cret@h/d"), "postgres://u:***@h/d");
    assert_eq!(display_name("postgres://u@h/d?password=secret"), "postgres://u@h/d?password=***");
    assert_eq!(display_name("postgres://u@h/d"), "postgres://u@h/d");
    assert_eq!(display_name("/tmp/x.db"), "/tmp/x.db");
    let e = open("postgres://u@[bad/d", &Default::default()).err().expect("bad URL refused");
    assert!(e.to_string().starts_with("bad PostgreSQL URL"), "{e}");
}

#[test]
fn an_unreachable_postgres_is_a_clear_error() {
    // Port 9 on loopback: nothing listens, the connection is refused at once.
    let e = open("postgres://moonscan@127.0.0.1:9/moonscan", &Default::default()).err().expect("refused");
    let msg = e.to_string();
    assert!(msg.starts_with("cannot connect: ") && msg.contains("refused"), "{msg}");
}

/// PostgreSQL's jsonb holds no NUL: a NUL in a string of the value becomes
/// the four characters `\x00`, and nothing else changes, not even a string
/// holding a backslash followed by `u0000` (serialized `\\u0000`).
#[test]
fn postgres_json_loses_only_its_nuls() {
    use super::postgres::{copy_field, literal};
    use schema::Kind;
    let lit = |v: &Val| {
        let mut s = String::new();
        literal(&mut s, v, Kind::Json);
        s
    };
    let copy = |v: &Val| {
        let mut s = String::new();
        copy_field(&mut s, v, Kind::Json);
        s
    };
    // The JSON text the server gets, from the literal and from the COPY field.
    let sent = |v: &Val| {
        let l = lit(v);
        let body = l.strip_prefix('\'').and_then(|l| l.strip_suffix("'::jsonb")).expect("a jsonb literal");
        let from_literal = body.replace("''", "'");
        let field = copy(v);
        let mut from_copy = String::new();
        let mut chars = field.chars();
        while let Some(c) = chars.next() {
            if c != '\\' {
                from_copy.push(c);
                continue;
            }
            match chars.next() {
                Some('t') => from_copy.push('\t'),
                Some('n') => from_copy.push('\n'),
                Some('r') => from_copy.push('\r'),
                Some(c) => from_copy.push(c),
                None => panic!("a lone backslash in {field:?}"),
            }
        }
        assert_eq!(from_literal, from_copy);
        assert!(!from_literal.contains('\0'));
        serde_json::from_str::<serde_json::Value>(&from_literal).expect("valid JSON")
    };
    // A backslash followed by u0000 is six plain characters: kept as they are.
    let escaped = serde_json::json!({"a": "x\\u0000y's", "b": ["\\u0000", "\\\\u0000"]});
    let v = Val::json(&escaped);
    assert!(matches!(&v, Val::Text(t) if t.contains(r"\\u0000")), "{v:?}");
    assert_eq!(sent(&v), escaped);
    // A real NUL, anywhere (keys too), becomes \x00, as before.
    let real = serde_json::json!({"a": "x\0y", "n\0": [1, "\0", {"d": "\0\\u0000"}], "f": 2.5, "t": true});
    let want = serde_json::json!({"a": "x\\x00y", "n\\x00": [1, "\\x00", {"d": "\\x00\\u0000"}], "f": 2.5, "t": true});
    assert_eq!(sent(&Val::json(&real)), want);
    assert_eq!(lit(&Val::json("a\0b")), r#"'"a\\x00b"'::jsonb"#);
    assert_eq!(copy(&Val::json("a\0b")), r#""a\\\\x00b""#);
    // JSON without a NUL is sent as it is.
    let plain = r#"{"z":1,"a":"it's"}"#;
    assert_eq!(lit(&Val::Text(plain.into())), r#"'{"z":1,"a":"it''s"}'::jsonb"#);
}

#[test]
fn postgres_literals_are_quoted_and_typed() {
    use super::postgres::{copy_field, literal, script};
    use schema::Kind;
    let lit = |v: Val, k: Kind| {
        let mut s = String::new();
        literal(&mut s, &v, k);
        s
    };
    assert_eq!(lit(Val::Text("it's; DROP TABLE scans; --".into()), Kind::Text), "'it''s; DROP TABLE scans; --'");
    // Backslashes are plain characters with standard_conforming_strings on.
    assert_eq!(lit(Val::Text(r"a\'b".into()), Kind::Text), r"'a\''b'");
    assert_eq!(lit(Val::Text("a\0b".into()), Kind::Text), r"'a\x00b'");
    assert_eq!(lit(Val::Text(r#"{"a":"x\u0000y's"}"#.into()), Kind::Json), r#"'{"a":"x\\x00y''s"}'::jsonb"#);
    assert_eq!(lit(Val::Null, Kind::Int), "NULL");
    assert_eq!(lit(Val::Int(-42), Kind::Int), "-42");
    assert_eq!(lit(Val::Real(0.1), Kind::Real), "0.1");
    assert_eq!(lit(Val::Real(f64::NAN), Kind::Real), "'NaN'");
    assert_eq!(lit(Val::Real(f64::NEG_INFINITY), Kind::Real), "'-Infinity'");
    assert_eq!(lit(Val::Bool(true), Kind::Bool), "TRUE");
    let copy = |v: Val, k: Kind| {
        let mut s = String::new();
        copy_field(&mut s, &v, k);
        s
    };
    assert_eq!(copy(Val::Text("a\tb\nc\\d\re'f\0".into()), Kind::Text), r"a\tb\nc\\d\re'f\\x00");
    assert_eq!(copy(Val::Null, Kind::Int), r"\N");
    assert_eq!(copy(Val::Bool(false), Kind::Bool), "f");
    assert_eq!(copy(Val::Real(0.25), Kind::Real), "0.25");

    let mut store = Store::memory();
    record_all(&mut store, &[start("aa", &["moonscan"]), port("198.18.0.2", 22, 0.5), end("aa", 1)]);
    let sql = script(&store.batch, false);
    assert!(!script(&store.batch, true).contains("INSERT INTO ports"));
    assert!(
        sql.starts_with(
            "INSERT INTO scans (id, started, args, scan_type, seed, probes_planned, shard, settings) VALUES ('aa', "
        ),
        "{sql}"
    );
    assert!(sql.contains("'[\"moonscan\"]'::jsonb"), "{sql}");
    assert!(
        sql.contains("INSERT INTO ports (") && sql.contains("ON CONFLICT (scan_id, ip, port, proto) DO NOTHING;"),
        "{sql}"
    );
    assert!(sql.contains("('aa', '198.18.0.2', 22, 'tcp', 'open', 'syn-ack', 64, 0.5, 1)"), "{sql}");
    let update = sql.lines().last().unwrap();
    assert!(update.starts_with("UPDATE scans SET ended = '20"), "{update}");
    assert!(
        update.ends_with(", elapsed = 0.25, probes_sent = 65535, open = 1, closed = 65534, filtered = 0, errors = 1, findings = 1, scripts = 1, interrupted = FALSE WHERE id = 'aa';"),
        "{update}"
    );
}

/// The SQLite DDL of schema version 7: no scripts table (script results
/// were findings with an `output`), no `scans.scripts`.
fn version_7_ddl() -> String {
    let now = schema::sqlite();
    let (from, to) = (now.find("CREATE TABLE IF NOT EXISTS scripts").unwrap(), now.find("scripts_scan").unwrap());
    let to = to + now[to..].find(";\n").unwrap() + 2;
    let v7 = format!("{}{}", &now[..from], &now[to..])
        .replace(",\n    replies TEXT", "")
        .replace(",\n    targetname TEXT", "")
        .replace(",\n    scripts INTEGER", "")
        .replace("    data TEXT,\n    about TEXT,", "    data TEXT,\n    output TEXT,\n    about TEXT,");
    assert!(
        !v7.contains("scripts") && !v7.contains("targetname") && !v7.contains("replies") && v7.contains("output TEXT"),
        "{v7}"
    );
    v7
}

#[test]
fn a_version_7_database_moves_its_script_results_out_of_its_findings() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v7.db");
    let path = path.to_str().unwrap();
    {
        let conn = rusqlite::Connection::open(path).unwrap();
        conn.execute_batch(&version_7_ddl()).unwrap();
        conn.execute("INSERT INTO schema_version (version) VALUES (7)", []).unwrap();
        conn.execute(
            "INSERT INTO scans (id, started, args, scan_type, seed, ended, findings) \
             VALUES ('old', '2026-01-01T00:00:00Z', '[]', 'syn', '1', '2026-01-01T00:00:01Z', 2)",
            [],
        )
        .unwrap();
        let row =
            "INSERT INTO findings (scan_id, ip, port, proto, plugin, severity, title, data, output, host, t, seq) \
                   VALUES ('old', '198.18.0.2', 6379, 'tcp', 'redis-info', ?1, ?2, ?3, ?4, NULL, 0.5, ?5)";
        conn.execute(
            row,
            rusqlite::params!["info", "redis-info", "{\"Version\":\"7.0.15\"}", "\n  Version: 7.0.15", 1],
        )
        .unwrap();
        conn.execute(
            row,
            rusqlite::params!["high", "Redis answers without authentication", None::<String>, None::<String>, 2],
        )
        .unwrap();
    }
    let mut sink = open(path, &Default::default()).unwrap();
    for e in scan_events("00c0ffee00000008") {
        sink.record(&e).unwrap();
    }
    sink.close().unwrap();
    drop(sink);
    let mut db = Db::open(path, &Default::default()).unwrap();
    let old = db.events("old").unwrap();
    let scripts: Vec<&ScriptEvent> =
        old.iter().filter_map(|e| if let Event::Script(r) = e { Some(&**r) } else { None }).collect();
    let findings: Vec<&FindingEvent> =
        old.iter().filter_map(|e| if let Event::Finding(f) = e { Some(&**f) } else { None }).collect();
    assert_eq!(scripts.len(), 1, "{old:?}");
    assert_eq!(
        (scripts[0].output.as_str(), scripts[0].data["Version"].as_str()),
        ("\n  Version: 7.0.15", Some("7.0.15"))
    );
    assert_eq!(findings.iter().map(|f| f.title.as_str()).collect::<Vec<_>>(), ["Redis answers without authentication"]);
    match old.last() {
        Some(Event::ScanEnd(e)) => assert_eq!((e.findings, e.scripts), (1, 1)),
        other => panic!("{other:?}"),
    }
    assert_eq!(db.scans().unwrap().iter().find(|s| s.id == "old").unwrap().findings, 1);
    let expected: Vec<Event> =
        scan_events("00c0ffee00000008").into_iter().filter(|e| !matches!(e, Event::Log(_))).collect();
    assert_eq!(db.events("00c0ffee00000008").unwrap(), expected);
}

#[test]
fn a_version_1_database_is_upgraded_and_keeps_its_scans() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v1.db");
    let path = path.to_str().unwrap();
    {
        // Schema version 1: scans had no settings column (nor services a
        // tls_session column, which came with version 3, nor findings an
        // output column, version 4).
        let conn = rusqlite::Connection::open(path).unwrap();
        let v1 = version_7_ddl()
            .replace(",\n    settings TEXT", "")
            .replace("\n    tls_session TEXT,", "")
            .replace("\n    output TEXT,", "")
            .replace("\n    about TEXT,", "")
            .replace("\n    host INTEGER,", "");
        assert!(!v1.contains("tls_session") && !v1.contains("output"));
        conn.execute_batch(&v1).unwrap();
        conn.execute("INSERT INTO schema_version (version) VALUES (1)", []).unwrap();
        conn.execute(
            "INSERT INTO scans (id, started, args, scan_type, seed) VALUES ('old', '2026-01-01T00:00:00Z', '[]', 'syn', '1')",
            [],
        )
        .unwrap();
        let cols: Vec<String> = conn
            .prepare("SELECT name FROM pragma_table_info('scans')")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert!(!cols.contains(&"settings".to_string()));
    }
    let mut sink = open(path, &Default::default()).unwrap();
    for e in scan_events("00c0ffee00000007") {
        sink.record(&e).unwrap();
    }
    sink.close().unwrap();
    drop(sink);
    let conn = rusqlite::Connection::open(path).unwrap();
    let version: i64 = conn.query_row("SELECT version FROM schema_version", [], |r| r.get(0)).unwrap();
    assert_eq!(version, schema::VERSION);
    let mut db = Db::open(path, &Default::default()).unwrap();
    assert_eq!(db.scans().unwrap().len(), 2);
    let old = db.events("old").unwrap();
    match &old[0] {
        Event::ScanStart(s) => assert_eq!(s.settings, ScanSettings::default()),
        other => panic!("{other:?}"),
    }
    let expected: Vec<Event> =
        scan_events("00c0ffee00000007").into_iter().filter(|e| !matches!(e, Event::Log(_))).collect();
    assert_eq!(db.events("00c0ffee00000007").unwrap(), expected);
}

/// A service no rule identified, with what each probe got (hostile bytes
/// included: an ANSI escape, NUL, CR, 0xff, a backslash).
fn unidentified(id: &str) -> Vec<Event> {
    let mut s = Service::bare(SCANID.into(), ip("198.18.0.5"), 47001, Proto::Tcp);
    s.replies = vec![
        ProbeReply { probe: "NULL".into(), data: b"\x1b[31mhi\0\r\n\xff\\x41".to_vec() },
        ProbeReply { probe: "GetRequest".into(), data: (0..=255).collect() },
    ];
    s.t = 0.5;
    let mut evs = vec![
        start(id, &["moonscan", "-sV"]),
        port("198.18.0.5", 47001, 0.25),
        Event::Service(Box::new(s)),
        Event::ScanEnd(ScanEnd { scan_id: SCANID.into(), elapsed: 1.0, open: 1, ..ScanEnd::default() }),
    ];
    for e in &mut evs {
        e.set_scan_id(id.into());
    }
    evs
}

#[test]
fn a_service_keeps_its_probe_replies() {
    let mut store = Store::memory();
    let evs = unidentified("00c0ffee0000000a");
    record_all(&mut store, &evs);
    store.close().unwrap();
    let mut db = store.into_db();
    assert_eq!(db.events("00c0ffee0000000a").unwrap(), evs);
}

#[test]
fn a_version_9_database_gains_the_replies_column() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v9.db");
    let path = path.to_str().unwrap();
    {
        let conn = rusqlite::Connection::open(path).unwrap();
        let v9 = schema::sqlite().replace(",\n    replies TEXT", "");
        assert!(!v9.contains("replies"), "{v9}");
        conn.execute_batch(&v9).unwrap();
        conn.execute("INSERT INTO schema_version (version) VALUES (9)", []).unwrap();
        conn.execute(
            "INSERT INTO scans (id, started, args, scan_type, seed) VALUES ('old', '2026-01-01T00:00:00Z', '[]', 'syn', '1')",
            [],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO services (scan_id, ip, port, proto, service, method, cpe, t, seq) \
             VALUES ('old', '198.18.0.5', 47001, 'tcp', 'unknown', 'table', '[]', 0.5, 1)",
            [],
        )
        .unwrap();
    }
    let mut sink = open(path, &Default::default()).unwrap();
    let evs = unidentified("00c0ffee0000000b");
    for e in &evs {
        sink.record(e).unwrap();
    }
    sink.close().unwrap();
    drop(sink);
    let conn = rusqlite::Connection::open(path).unwrap();
    let version: i64 = conn.query_row("SELECT version FROM schema_version", [], |r| r.get(0)).unwrap();
    assert_eq!(version, schema::VERSION);
    drop(conn);
    let mut db = Db::open(path, &Default::default()).unwrap();
    // The old scan's service reads back without replies; the new one's with.
    let old = db.events("old").unwrap();
    let services: Vec<&Service> =
        old.iter().filter_map(|e| if let Event::Service(s) = e { Some(&**s) } else { None }).collect();
    assert_eq!(services.len(), 1, "{old:?}");
    assert!(services[0].replies.is_empty());
    assert_eq!(db.events("00c0ffee0000000b").unwrap(), evs);
}

/// A scan with OS detection on one host (exact matches with their
/// classes, uptime, sequences, fingerprint), a passive hint on another,
/// and a traceroute with a silent hop.
fn os_events(id: &str, best: &str) -> Vec<Event> {
    use crate::output::report::sample;
    let mut os = sample::linux_os("198.18.0.2");
    os.matches[0].name = best.into();
    os.matches.push(OsMatch {
        name: "Linux 5.0 - 5.14".into(),
        accuracy: 100,
        line: 70001,
        classes: vec![OsClass {
            vendor: "Linux".into(),
            family: "Linux".into(),
            generation: None,
            device_type: "general purpose".into(),
            accuracy: 100,
            cpe: vec![],
        }],
    });
    let mut hint = sample::lab_os("198.18.0.3", 0, 0, None);
    hint.ports_used.clear();
    hint.too_many = false;
    hint.distance = None;
    hint.hint = Some(OsHint { family: "Linux".into(), evidence: "ttl=64 win=65160".into() });
    let mut evs = vec![
        start(id, &["moonscan", "-O", "--traceroute", "-p-", "198.18.0.2", "198.18.0.3"]),
        port("198.18.0.2", 22, 0.001),
        port("198.18.0.3", 22, 0.001),
        Event::Os(Box::new(os)),
        Event::Os(Box::new(hint)),
        Event::Os(Box::new(sample::lab_os("2001:2::2", 40000, 2, Some("SCAN(V=7.93)\nSEQ(CI=Z%II=I)")))),
        Event::Trace(Box::new(sample::trace("198.18.0.2"))),
        end(id, 2),
    ];
    for e in &mut evs {
        e.set_scan_id(id.into());
    }
    evs
}

#[test]
fn os_and_trace_events_come_back_as_they_were_recorded() {
    let mut store = Store::memory();
    let evs = os_events("00c0ffee000000f1", "Linux 4.15 - 5.8");
    record_all(&mut store, &evs);
    store.close().unwrap();
    let mut db = store.into_db();
    assert_eq!(db.events("00c0ffee000000f1").unwrap(), evs);
    assert_eq!(count(&mut db, "os"), 3);
    assert_eq!(count(&mut db, "os_matches"), 2);
    assert_eq!(count(&mut db, "os_classes"), 3);
    assert_eq!(count(&mut db, "traces"), 1);
    assert_eq!(count(&mut db, "trace_hops"), 2);
}

#[test]
fn diff_reports_an_os_that_changed_appeared_or_went() {
    let (a, b) = (os_events("a", "Linux 4.15 - 5.8"), os_events("b", "Linux 4.15 - 5.8"));
    assert!(diff(&a, &b).is_empty(), "{:?}", diff(&a, &b));
    // The best match changed.
    let b = os_events("b", "Linux 5.4");
    let d = diff(&a, &b);
    assert_eq!(d.os.len(), 1, "{d:?}");
    assert_eq!(d.os[0].ip, ip("198.18.0.2"));
    assert!(d.os[0].before.as_deref().unwrap().starts_with("Linux 4.15 - 5.8 (100%) [Linux Linux 4.X general purpose"));
    assert!(d.os[0].after.as_deref().unwrap().starts_with("Linux 5.4 (100%)"));
    assert!(!d.is_empty());
    // A class changed under the same name.
    let mut b = os_events("b", "Linux 4.15 - 5.8");
    if let Event::Os(o) = &mut b[3] {
        o.matches[0].classes[0].device_type = "router".into();
    }
    assert_eq!(diff(&a, &b).os.len(), 1);
    // The accuracy alone is no change.
    let mut b = os_events("b", "Linux 4.15 - 5.8");
    if let Event::Os(o) = &mut b[3] {
        o.matches[0].accuracy = 97;
    }
    assert!(diff(&a, &b).os.is_empty());
    // No match any more (too many match): gone; and back: appeared.
    let mut b = os_events("b", "Linux 4.15 - 5.8");
    if let Event::Os(o) = &mut b[3] {
        o.matches.clear();
        o.too_many = true;
    }
    let d = diff(&a, &b);
    assert_eq!((d.os.len(), d.os[0].after.clone()), (1, None), "{d:?}");
    let d = diff(&b, &a);
    assert_eq!((d.os[0].before.clone(), d.os[0].after.is_some()), (None, true));
    // A scan that did not run OS detection on the host says nothing of it.
    let b: Vec<Event> = os_events("b", "Linux 5.4").into_iter().filter(|e| !matches!(e, Event::Os(_))).collect();
    assert!(diff(&a, &b).os.is_empty());
}

#[test]
fn a_version_10_database_gains_the_os_and_trace_tables() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v10.db");
    let path = path.to_str().unwrap();
    {
        let conn = rusqlite::Connection::open(path).unwrap();
        let ddl = schema::sqlite();
        let v10 = &ddl[..ddl.find("CREATE TABLE IF NOT EXISTS os (").unwrap()];
        assert!(!v10.contains("trace"), "{v10}");
        conn.execute_batch(v10).unwrap();
        conn.execute("INSERT INTO schema_version (version) VALUES (10)", []).unwrap();
        conn.execute(
            "INSERT INTO scans (id, started, args, scan_type, seed) VALUES ('old', '2026-01-01T00:00:00Z', '[]', 'syn', '1')",
            [],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO ports (scan_id, ip, port, proto, state, reason, t, seq) \
             VALUES ('old', '198.18.0.2', 22, 'tcp', 'open', 'syn-ack', 0.5, 1)",
            [],
        )
        .unwrap();
    }
    let mut sink = open(path, &Default::default()).unwrap();
    let evs = os_events("00c0ffee000000f2", "Linux 4.15 - 5.8");
    for e in &evs {
        sink.record(e).unwrap();
    }
    sink.close().unwrap();
    drop(sink);
    let conn = rusqlite::Connection::open(path).unwrap();
    let version: i64 = conn.query_row("SELECT version FROM schema_version", [], |r| r.get(0)).unwrap();
    assert_eq!((version, schema::VERSION), (11, 11));
    drop(conn);
    let mut db = Db::open(path, &Default::default()).unwrap();
    let old = db.events("old").unwrap();
    assert_eq!(old.len(), 2, "{old:?}");
    assert_eq!(db.events("00c0ffee000000f2").unwrap(), evs);
}
