//! Result stores: scans written with `--db` into SQLite and the lab's
//! PostgreSQL, read back with `moonscan db list|show|diff|export`.
//! What needs no lab is in tests/stores.rs.

use std::collections::BTreeSet;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

use crate::util::{bin, events, in_lab, lab, lab_ports, lab_scan, of_type, open_ports, stderr, stdout, TARGET};

#[path = "../stores/common.rs"]
mod common;
use common::*;

/// The lab's result database (scripts/lab.sh creates it; the moonscan role is trusted from 198.18.0.0/24).
const PG_URL: &str = "postgres://moonscan@198.18.0.3/moonscan_results";

/// A lab scan with `--db` and NDJSON on stdout.
fn scan_into(db: &str, args: &[&str]) -> (Output, Vec<Value>) {
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--db", db]);
    lab_scan(&all)
}

/// `moonscan db ARGS` in the scanner namespace.
fn db_in_lab(args: &[&str]) -> Output {
    in_lab(bin()).arg("db").args(args).output().expect("moonscan db runs in the lab")
}

#[test]
fn a_lab_scan_is_stored_and_db_list_and_show_see_it() {
    let _lab = lab();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("scans.db");
    let (out, evs) = scan_into(path_str(&db), &["-sS", "-n", "-p-", TARGET]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(open_ports(&evs), lab_ports(TARGET));
    let id = scan_id(&evs);

    // The rows, read with SQLite itself.
    let conn = rusqlite::Connection::open(&db).unwrap();
    let mut stmt =
        conn.prepare("SELECT ip, port FROM ports WHERE scan_id = ?1 AND state = 'open' ORDER BY port").unwrap();
    let rows: Vec<(String, u16)> =
        stmt.query_map([&id], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().map(Result::unwrap).collect();
    assert_eq!(rows, lab_ports(TARGET));
    let (scan_type, closed, ended): (String, i64, Option<String>) = conn
        .query_row("SELECT scan_type, closed, ended FROM scans WHERE id = ?1", [&id], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .unwrap();
    assert_eq!((scan_type.as_str(), closed), ("syn", 65531));
    assert!(ended.is_some(), "scan_end was stored");
    let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
    assert_eq!(mode, "wal");

    // db list, with the database from $MOONSCAN_DB.
    let out = Command::new(bin()).args(["db", "list"]).env("MOONSCAN_DB", &db).stdin(Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let list = stdout(&out);
    let line = list.lines().find(|l| l.starts_with(&id)).unwrap_or_else(|| panic!("{id} not listed:\n{list}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(words[2], "4", "open ports: {line}");
    assert_eq!(words[3], "0", "findings: {line}");
    assert!(line.contains("-sS -n -p- 198.18.0.2"), "the command line is listed: {line}");

    // db show, by a prefix of the id.
    let out = db_cmd(&["--db", path_str(&db), "show", &id[..6]]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let show = stdout(&out);
    assert!(show.contains(&format!("scan {id}")), "{show}");
    assert!(show.contains("\n198.18.0.2\n"), "{show}");
    for p in [22, 80, 443, 6379] {
        assert!(
            show.lines().any(|l| l.split_whitespace().take(2).eq([format!("{p}/tcp").as_str(), "open"])),
            "{p}/tcp open not shown:\n{show}"
        );
    }
}

/// `db diff` of two scans of the same ports, between which one opened
/// (a listener started on 198.18.0.4:7005): it opened, and the other way
/// round it closed. Of two scans of different ports, the port only one
/// scanned is not compared, and the diff says so.
#[test]
fn db_diff_reports_the_port_that_opened_and_what_it_did_not_compare() {
    let _lab = lab();
    crate::service::add_hostile_address();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("scans.db");
    let db = path_str(&db);
    let changing = crate::service::HOSTILE_IP;
    let (out, a) = scan_into(db, &["-sS", "-n", "-p", "22,7005", changing]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let listener = crate::service::Hostile::start("endless_banner.py", 7005, &[]);
    let (out, b) = scan_into(db, &["-sS", "-n", "-p", "22,7005", changing]);
    drop(listener);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(open_ports(&b).len(), open_ports(&a).len() + 1, "7005 opened: {a:?} {b:?}");
    let (a, b) = (scan_id(&a), scan_id(&b));

    let out = db_cmd(&["--db", db, "diff", &a, &b]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("+ 198.18.0.4 7005/tcp open"), "{text}");
    assert!(
        text.contains(
            "1 opened, 0 closed, 0 services changed, 0 new findings, 0 findings gone, 0 script results changed"
        ),
        "{text}"
    );
    assert!(!text.contains("22/tcp"), "unchanged ports are not listed: {text}");
    assert!(!text.contains("not compared"), "both scans covered the same ports: {text}");

    let out = db_cmd(&["--db", db, "diff", &b[..8], &a[..8]]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("- 198.18.0.4 7005/tcp no longer open"), "{text}");
    assert!(text.contains("0 opened, 1 closed"), "{text}");

    // 443 only in the second scan's ports: not compared, not "opened".
    let (out, c) = scan_into(db, &["-sS", "-n", "-p", "22,80", TARGET]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (out, d) = scan_into(db, &["-sS", "-n", "-p", "22,80,443", TARGET]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (c, d) = (scan_id(&c), scan_id(&d));
    let out = db_cmd(&["--db", db, "diff", &c, &d]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(!text.contains("443/tcp"), "{text}");
    assert!(text.contains("0 opened, 0 closed, 0 services changed,"), "{text}");
    assert!(
        text.contains(&format!("not compared: 0 open port(s) of {c} and 1 of {d} that the other scan did not cover")),
        "{text}"
    );
}

#[test]
fn db_export_rebuilds_the_scans_own_events() {
    let _lab = lab();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("scans.db");
    let db = path_str(&db);
    // -Pn: host events and counts are not stored (README).
    let (out, evs) = scan_into(db, &["-sS", "-sV", "-n", "-Pn", "-p", "22,80,443,6379", TARGET]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(of_type(&evs, "service").len(), 4, "{}", stderr(&out));
    let id = scan_id(&evs);

    let json = dir.path().join("export.json");
    let xml = dir.path().join("export.xml");
    let out = db_cmd(&["--db", db, "export", &id, "-oJ", path_str(&json), "-oX", path_str(&xml)]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let back = events(&std::fs::read_to_string(&json).unwrap());
    assert_eq!(open_ports(&back), lab_ports(TARGET));
    // Ports and services (TLS chain included) are the scan's own, field for field and in order.
    let kinds = ["scan_start", "port", "service", "script", "finding", "error", "scan_end"];
    assert_eq!(only(&back, &kinds), only(&evs, &kinds));
    let xml = std::fs::read_to_string(&xml).unwrap();
    assert!(xml.starts_with("<?xml"), "{xml}");
    for p in [22, 80, 443, 6379] {
        assert!(xml.contains(&format!("portid=\"{p}\"")), "{p} missing from the XML:\n{xml}");
    }

    // To stdout as well.
    let out = db_cmd(&["--db", db, "export", &id[..4], "-oJ", "-"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(events(&stdout(&out)), back);
}

/// Three shards of one sweep, written at the same time into the lab's
/// PostgreSQL, add up to the unsharded sweep, with no address twice.
#[test]
fn three_shards_at_once_into_postgres_add_up_to_the_whole_sweep() {
    let _lab = lab();
    let sweep = ["-sS", "-n", "-p", "80", "198.19.0.0/20", "--seed", "7"];
    let children: Vec<_> = (1..=3)
        .map(|k| {
            in_lab(bin())
                .args(sweep)
                .args(["--shard", &format!("{k}/3"), "--db", PG_URL, "-oJ", "-"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("moonscan runs in the lab")
        })
        .collect();
    let outs: Vec<Output> = children.into_iter().map(|c| c.wait_with_output().unwrap()).collect();
    let mut ids = Vec::new();
    for (k, out) in outs.iter().enumerate() {
        assert_eq!(out.status.code(), Some(0), "shard {}: {}", k + 1, stderr(out));
        ids.push(scan_id(&events(&stdout(out))));
    }

    let (out, whole) = lab_scan(&sweep);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let whole: BTreeSet<(String, u16)> = open_ports(&whole).into_iter().collect();
    assert_eq!(whole.len(), 4096, "the unsharded sweep finds every host");

    // What the database holds for each shard.
    let mut union = BTreeSet::new();
    let mut stored = 0;
    for (k, id) in ids.iter().enumerate() {
        let out = db_in_lab(&["--db", PG_URL, "export", id, "-oJ", "-"]);
        assert_eq!(out.status.code(), Some(0), "shard {}: {}", k + 1, stderr(&out));
        let evs = events(&stdout(&out));
        assert_eq!(evs[0]["args"].as_array().unwrap().iter().filter(|a| *a == "--shard").count(), 1);
        let ports = open_ports(&evs);
        assert!(ports.len() > 1000, "shard {} stored {} ports", k + 1, ports.len());
        stored += ports.len();
        union.extend(ports);
    }
    assert_eq!(stored, union.len(), "an address was stored by two shards");
    assert_eq!(union, whole);

    let out = db_in_lab(&["--db", PG_URL, "list"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let list = stdout(&out);
    for (k, id) in ids.iter().enumerate() {
        let line = list.lines().find(|l| l.starts_with(id.as_str())).unwrap_or_else(|| panic!("{id} not listed"));
        assert!(line.contains(&format!("--shard {}/3", k + 1)) && line.contains(" done "), "{line}");
    }
}

/// Events with every field set, and text that needs quoting in SQL and in COPY.
fn tricky_events(id: &str, ports: u32) -> Vec<moonscan::findings::Event> {
    use moonscan::findings::*;
    let nasty = "it's \"quoted\"; a\\b\tc\nd\re — ünïcödé 🦀 $1 ? %s";
    let mut evs = vec![Event::ScanStart(ScanStart {
        scan_id: id.into(),
        started: humantime::parse_rfc3339("2026-11-21T15:21:53.078Z").unwrap(),
        args: vec!["moonscan".into(), nasty.into(), "--shard".into(), "1/1".into()],
        scan_type: ScanType::Syn,
        seed: u64::MAX,
        probes_planned: u64::from(ports),
        settings: Default::default(),
    })];
    for i in 0..ports {
        evs.push(Event::Port(PortEvent {
            scan_id: id.into(),
            ip: std::net::Ipv4Addr::from(0xc613_0000 + i).into(),
            port: 80,
            proto: Proto::Tcp,
            state: PortState::Open,
            reason: Reason::SynAck,
            ttl: if i % 2 == 0 { Some(64) } else { None },
            t: f64::from(i) / 7.0,
        }));
    }
    // What -O and --traceroute found, with the text that is hard to store.
    let host: std::net::IpAddr = "198.18.0.2".parse().unwrap();
    let class = OsClass {
        vendor: "Linux".into(),
        family: nasty.into(),
        generation: Some("5.X".into()),
        device_type: "general purpose".into(),
        accuracy: 96,
        cpe: vec!["cpe:/o:linux:linux_kernel:5".into()],
    };
    evs.push(Event::Os(Box::new(OsEvent {
        ports_used: vec![PortUsed { state: "open".into(), proto: Proto::Tcp, port: 22 }],
        matches: vec![OsMatch { name: "Linux 5.3 - 5.4".into(), accuracy: 96, line: 68_140, classes: vec![class] }],
        fingerprint: Some(format!("OS:SCAN(V=moonscan-0.1.0%E=4)SEQ(SP=106%GCD=1)\nOS:{nasty}")),
        not_ideal: Some("Missing a closed TCP port so results incomplete".into()),
        distance: Some(1),
        uptime: Some(Uptime { seconds: 12_345, lastboot: "Sat Nov 28 04:03:11 2026".into() }),
        tcp_sequence: Some(Sequence { class: "Good luck!".into(), index: Some(262), values: "A1B2C3D4,1".into() }),
        ip_id_sequence: Some(Sequence { class: "All zeros".into(), index: None, values: "0,0".into() }),
        tcp_ts_sequence: Some(Sequence { class: "1000HZ".into(), index: None, values: "F,10".into() }),
        ..OsEvent::hint(id.into(), host, OsHint { family: "Linux".into(), evidence: nasty.into() }, 3.5)
    })));
    evs.push(Event::Trace(Box::new(TraceEvent {
        scan_id: id.into(),
        ip: host,
        port: 22,
        proto: Proto::Tcp,
        hops: vec![
            TraceHop { ttl: 1, ip: Some("198.18.0.2".parse().unwrap()), rtt_ms: Some(0.05), host: Some(nasty.into()) },
            TraceHop { ttl: 2, ip: None, rtt_ms: None, host: None },
        ],
        t: 3.6,
    })));
    let ip: std::net::IpAddr = "2001:2::2".parse().unwrap();
    evs.push(Event::Service(Box::new(Service {
        scan_id: id.into(),
        ip,
        port: 443,
        proto: Proto::Tcp,
        targetname: None,
        rdns: None,
        method: ServiceMethod::Soft,
        tunnel: Some(Tunnel::Ssl),
        probe: Some("GetRequest".into()),
        banner: nasty.as_bytes().to_vec(),
        // Not what a soft match has, but every field is stored: NUL, ESC
        // and 0xff are what PostgreSQL's jsonb refuses raw.
        replies: vec![
            ProbeReply { probe: "NULL".into(), data: nasty.as_bytes().to_vec() },
            ProbeReply { probe: "GetRequest".into(), data: b"\x1b[31m\0\r\n\xff".to_vec() },
        ],
        tls: Some(Box::new(TlsInfo {
            version: "TLSv1.3".into(),
            cipher: "TLS13_AES_128_GCM_SHA256".into(),
            alpn: None,
            starttls: Some("smtp".into()),
            path: "rustls".into(),
            kx: "ecdhe".into(),
            group: Some("x25519".into()),
            kx_bits: 253,
            ja3s: "0eec924176fb005dfa419c80ab72d27c".into(),
            ja4s: "t130200_1301_234ea6891581".into(),
            chain: vec![
                CertSummary {
                    subject: nasty.into(),
                    issuer: "CN=ca".into(),
                    san: vec!["DNS:a".into(), nasty.into()],
                    san_cut: 0,
                    not_before: "2026-01-01T00:00:00Z".into(),
                    not_after: "2027-01-01T00:00:00Z".into(),
                    serial: "01".into(),
                    key_type: "ec".into(),
                    key_bits: 256,
                    curve: Some("P-256".into()),
                    signature_algorithm: "ecdsa-with-SHA256".into(),
                    self_signed: false,
                    sha256: "00".repeat(32),
                    error: None,
                },
                CertSummary {
                    subject: "CN=ca".into(),
                    self_signed: true,
                    error: Some("bad".into()),
                    ..Default::default()
                },
            ],
            chain_cut: 7,
            der: vec![],
        })),
        t: 1.5,
        id: Identity {
            service: "http".into(),
            product: Some(nasty.into()),
            version: Some("1.0'".into()),
            info: Some("a\\'b".into()),
            os: Some("Linux".into()),
            hostname: Some("h".into()),
            device: Some("router".into()),
            cpe: vec!["cpe:/a:x:y:1".into(), nasty.into()],
        },
    })));
    evs.push(Event::Script(Box::new(ScriptEvent {
        scan_id: id.into(),
        ip,
        port: 443,
        proto: Proto::Tcp,
        plugin: "ssl-cert".into(),
        output: nasty.into(),
        data: serde_json::json!({"k": nasty, "n": [1, 2.5, -3, null, true]}),
        volatile: vec![nasty.into()],
        host: true,
        targetname: None,
        t: 1.55,
    })));
    evs.push(Event::Finding(Box::new(FindingEvent {
        scan_id: id.into(),
        ip,
        port: 443,
        proto: Proto::Tcp,
        plugin: "ssl-cert".into(),
        severity: Severity::Low,
        title: nasty.into(),
        data: serde_json::json!({"k": nasty, "n": [1, 2.5, -3, null, true], "o": {"'": "\\"}}),
        about: Default::default(),
        host: false,
        targetname: None,
        t: 1.6,
    })));
    evs.push(Event::Error(ErrorEvent {
        scan_id: id.into(),
        ip: None,
        port: None,
        plugin: None,
        kind: ErrorKind::Budget,
        message: nasty.into(),
    }));
    evs
}

/// Run by `postgres_keeps_every_field` on a thread inside the scanner
/// namespace: the lab's PostgreSQL is not reachable from the test's own.
fn postgres_roundtrip_in_the_lab() {
    use moonscan::findings::{Event, ScanEnd};
    use moonscan::output::store::{self, Db};
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    // A small flush (one INSERT script) and a large one (COPY), then a NUL.
    for (n, ports) in [(0u128, 10u32), (1, 3000)] {
        let id = format!("{:016x}", nanos ^ n);
        let mut evs = tricky_events(&id, ports);
        evs.push(Event::ScanEnd(ScanEnd { scan_id: id.clone().into(), elapsed: 2.5, open: 7, ..Default::default() }));
        let mut sink = store::open(PG_URL, &Default::default()).unwrap();
        for e in &evs {
            sink.record(e).unwrap();
        }
        sink.close().unwrap();
        let back = Db::open(PG_URL, &Default::default()).unwrap().events(&id).unwrap();
        assert_eq!(back.len(), evs.len());
        for (a, b) in back.iter().zip(&evs) {
            assert_eq!(a, b);
        }
    }
    // PostgreSQL text cannot hold NUL: it is stored as the four characters \x00.
    let id = format!("{:016x}", nanos ^ 2);
    let mut evs = tricky_events(&id, 1);
    if let Event::Error(e) = evs.last_mut().unwrap() {
        e.message = "a\0b".into();
    }
    // In JSON too, and a backslash followed by u0000 is kept as it is.
    let n = evs.len();
    if let Event::Finding(f) = &mut evs[n - 2] {
        f.data = serde_json::json!({"nul": "c\0d", "k\0": ["\0"], "lit": "e\\u0000f", "both": "\\u0000\0"});
    }
    let mut sink = store::open(PG_URL, &Default::default()).unwrap();
    evs.iter().for_each(|e| sink.record(e).unwrap());
    sink.close().unwrap();
    let back = Db::open(PG_URL, &Default::default()).unwrap().events(&id).unwrap();
    match back.last().unwrap() {
        Event::Error(e) => assert_eq!(e.message, "a\\x00b"),
        other => panic!("{other:?}"),
    }
    match &back[back.len() - 2] {
        Event::Finding(f) => assert_eq!(
            f.data,
            serde_json::json!({"nul": "c\\x00d", "k\\x00": ["\\x00"], "lit": "e\\u0000f", "both": "\\u0000\\x00"})
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn postgres_keeps_every_field() {
    let _lab = lab();
    crate::util::in_lab_thread(postgres_roundtrip_in_the_lab);
}
