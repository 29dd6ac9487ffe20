//! Tests of plan.rs: the scheduler on canned replies and a made-up clock,
//! no socket and no sleep.

use super::*;

#[test]
fn tls_records_are_recognised() {
    assert!(looks_like_tls(b"\x16\x03\x01\x00\x2a"));
    assert!(looks_like_tls(b"\x15\x03\x03\x00\x02\x02\x28"));
    assert!(!looks_like_tls(b"\x16\x03"));
    assert!(!looks_like_tls(b"HTTP/1.1 400"));
    assert!(!looks_like_tls(b"\x17\x03\x03"));
}

fn db(yaml: &str) -> ProbeDb {
    let mut db = ProbeDb::default();
    db.add_str(yaml, std::path::Path::new("test.yaml")).unwrap();
    db
}

/// A clock: `ms` after a fixed start.
struct Clock(Instant);

impl Clock {
    fn new() -> Clock {
        Clock(Instant::now())
    }
    fn at(&self, ms: u64) -> Instant {
        self.0 + Duration::from_millis(ms)
    }
}

const PORT: u16 = 4000;
const GRACE: Duration = Duration::from_millis(250);

fn plan<'d>(db: &'d ProbeDb, clock: &Clock, tunnel: bool) -> Plan<'d, Vec<u8>> {
    Plan::new(db, PORT, tunnel, false, 7, GRACE, clock.at(20_000), None, false)
}

fn reply(bytes: &[u8]) -> (Reply, Vec<u8>) {
    (Reply::Data { len: bytes.len(), open: true, hard: None }, bytes.to_vec())
}

fn silent() -> (Reply, Vec<u8>) {
    reply(b"")
}

/// The probes a list of steps sends, by name.
fn sent(p: &Plan<'_, Vec<u8>>, steps: &[Step]) -> Vec<String> {
    steps
        .iter()
        .filter_map(|s| match s {
            Step::Send { at, .. } => Some(p.probe(*at).name.clone()),
            Step::Cut { .. } => None,
        })
        .collect()
}

fn at_of(p: &Plan<'_, Vec<u8>>, name: &str) -> usize {
    (0..p.order().len()).find(|&i| p.probe(i).name == name).unwrap()
}

fn give(p: &mut Plan<'_, Vec<u8>>, name: &str, (r, b): (Reply, Vec<u8>)) {
    let at = at_of(p, name);
    p.on_reply(at, r, b);
}

/// `n` silent probes P1..Pn of rarity 1 after a NULL probe.
fn many(n: usize, null_wait: u64, wait: u64) -> String {
    let mut yaml = format!("probes:\n  - name: 'NULL'\n    wait_ms: {null_wait}\n");
    for i in 1..=n {
        yaml += &format!("  - name: P{i}\n    payload: 'p{i}\\r\\n'\n    rarity: 1\n    wait_ms: {wait}\n");
    }
    yaml
}

const ORDERED: &str = r#"
probes:
  - name: 'NULL'
    wait_ms: 6000
  - name: Rare
    payload: 'rare'
    rarity: 8
  - name: Common
    payload: 'common'
    rarity: 2
  - name: First
    payload: 'first'
    rarity: 1
  - name: Listed
    payload: 'listed'
    ports: [4000]
    rarity: 9
"#;

#[test]
fn the_order_is_nmaps_null_listed_then_the_rest_by_rarity_up_to_the_intensity() {
    let db = db(ORDERED);
    let clock = Clock::new();
    let p = plan(&db, &clock, false);
    let names: Vec<&str> = (0..p.order().len()).map(|i| p.probe(i).name.as_str()).collect();
    assert_eq!(names, ["NULL", "Listed", "First", "Common"]);
    // Inside TLS a probe lists the port only by its TLS ports; a server
    // known to wait for the client gets no NULL probe.
    let tls: Plan<'_, Vec<u8>> = Plan::new(&db, PORT, true, true, 9, GRACE, clock.at(1000), None, false);
    let names: Vec<&str> = (0..tls.order().len()).map(|i| tls.probe(i).name.as_str()).collect();
    assert_eq!(names, ["First", "Common", "Rare", "Listed"]);
}

/// On a port a probe lists, the NULL probe waits only the grace, and its
/// silent connection carries that probe in turn; the rest go side by side.
#[test]
fn on_a_listed_port_the_null_connection_carries_the_listed_probe() {
    let db = db(ORDERED);
    let clock = Clock::new();
    let mut p = plan(&db, &clock, false);
    let steps = p.poll(clock.at(0));
    assert_eq!(steps, [Step::Send { at: 0, wait: GRACE, in_turn: true, reuse: false }]);
    // Its own read ends at the grace: the plan waits for it, not a timer.
    assert_eq!(p.next_wakeup(), clock.at(20_000));
    give(&mut p, "NULL", silent());
    let steps = p.poll(clock.at(250));
    assert_eq!(sent(&p, &steps), ["Listed", "First", "Common"]);
    assert_eq!(steps[0], Step::Send { at: 1, wait: Duration::from_secs(5), in_turn: true, reuse: true });
    assert!(matches!(steps[1], Step::Send { in_turn: false, reuse: false, .. }));
    assert!(!p.carrying(), "the connection went with the first");
}

/// The grace's tick comes before the NULL probe's silence is back (its
/// read started after its connect): on a listed port nothing goes ahead
/// meanwhile, so the listed probe still carries on its connection.
#[test]
fn a_listed_probe_waits_for_the_null_probe_to_hand_on_its_connection() {
    let db = db(ORDERED);
    let clock = Clock::new();
    let mut p = plan(&db, &clock, false);
    p.poll(clock.at(0));
    assert!(p.poll(clock.at(250)).is_empty(), "nothing ahead of the NULL probe's silence");
    give(&mut p, "NULL", silent());
    let steps = p.poll(clock.at(253));
    assert_eq!(steps[0], Step::Send { at: 1, wait: Duration::from_secs(5), in_turn: true, reuse: true });
}

/// A phase the driver starts on a connection it holds (TLS, handshaken):
/// the first probe in turn goes on it.
#[test]
fn the_first_probe_of_a_phase_goes_on_the_connection_it_was_given() {
    let db = db(ORDERED);
    let clock = Clock::new();
    let mut p: Plan<'_, Vec<u8>> = Plan::new(&db, PORT, true, false, 7, GRACE, clock.at(9000), None, true);
    assert!(p.carrying());
    assert!(matches!(p.poll(clock.at(0))[..], [Step::Send { at: 0, reuse: true, in_turn: true, .. }]));
    assert!(!p.carrying());
}

/// Replies are judged in order whenever they came: a later probe's hard
/// match waits for the earlier probe, whose own hard match wins.
#[test]
fn replies_are_judged_in_order_and_the_first_hard_match_wins() {
    let yaml = r#"
probes:
  - name: 'NULL'
    wait_ms: 1000
  - name: A
    payload: 'A'
    rarity: 1
    matches:
      - service: alpha
        pattern: '^ALPHA'
  - name: B
    payload: 'B'
    rarity: 2
    matches:
      - service: beta
        pattern: '^BETA'
"#;
    let db = db(yaml);
    let clock = Clock::new();
    let mut p = plan(&db, &clock, false);
    let steps = p.poll(clock.at(0));
    assert_eq!(sent(&p, &steps), ["NULL"]);
    // The grace passes in silence: A and B go side by side, the NULL
    // probe listening on.
    let steps = p.poll(clock.at(250));
    assert_eq!(sent(&p, &steps), ["A", "B"]);
    give(&mut p, "B", reply(b"BETA\r\n"));
    assert!(p.poll(clock.at(260)).is_empty());
    assert!(p.end().is_none(), "B's match waits for NULL and A");
    give(&mut p, "NULL", silent());
    p.poll(clock.at(1000));
    assert!(p.end().is_none());
    give(&mut p, "A", reply(b"ALPHA\r\n"));
    p.poll(clock.at(1001));
    let (end, phase) = p.finish();
    let End::Hard { id, probe } = end else { panic!("{end:?}") };
    assert_eq!((id.service.as_str(), probe.as_str()), ("alpha", "A"));
    assert_eq!(phase.probes_sent, 2, "B was never judged");
}

/// A silent port: every probe goes out once the grace has passed, so the
/// port is decided when the longest wait ends, not the sum of them.
#[test]
fn a_silent_port_sends_every_probe_at_once_after_the_grace() {
    let db = db(&many(20, 6000, 5000));
    let clock = Clock::new();
    let mut p = plan(&db, &clock, false);
    p.poll(clock.at(0));
    let steps = p.poll(clock.at(250));
    assert_eq!(steps.len(), 20);
    for i in 1..=20 {
        give(&mut p, &format!("P{i}"), silent());
    }
    assert!(p.poll(clock.at(5250)).is_empty());
    assert!(p.end().is_none(), "the NULL probe still listens");
    give(&mut p, "NULL", silent());
    p.poll(clock.at(6000));
    let (end, phase) = p.finish();
    assert_eq!(end, End::Exhausted);
    assert_eq!(phase.probes_sent, 21);
    assert!(phase.replies.is_empty());
}

/// At most WINDOW in flight, none further than AHEAD past the probe being
/// judged: a slow first reply holds the rest back.
#[test]
fn the_window_and_the_lead_bound_what_one_port_holds() {
    let n = AHEAD + 20;
    let db = db(&many(n, 100, 5000));
    let clock = Clock::new();
    let mut p = plan(&db, &clock, false);
    p.poll(clock.at(0));
    give(&mut p, "NULL", silent());
    let steps = p.poll(clock.at(100));
    // P1 in turn (on the NULL probe's connection), then WINDOW ahead.
    assert_eq!(steps.len(), 1 + WINDOW);
    // Every probe ahead answers at once; P1 does not.
    let mut in_flight: Vec<usize> = steps
        .iter()
        .filter_map(|s| match s {
            Step::Send { at, in_turn: false, .. } => Some(*at),
            _ => None,
        })
        .collect();
    let mut furthest = 0;
    for round in 0..10 {
        for at in in_flight.drain(..) {
            p.on_reply(at, Reply::Data { len: 1, open: true, hard: None }, b"?".to_vec());
        }
        for s in p.poll(clock.at(200 + round)) {
            if let Step::Send { at, .. } = s {
                furthest = furthest.max(at);
                in_flight.push(at);
            }
        }
    }
    assert_eq!(furthest, 1 + AHEAD, "nothing past AHEAD while P1 is out");
    give(&mut p, "P1", silent());
    let more = p.poll(clock.at(5100));
    assert!(!more.is_empty(), "P1 judged: the rest go");
}

/// A soft match keeps only the probes that can say more about its
/// service; the others' replies, even back already, are never judged.
#[test]
fn a_soft_match_rules_out_the_probes_that_cannot_say_more() {
    let yaml = r#"
probes:
  - name: 'NULL'
    wait_ms: 100
  - name: Soft
    payload: 'soft'
    rarity: 1
    soft_matches:
      - service: kv
        pattern: '^KV'
  - name: Other
    payload: 'other'
    rarity: 2
    matches:
      - service: other
        pattern: '^KV'
  - name: Kv
    payload: 'kv'
    rarity: 3
    matches:
      - service: kv
        pattern: '^KV ([\d.]+)'
        version: $1
"#;
    let db = db(yaml);
    let clock = Clock::new();
    let mut p = plan(&db, &clock, false);
    p.poll(clock.at(0));
    give(&mut p, "NULL", silent());
    let steps = p.poll(clock.at(100));
    assert_eq!(sent(&p, &steps), ["Soft", "Other", "Kv"]);
    give(&mut p, "Other", reply(b"KV\r\n"));
    give(&mut p, "Kv", reply(b"KV 2.1\r\n"));
    give(&mut p, "Soft", reply(b"KV\r\n"));
    p.poll(clock.at(120));
    let (end, phase) = p.finish();
    let End::Hard { id, probe } = end else { panic!("{end:?}") };
    assert_eq!((id.service.as_str(), id.version.as_deref(), probe.as_str()), ("kv", Some("2.1"), "Kv"));
    assert_eq!(phase.soft_probe.as_deref(), Some("Soft"));
    assert_eq!(phase.probes_sent, 3, "Other was ruled out");
}

const TLS_DB: &str = r#"
probes:
  - name: 'NULL'
    wait_ms: 6000
    matches:
      - service: ssh
        pattern: '^SSH-2\.0-'
  - name: Hello
    payload: '\x16\x03\x01\x00\x05hello'
    rarity: 1
  - name: Get
    payload: 'GET / HTTP/1.0\r\n\r\n'
    rarity: 1
"#;

/// A ClientHello answered with a TLS record: the NULL probe is cut (a TLS
/// server never speaks first) and the phase ends as TLS at once.
#[test]
fn a_tls_answer_cuts_the_null_wait() {
    let db = db(TLS_DB);
    let clock = Clock::new();
    let mut p = plan(&db, &clock, false);
    p.poll(clock.at(0));
    p.poll(clock.at(250));
    give(&mut p, "Hello", reply(b"\x16\x03\x03\x00\x31\x02"));
    assert_eq!(p.poll(clock.at(260)), [Step::Cut { at: 0 }]);
    assert!(p.poll(clock.at(261)).is_empty(), "cut once");
    give(&mut p, "NULL", silent());
    p.poll(clock.at(262));
    assert_eq!(p.end(), Some(&End::Tls));
}

/// Other data does not cut it: a server that answers what it is sent but
/// speaks first to a client that waits (sslh) is named by its banner, as
/// nmap names it.
#[test]
fn a_plain_answer_leaves_the_null_probe_listening() {
    let db = db(TLS_DB);
    let clock = Clock::new();
    let mut p = plan(&db, &clock, false);
    p.poll(clock.at(0));
    p.poll(clock.at(250));
    give(&mut p, "Get", reply(b"HTTP/1.0 400 Bad Request\r\n\r\n"));
    assert!(p.poll(clock.at(260)).is_empty());
    give(&mut p, "NULL", reply(b"SSH-2.0-OpenSSH_9.2\r\n"));
    p.poll(clock.at(2000));
    let Some(End::Hard { id, .. }) = p.end() else { panic!("{:?}", p.end()) };
    assert_eq!(id.service, "ssh");
    // Inside TLS a TLS-looking reply is data like any other.
    let mut p = plan(&db, &clock, true);
    p.poll(clock.at(0));
    p.poll(clock.at(250));
    give(&mut p, "Hello", reply(b"\x16\x03\x03\x00\x31\x02"));
    assert!(p.poll(clock.at(260)).is_empty());
}

/// No pool buffer for a probe ahead: no more go ahead until the driver
/// has one again, and a starved probe whose turn comes goes in turn.
#[test]
fn without_a_free_buffer_a_probe_waits_for_a_buffer_or_its_turn() {
    let db = db(&many(3, 100, 1000));
    let clock = Clock::new();
    let mut p = plan(&db, &clock, false);
    p.poll(clock.at(0));
    give(&mut p, "NULL", silent());
    let steps = p.poll(clock.at(100));
    assert_eq!(sent(&p, &steps), ["P1", "P2", "P3"]);
    assert!(p.take_spare().is_some(), "the NULL probe's buffer, for P1 in turn");
    p.on_unsent(at_of(&p, "P2"), Unsent::NoBuffer);
    p.on_unsent(at_of(&p, "P3"), Unsent::NoBuffer);
    assert!(p.starved());
    assert!(p.poll(clock.at(101)).is_empty(), "starved: nothing more ahead");
    // A buffer came free: P2 and P3 go ahead again.
    p.unstarve();
    let steps = p.poll(clock.at(102));
    assert_eq!(sent(&p, &steps), ["P2", "P3"]);
    p.on_unsent(at_of(&p, "P3"), Unsent::NoBuffer);
    give(&mut p, "P1", silent());
    give(&mut p, "P2", silent());
    let steps = p.poll(clock.at(1100));
    assert_eq!(steps, [Step::Send { at: at_of(&p, "P3"), wait: Duration::from_secs(1), in_turn: true, reuse: false }]);
}

/// A reply no rule can take gives its buffer back as soon as it is in;
/// one that may decide keeps it until its turn.
#[test]
fn only_a_reply_that_may_decide_holds_its_buffer_until_its_turn() {
    let yaml = "probes:\n  - name: 'NULL'\n    wait_ms: 6000\n  - name: A\n    payload: 'a'\n    rarity: 1\n  - name: B\n    payload: 'b'\n    rarity: 1\n    matches:\n      - service: beta\n        pattern: '^BETA'\n";
    let db = db(yaml);
    let clock = Clock::new();
    let mut p = plan(&db, &clock, false);
    p.poll(clock.at(0));
    p.poll(clock.at(250));
    give(&mut p, "B", reply(b"BETA\r\n"));
    assert!(p.take_spare().is_none(), "B may decide: it keeps its buffer");
    give(&mut p, "A", reply(b"whatever\r\n"));
    assert_eq!(p.take_spare().as_deref(), Some(&b"whatever\r\n"[..]), "A cannot: its buffer is free");
    give(&mut p, "NULL", silent());
    p.poll(clock.at(6000));
    let (end, phase) = p.finish();
    assert!(matches!(end, End::Hard { ref id, .. } if id.service == "beta"), "{end:?}");
    assert_eq!(phase.replies.iter().map(|r| r.probe.as_str()).collect::<Vec<_>>(), ["A", "B"]);
}

/// A probe sent ahead that could not connect goes again in turn, once; a
/// refusal in turn ends the phase.
#[test]
fn a_lost_probe_goes_again_in_turn_once_and_a_refusal_ends_the_phase() {
    let db = db(&many(2, 100, 1000));
    let clock = Clock::new();
    let mut p = plan(&db, &clock, false);
    p.poll(clock.at(0));
    give(&mut p, "NULL", silent());
    p.poll(clock.at(100));
    let p2 = at_of(&p, "P2");
    p.on_unsent(p2, Unsent::Failed { fatal: false, why: "reset".into() });
    give(&mut p, "P1", silent());
    let steps = p.poll(clock.at(1100));
    assert_eq!(steps, [Step::Send { at: p2, wait: Duration::from_secs(1), in_turn: true, reuse: false }]);
    p.on_unsent(p2, Unsent::Failed { fatal: true, why: "connection refused".into() });
    p.poll(clock.at(1101));
    assert_eq!(p.end(), Some(&End::Failed("connection refused".into())));
}

/// The deadline ends the phase with what it judged (the soft match).
#[test]
fn the_deadline_ends_the_phase_keeping_what_was_judged() {
    let yaml = "probes:\n  - name: 'NULL'\n    wait_ms: 6000\n    soft_matches:\n      - service: kv\n        pattern: '^KV'\n  - name: P\n    payload: 'p'\n    rarity: 1\n    matches:\n      - service: kv\n        pattern: '^KV \\d'\n";
    let db = db(yaml);
    let clock = Clock::new();
    let mut p: Plan<'_, Vec<u8>> = Plan::new(&db, PORT, false, false, 7, GRACE, clock.at(2000), None, false);
    let steps = p.poll(clock.at(0));
    // A quarter of the port's time is kept for judging what comes after.
    assert_eq!(steps, [Step::Send { at: 0, wait: Duration::from_millis(1500), in_turn: true, reuse: false }]);
    give(&mut p, "NULL", reply(b"KV\r\n"));
    p.poll(clock.at(10));
    assert!(p.end().is_none());
    assert_eq!(p.next_wakeup(), clock.at(2000));
    p.poll(clock.at(2000));
    let (end, phase) = p.finish();
    assert_eq!(end, End::Deadline);
    assert_eq!(phase.soft.map(|s| s.service).as_deref(), Some("kv"));
    assert_eq!(phase.banner, b"KV\r\n");
}

/// The replies of an unnamed port are kept for its fingerprint: at most
/// MAX_REPLIES of them, each cut at ProbeReply::MAX bytes.
#[test]
fn replies_are_kept_bounded_for_the_fingerprint() {
    let db = db(&many(MAX_REPLIES + 4, 100, 1000));
    let clock = Clock::new();
    let mut p = plan(&db, &clock, false);
    p.poll(clock.at(0));
    give(&mut p, "NULL", reply(&[b'x'; 3000]));
    let steps = p.poll(clock.at(100));
    for s in steps {
        if let Step::Send { at, .. } = s {
            p.on_reply(at, Reply::Data { len: 2, open: true, hard: None }, b"?\n".to_vec());
        }
    }
    p.poll(clock.at(200));
    let (end, phase) = p.finish();
    assert_eq!(end, End::Exhausted);
    assert_eq!(phase.replies.len(), MAX_REPLIES);
    assert_eq!((phase.replies[0].probe.as_str(), phase.replies[0].data.len()), ("NULL", ProbeReply::MAX));
    assert_eq!(phase.replies[1].data, b"?\n");
    assert_eq!(phase.banner.len(), BANNER_MAX);
}

/// A probe echoed back is an echo service; a connection closed at once is
/// tcpwrapped.
#[test]
fn echo_and_tcpwrapped() {
    let db = db(&many(1, 100, 1000));
    let clock = Clock::new();
    let mut p = plan(&db, &clock, false);
    p.poll(clock.at(0));
    give(&mut p, "NULL", silent());
    p.poll(clock.at(100));
    give(&mut p, "P1", reply(b"p1\r\n"));
    p.poll(clock.at(110));
    assert!(matches!(p.end(), Some(End::Hard { id, .. }) if id.service == "echo"));
    let mut p = plan(&db, &clock, false);
    p.poll(clock.at(0));
    p.on_reply(0, Reply::Wrapped, Vec::new());
    p.poll(clock.at(5));
    assert!(matches!(p.end(), Some(End::Hard { id, .. }) if id.service == "tcpwrapped"));
}
