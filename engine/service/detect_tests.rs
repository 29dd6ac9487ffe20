//! Tests of detect.rs: loopback servers that answer as real and hostile
//! services do, probe databases written for each case.

use super::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use tokio::net::TcpListener;

/// A loopback server running `serve` on every connection; returns its port.
async fn server<F, Fut>(serve: F) -> u16
where
    F: Fn(TcpStream) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    let serve = Arc::new(serve);
    tokio::spawn(async move {
        while let Ok((s, _)) = l.accept().await {
            tokio::spawn(serve(s));
        }
    });
    port
}

fn db(yaml: &str) -> ProbeDb {
    let mut db = ProbeDb::default();
    db.add_str(yaml, std::path::Path::new("test.yaml")).unwrap();
    db
}

const NULL_SSH: &str = r#"
probes:
  - name: 'NULL'
    wait_ms: 1000
    matches:
      - service: ssh
        pattern: '^SSH-2\.0-Test_([\d.]+)\r\n'
        product: Test SSH
        version: $1
"#;

fn quick() -> DetectOptions {
    DetectOptions { port_timeout: Duration::from_secs(3), idle: Duration::from_millis(200), ..Default::default() }
}

const LOCAL: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

#[tokio::test]
async fn a_banner_is_matched_without_waiting() {
    let port = server(|mut s| async move {
        let _ = s.write_all(b"SSH-2.0-Test_1.5\r\n").await;
        tokio::time::sleep(Duration::from_secs(5)).await;
    })
    .await;
    let det = Detector::new(db(NULL_SSH), quick()).unwrap();
    let t = std::time::Instant::now();
    let d = det.detect(LOCAL, port).await;
    let id = d.identity.unwrap();
    assert_eq!((id.service.as_str(), id.version.as_deref()), ("ssh", Some("1.5")));
    assert_eq!(d.method, Some(ServiceMethod::Probed));
    assert!(t.elapsed() < Duration::from_millis(500), "{:?}", t.elapsed());
}

#[tokio::test]
async fn reads_stop_at_the_buffer_however_much_is_sent() {
    // Sends until the client goes away: 64 KiB at a time.
    let port = server(|mut s| async move {
        let chunk = vec![b'x'; 65536];
        while s.write_all(&chunk).await.is_ok() {}
    })
    .await;
    let opts = DetectOptions { buffer_size: 4096, ..quick() };
    let det = Detector::new(db(NULL_SSH), opts).unwrap();
    let d = det.detect(LOCAL, port).await;
    assert_eq!(d.probes_sent, 1);
    assert_eq!(d.bytes_read, 4096, "one buffer's worth, then the connection is dropped");
    assert_eq!(d.banner.len(), plan::BANNER_MAX);
    assert!(d.identity.is_none() && d.error.is_none());
}

#[tokio::test]
async fn the_port_budget_ends_a_slow_drip() {
    let port = server(|mut s| async move {
        for _ in 0..100 {
            if s.write_all(b"A").await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    // Every byte comes before the idle gap, so only the budget ends it.
    let opts = DetectOptions { port_timeout: Duration::from_millis(700), ..quick() };
    let det = Detector::new(db(NULL_SSH), opts).unwrap();
    let t = std::time::Instant::now();
    let d = det.detect(LOCAL, port).await;
    let took = t.elapsed();
    assert!(took >= Duration::from_millis(650) && took < Duration::from_millis(1000), "{took:?}");
    assert!(matches!(d.error, Some(DetectError::Timeout(_))), "{:?}", d.error);
    assert!(d.bytes_read >= 5 && d.bytes_read <= 8, "{}", d.bytes_read);
}

/// A probe's `fallback` lends it another probe's rules (not only the
/// NULL probe's), in order; a `backtrack` rule (lookahead) decides.
#[tokio::test]
async fn fallback_rules_and_backtracking_rules_identify() {
    let port = server(|mut s| async move {
        let mut b = [0u8; 64];
        let _ = s.read(&mut b).await;
        let _ = s.write_all(b"WIDGET 2.5 ready\r\n").await;
        tokio::time::sleep(Duration::from_secs(2)).await;
    })
    .await;
    let yaml = format!(
        r#"
probes:
  - name: 'NULL'
    wait_ms: 300
  - name: Hello
    payload: 'HELLO\r\n'
    ports: [{port}]
    fallback: [Widgets]
  - name: Widgets
    payload: 'W\r\n'
    rarity: 9
    matches:
      - service: widget
        pattern: '^WIDGET (\d\.\d)(?= ready)'
        backtrack: true
        product: Widget server
        version: $1
"#
    );
    let det = Detector::new(db(&yaml), DetectOptions { intensity: 1, ..quick() }).unwrap();
    let d = det.detect(LOCAL, port).await;
    let id = d.identity.expect("identified through the fallback");
    assert_eq!((id.service.as_str(), id.version.as_deref()), ("widget", Some("2.5")));
    assert_eq!(d.probe.as_deref(), Some("Hello"), "the Widgets probe itself was never sent");
}

/// A server that closes at once without a word is `tcpwrapped` when the
/// NULL probe says `tcpwrapped_ms`; an excluded port gets no probe.
#[tokio::test]
async fn tcpwrapped_and_excluded_ports() {
    let closes = server(|s| async move { drop(s) }).await;
    let yaml = "exclude: [9]\nprobes:\n  - name: 'NULL'\n    wait_ms: 1000\n    tcpwrapped_ms: 500\n";
    let det = Detector::new(db(yaml), quick()).unwrap();
    let d = det.detect(LOCAL, closes).await;
    assert_eq!(d.identity.map(|i| i.service), Some("tcpwrapped".to_string()));
    // Without tcpwrapped_ms the same server says nothing.
    let det = Detector::new(db("probes:\n  - name: 'NULL'\n    wait_ms: 300\n"), quick()).unwrap();
    assert!(det.detect(LOCAL, closes).await.identity.is_none());
    let (port, seen) = recording_server().await;
    let yaml = format!("exclude: [{port}]\nprobes:\n  - name: 'NULL'\n    wait_ms: 300\n");
    let det = Detector::new(db(&yaml), quick()).unwrap();
    let d = det.detect(LOCAL, port).await;
    assert_eq!(d.probes_sent, 0);
    assert!(seen.lock().unwrap().is_empty(), "an excluded port is never connected to");
}

/// Records the first bytes of each connection, answers nothing.
async fn recording_server() -> (u16, Arc<std::sync::Mutex<Vec<Vec<u8>>>>) {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let port = server(move |mut s| {
        let seen = s2.clone();
        async move {
            let mut b = [0u8; 64];
            let n = s.read(&mut b).await.unwrap_or(0);
            seen.lock().unwrap().push(b[..n].to_vec());
        }
    })
    .await;
    (port, seen)
}

fn ordered_db(port: u16) -> ProbeDb {
    db(&format!(
        r#"
probes:
  - name: 'NULL'
    wait_ms: 100
  - name: Rare
    payload: 'rare\r\n'
    rarity: 8
    wait_ms: 100
  - name: Common
    payload: 'common\r\n'
    rarity: 2
    wait_ms: 100
  - name: Listed
    payload: 'listed\r\n'
    ports: [{port}]
    rarity: 9
    wait_ms: 100
"#
    ))
}

#[tokio::test]
async fn probes_go_in_nmap_order_up_to_the_intensity() {
    for (intensity, want) in [(7, vec!["listed", "common"]), (9, vec!["listed", "common", "rare"]), (0, vec!["listed"])]
    {
        let (port, seen) = recording_server().await;
        let opts = DetectOptions { intensity, ..quick() };
        let d = Detector::new(ordered_db(port), opts).unwrap().detect(LOCAL, port).await;
        let mut got: Vec<String> =
            seen.lock().unwrap().iter().map(|b| String::from_utf8_lossy(b).trim().to_string()).collect();
        // The NULL probe sends nothing; its silent connection carries the
        // listed probe, and the others go side by side (judged in order).
        got.sort();
        let mut want = want.clone();
        want.sort();
        assert_eq!(got, want, "intensity {intensity}");
        assert_eq!(d.probes_sent as usize, want.len() + 1);
    }
}

/// On a silent port the probes after the NULL probe go side by side: five
/// probes of 500 ms each take about one wait, not five.
#[tokio::test]
async fn a_silent_port_is_decided_in_about_one_probe_wait() {
    let (port, seen) = recording_server().await;
    let mut yaml = String::from("probes:\n  - name: 'NULL'\n    wait_ms: 300\n");
    for i in 1..=5 {
        yaml += &format!("  - name: P{i}\n    payload: 'p{i}\\r\\n'\n    rarity: {i}\n    wait_ms: 500\n");
    }
    let det = Detector::new(db(&yaml), DetectOptions { intensity: 9, ..quick() }).unwrap();
    let t = std::time::Instant::now();
    let d = det.detect(LOCAL, port).await;
    let took = t.elapsed();
    assert_eq!(d.probes_sent, 6);
    let sent = seen.lock().unwrap().iter().filter(|b| !b.is_empty()).count();
    assert_eq!(sent, 5, "each probe once");
    assert!(took < Duration::from_millis(1500), "{took:?} (in turn: 2.8 s)");
}

/// On a port no probe lists, the NULL probe keeps listening for its whole
/// wait, but the probes start side by side once the banner grace has
/// passed, and more follow as each finishes: 12 silent probes of 600 ms
/// after a NULL wait of 1 s take about the NULL wait, not 1 s + 7.2 s.
#[tokio::test]
async fn an_unlisted_silent_port_is_decided_in_about_the_null_wait() {
    let (port, seen) = recording_server().await;
    let mut yaml = String::from("probes:\n  - name: 'NULL'\n    wait_ms: 1000\n");
    for i in 1..=12 {
        yaml += &format!("  - name: P{i}\n    payload: 'p{i}\\r\\n'\n    rarity: 1\n    wait_ms: 600\n");
    }
    let opts = DetectOptions { intensity: 9, banner_grace: Duration::from_millis(100), ..quick() };
    let det = Detector::new(db(&yaml), opts).unwrap();
    let t = std::time::Instant::now();
    let d = det.detect(LOCAL, port).await;
    let took = t.elapsed();
    assert_eq!(d.probes_sent, 13);
    assert_eq!(seen.lock().unwrap().iter().filter(|b| !b.is_empty()).count(), 12);
    assert!(took >= Duration::from_millis(1000), "the NULL probe waits its whole wait: {took:?}");
    assert!(took < Duration::from_millis(1700), "{took:?} (in turn: 8.2 s)");
}

/// What waits for its turn counts against the window too: while the
/// first probe's reply is slow, quick replies to the later ones do not
/// pull the whole list ahead (each would hold a pool buffer).
#[tokio::test]
async fn a_slow_reply_holds_back_the_probes_behind_it() {
    let t0 = std::time::Instant::now();
    let early = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let e2 = early.clone();
    let port = server(move |mut s| {
        let early = e2.clone();
        async move {
            let mut b = [0u8; 16];
            if let Ok(n) = s.read(&mut b).await {
                if n > 0 && t0.elapsed() < Duration::from_millis(400) {
                    early.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
                if &b[..n] == b"p1\r\n" {
                    tokio::time::sleep(Duration::from_millis(600)).await;
                }
                let _ = s.write_all(b"?\r\n").await;
            }
        }
    })
    .await;
    let mut yaml = String::from("probes:\n  - name: 'NULL'\n    wait_ms: 100\n");
    for i in 1..=100 {
        yaml += &format!("  - name: P{i}\n    payload: 'p{i}\\r\\n'\n    rarity: 1\n    wait_ms: 1000\n");
    }
    let opts = DetectOptions { intensity: 9, parallelism: 64, idle: Duration::from_millis(50), ..quick() };
    let det = Detector::new(db(&yaml), opts).unwrap();
    let d = det.detect(LOCAL, port).await;
    assert_eq!(d.probes_sent, 101);
    let early = early.load(std::sync::atomic::Ordering::SeqCst);
    assert!(early <= plan::AHEAD + 1, "{early} probes sent while the first was still answering");
}

/// A short port budget on a port no probe lists: the NULL probe leaves
/// time to judge what the probes sent meanwhile fetched.
#[tokio::test]
async fn a_short_budget_still_judges_the_probes_sent_during_the_null_wait() {
    let port = server(|mut s| async move {
        let mut b = [0u8; 16];
        if let Ok(n) = s.read(&mut b).await {
            if &b[..n] == b"A\r\n" {
                let _ = s.write_all(b"ALPHA\r\n").await;
            }
        }
        tokio::time::sleep(Duration::from_secs(8)).await;
    })
    .await;
    let yaml = "probes:\n  - name: 'NULL'\n    wait_ms: 6000\n  - name: A\n    payload: 'A\\r\\n'\n    rarity: 1\n    wait_ms: 1000\n    matches:\n      - service: alpha\n        pattern: '^ALPHA'\n";
    let opts =
        DetectOptions { port_timeout: Duration::from_secs(2), banner_grace: Duration::from_millis(100), ..quick() };
    let det = Detector::new(db(yaml), opts).unwrap();
    let t = std::time::Instant::now();
    let d = det.detect(LOCAL, port).await;
    assert_eq!(d.identity.map(|i| i.service).as_deref(), Some("alpha"), "{:?}", d.error);
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
}

/// A banner that comes after the banner grace, while probes are already
/// out, still wins: the NULL probe is first in order.
#[tokio::test]
async fn a_late_banner_wins_over_probes_sent_meanwhile() {
    let port = server(|mut s| async move {
        let mut b = [0u8; 16];
        match tokio::time::timeout(Duration::from_millis(400), s.read(&mut b)).await {
            Ok(Ok(n)) if &b[..n] == b"A\r\n" => {
                let _ = s.write_all(b"ALPHA\r\n").await;
            }
            Err(_) => {
                let _ = s.write_all(b"SSH-2.0-Test_1.0\r\n").await;
            }
            _ => {}
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    })
    .await;
    let yaml = format!(
            "{NULL_SSH}  - name: A\n    payload: 'A\\r\\n'\n    rarity: 1\n    wait_ms: 1000\n    matches:\n      - service: alpha\n        pattern: '^ALPHA'\n"
        );
    let opts = DetectOptions { banner_grace: Duration::from_millis(100), ..quick() };
    let det = Detector::new(db(&yaml), opts).unwrap();
    let d = det.detect(LOCAL, port).await;
    assert_eq!(d.identity.map(|i| i.service).as_deref(), Some("ssh"));
    assert_eq!(d.probe.as_deref(), Some("NULL"));
}

/// An echo service sends each probe back: it is `echo`, not what the
/// probe's own rules would take its bytes for (an SMB request echoed).
#[tokio::test]
async fn an_echo_service_is_echo() {
    let port = server(|mut s| async move {
        let mut b = [0u8; 512];
        while let Ok(n) = s.read(&mut b).await {
            if n == 0 || s.write_all(&b[..n]).await.is_err() {
                break;
            }
        }
    })
    .await;
    let yaml = r#"
probes:
  - name: 'NULL'
    wait_ms: 200
  - name: Smbish
    payload: '\x00\x00\x00\x08\xfeSMB\x40\x00'
    rarity: 1
    wait_ms: 1000
    soft_matches:
      - service: microsoft-ds
        pattern: '(?s-u)^\x00...[\xfe\xff]SMB'
"#;
    let det = Detector::new(db(yaml), quick()).unwrap();
    let d = det.detect(LOCAL, port).await;
    assert_eq!(d.identity.map(|i| i.service).as_deref(), Some("echo"));
}

/// Replies are judged in probe order: the first probe's hard match wins
/// even when a later probe's reply came first.
#[tokio::test]
async fn side_by_side_probes_keep_nmaps_order() {
    let port = server(|mut s| async move {
        let mut b = [0u8; 16];
        let n = s.read(&mut b).await.unwrap_or(0);
        match &b[..n] {
            b"A\r\n" => {
                tokio::time::sleep(Duration::from_millis(300)).await;
                let _ = s.write_all(b"ALPHA\r\n").await;
            }
            b"B\r\n" => {
                let _ = s.write_all(b"BETA\r\n").await;
            }
            _ => {}
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    })
    .await;
    let yaml = r#"
probes:
  - name: 'NULL'
    wait_ms: 200
  - name: A
    payload: 'A\r\n'
    rarity: 1
    wait_ms: 1000
    matches:
      - service: alpha
        pattern: '^ALPHA'
  - name: B
    payload: 'B\r\n'
    rarity: 2
    wait_ms: 1000
    matches:
      - service: beta
        pattern: '^BETA'
"#;
    let det = Detector::new(db(yaml), quick()).unwrap();
    let d = det.detect(LOCAL, port).await;
    assert_eq!(d.identity.map(|i| i.service).as_deref(), Some("alpha"));
    assert_eq!(d.probe.as_deref(), Some("A"));
}

#[tokio::test]
async fn a_soft_match_keeps_only_probes_for_that_service() {
    let yaml = r#"
probes:
  - name: 'NULL'
    wait_ms: 100
    soft_matches:
      - service: ftp
        pattern: '^220 '
  # Other comes first in file order; the soft match must skip it.
  - name: Other
    payload: 'OTHER\r\n'
    rarity: 1
    wait_ms: 300
    matches:
      - service: smtp
        pattern: '^220 '
  - name: Help
    payload: 'HELP\r\n'
    rarity: 1
    wait_ms: 300
    matches:
      - service: ftp
        pattern: '214 TestFTPd ([\d.]+)'
        product: TestFTPd
        version: $1
"#;
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let port = server(move |mut s| {
        let seen = s2.clone();
        async move {
            let _ = s.write_all(b"220 welcome\r\n").await;
            let mut b = [0u8; 64];
            let n = s.read(&mut b).await.unwrap_or(0);
            seen.lock().unwrap().push(String::from_utf8_lossy(&b[..n]).into_owned());
            if b[..n].starts_with(b"HELP") {
                let _ = s.write_all(b"214 TestFTPd 2.1\r\n").await;
            }
        }
    })
    .await;
    let d = Detector::new(db(yaml), quick()).unwrap().detect(LOCAL, port).await;
    let id = d.identity.unwrap();
    assert_eq!((id.service.as_str(), id.version.as_deref()), ("ftp", Some("2.1")));
    assert!(!seen.lock().unwrap().iter().any(|s| s.starts_with("OTHER")), "{:?}", seen.lock().unwrap());
}

#[test]
fn banners_print_safely() {
    let text = crate::findings::banner_text::to_text(b"SSH-2.0-x\r\n\x00\xff\\");
    assert_eq!(text, "SSH-2.0-x\\r\\n\\x00\\xff\\\\");
}
