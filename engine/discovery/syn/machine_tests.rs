//! Tests of machine.rs: the machine driven on a simulated clock (the
//! cookies it takes replies from are tested in cookie_tests.rs).

use super::*;
use crate::discovery::control::Why;
use crate::discovery::syn::cookie::tests::{bare_rst, reply, SRC};
use crate::discovery::syn::cookie::Cookie;
use crate::findings::Proto;

fn pace(retries: u32, window: usize) -> Pace {
    Pace {
        timeout: Duration::from_millis(100),
        initial_timeout: None,
        retries,
        max_retries: retries,
        window,
        max_rate: None,
        scan_delay: None,
    }
}

fn targets(n: u16) -> Vec<(IpAddr, u16)> {
    (1..=n).map(|p| ("198.18.0.2".parse().unwrap(), p)).collect()
}

/// UDP states as nmap's: an answer is open, ICMP port unreachable
/// closed, another unreachable filtered, silence open|filtered; an
/// answer after the probe was given up still makes the port open, once.
#[test]
fn udp_states_are_nmaps() {
    let ip: IpAddr = "198.18.0.2".parse().unwrap();
    let t0 = Instant::now();
    let list = vec![(ip, 53), (ip, 54), (ip, 55), (ip, 56), (ip, 57), (ip, 58)];
    let mut m = Machine::new(list.into_iter(), pace(1, 64), t0, Seen::set()).for_scan(ScanType::Udp).report_silence();
    let mut out = Vec::new();
    m.poll(t0, 16, &mut out);
    assert_eq!(out.len(), 6);
    let base = Reply { proto: Proto::Udp, flags: 0, ..bare_rst(ip, 53, 0) };
    let v = m.on_reply(&base).unwrap();
    assert_eq!((v.state, v.reason), (PortState::Open, Reason::UdpResponse));
    let v = m.on_reply(&Reply { sport: 54, icmp: Some(Reason::PortUnreach), ..base }).unwrap();
    assert_eq!((v.state, v.reason), (PortState::Closed, Reason::PortUnreach));
    let v = m.on_reply(&Reply { sport: 55, icmp: Some(Reason::AdminProhibited), ..base }).unwrap();
    assert_eq!((v.state, v.reason), (PortState::Filtered, Reason::AdminProhibited));
    // Port unreachable from a router or firewall on the way: filtered.
    let v = m.on_reply(&Reply { sport: 58, icmp: Some(Reason::PortUnreach), relayed: true, ..base }).unwrap();
    assert_eq!((v.state, v.reason), (PortState::Filtered, Reason::PortUnreach));
    assert_eq!(m.on_reply(&base), None, "a second answer is not news");
    let mut now = t0;
    while !m.is_done() {
        now += Duration::from_millis(50);
        out.clear();
        m.poll(now, 16, &mut out);
    }
    let mut silence: Vec<(u16, PortState)> = m.take_silent().iter().map(|v| (v.port, v.state)).collect();
    silence.sort();
    assert_eq!(silence, [(56, PortState::OpenFiltered), (57, PortState::OpenFiltered)]);
    // Twice each, and twice more in the lane of a host that said "closed"
    // (its silence may be its ICMP rate limit).
    assert_eq!(m.counts().sent, 4 + 2 * 2 + 2 * 2, "the silent ports were sent four times");
    // 57 answers late: open after all, reported once.
    let v = m.on_reply(&Reply { sport: 57, ..base }).unwrap();
    assert_eq!(v.state, PortState::Open);
    assert_eq!(m.on_reply(&Reply { sport: 57, ..base }), None);
    assert_eq!((m.counts().open, m.counts().closed, m.counts().filtered), (2, 1, 3));
}

/// Timed answers shorten the wait for the silent: the timeout follows
/// the round trip (smoothed, plus four times its variation), never
/// below MIN_RTT_TIMEOUT nor above the configured one; answers to
/// resent probes are not timed (Karn).
#[test]
fn the_timeout_adapts_to_measured_round_trips() {
    let ip: IpAddr = "198.18.0.2".parse().unwrap();
    let t0 = Instant::now();
    let slow = Pace { timeout: Duration::from_secs(2), ..pace(0, 64) };
    let far: IpAddr = "198.18.0.3".parse().unwrap();
    let list = (1..=20).map(|p| (ip, p)).chain(std::iter::once((far, 1)));
    let mut m = Machine::new(list, slow, t0, Seen::set()).report_silence();
    assert_eq!(m.timeout_for(ip), Duration::from_secs(2), "nothing timed yet");
    let mut out = Vec::new();
    m.poll(t0, 64, &mut out);
    // Ports 1-10 answer after 2 ms: the timeout falls to its floor.
    for port in 1..=10 {
        m.on_reply_at(&bare_rst(ip, port, 0), t0 + Duration::from_millis(2));
    }
    assert_eq!(m.timeout_for(ip), MIN_RTT_TIMEOUT);
    assert_eq!(m.timeout_for(far), Duration::from_secs(2), "another host keeps its own");
    // The far host answers its probe after 300 ms: its own estimate.
    m.on_reply_at(&bare_rst(far, 1, 0), t0 + Duration::from_millis(300));
    assert_eq!(m.timeout_for(far), Duration::from_millis(300 + 4 * 150));
    // The 10 silent ports are given up 100 ms after they were sent, not 2 s.
    m.poll(t0 + Duration::from_millis(99), 64, &mut out);
    assert!(m.take_silent().is_empty());
    m.poll(t0 + Duration::from_millis(301), 64, &mut out);
    assert_eq!(m.take_silent().len(), 10);
    assert!(m.is_done());
    // Slow answers raise it again, up to the configured timeout.
    let mut m = Machine::new((1..=3).map(|p| (ip, p)), slow, t0, Seen::set());
    m.poll(t0, 64, &mut out);
    m.on_reply_at(&bare_rst(ip, 1, 0), t0 + Duration::from_millis(300));
    assert_eq!(m.timeout_for(ip), Duration::from_millis(300 + 4 * 150));
    m.on_reply_at(&bare_rst(ip, 2, 0), t0 + Duration::from_secs(5));
    assert_eq!(m.timeout_for(ip), Duration::from_secs(2), "capped");
    // Karn: an answer to a probe sent twice is not timed.
    let mut m = Machine::new(std::iter::once((ip, 1)), Pace { retries: 1, ..slow }, t0, Seen::set());
    m.poll(t0, 64, &mut out);
    m.poll(t0 + Duration::from_secs(2), 64, &mut out);
    m.on_reply_at(&bare_rst(ip, 1, 0), t0 + Duration::from_millis(2001));
    assert_eq!(m.timeout_for(ip), Duration::from_secs(2));
}

/// A sweep answers each host once: the round-trip table keeps only hosts
/// with probes out once it passes its bound, so it never grows with the scan.
#[test]
fn round_trips_are_kept_for_live_hosts_only() {
    let t0 = Instant::now();
    let hosts = (0..20_000u32).map(|i| (IpAddr::from(std::net::Ipv4Addr::from(0xc613_0000 + i)), 80));
    let mut m = Machine::new(hosts, pace(0, 512), t0, Seen::set());
    let mut out = Vec::new();
    let mut now = t0;
    let mut most = 0;
    while !m.is_done() {
        now += Duration::from_millis(1);
        out.clear();
        m.poll(now, 512, &mut out);
        for &(ip, port) in &out {
            m.on_reply_at(&bare_rst(ip, port, 0), now + Duration::from_micros(300));
        }
        most = most.max(m.rtt.len());
    }
    assert_eq!(m.counts().closed, 20_000);
    assert!(most <= RTT_HOSTS + 1, "the table held {most} hosts");
}

/// States by scan type, as nmap gives them: from a RST, from an ICMP
/// unreachable, and from silence once the retries are spent.
#[test]
fn each_scan_type_says_what_nmap_says() {
    let ip: IpAddr = "198.18.0.2".parse().unwrap();
    let cases = [
        (ScanType::Syn, Some(PortState::Closed), Some(PortState::Closed), PortState::Filtered),
        (ScanType::Ack, Some(PortState::Unfiltered), Some(PortState::Unfiltered), PortState::Filtered),
        (ScanType::Window, Some(PortState::Closed), Some(PortState::Open), PortState::Filtered),
        (ScanType::Fin, Some(PortState::Closed), Some(PortState::Closed), PortState::OpenFiltered),
        (ScanType::Null, Some(PortState::Closed), Some(PortState::Closed), PortState::OpenFiltered),
        (ScanType::Xmas, Some(PortState::Closed), Some(PortState::Closed), PortState::OpenFiltered),
        (ScanType::Maimon, Some(PortState::Closed), Some(PortState::Closed), PortState::OpenFiltered),
    ];
    for (kind, rst0, rst_window, silent) in cases {
        let t0 = Instant::now();
        let list = vec![(ip, 1), (ip, 2), (ip, 3), (ip, 4)];
        let mut m = Machine::new(list.into_iter(), pace(1, 64), t0, Seen::set()).for_scan(kind).report_silence();
        let mut out = Vec::new();
        m.poll(t0, 16, &mut out);
        assert_eq!(out.len(), 4);
        let base = bare_rst(ip, 1, 0);
        if let Some(want) = rst0 {
            assert_eq!(m.on_reply(&base).map(|v| v.state), Some(want), "{kind:?} RST");
            let v = m.on_reply(&Reply { sport: 2, window: 512, ..base }).unwrap();
            assert_eq!((v.state, v.reason, v.ttl), (rst_window.unwrap(), Reason::Reset, Some(64)), "{kind:?}");
        }
        let v = m.on_reply(&Reply { sport: 3, flags: 0, icmp: Some(Reason::AdminProhibited), ..base }).unwrap();
        assert_eq!((v.state, v.reason), (PortState::Filtered, Reason::AdminProhibited), "{kind:?} ICMP");
        // Port 4 never answers: sent twice, then given up.
        let mut now = t0;
        while !m.is_done() {
            now += Duration::from_millis(50);
            out.clear();
            m.poll(now, 16, &mut out);
        }
        let silence: Vec<Verdict> = m.take_silent();
        assert_eq!(silence.len(), 1, "{kind:?}");
        assert_eq!((silence[0].port, silence[0].state, silence[0].reason), (4, silent, Reason::NoResponse));
        assert_eq!(silence[0].ttl, None);
    }
}

/// With a scan delay, two probes to one host are at least that far
/// apart, retransmissions included, while other hosts go on meanwhile.
#[test]
fn a_scan_delay_spaces_each_hosts_probes() {
    let (a, b): (IpAddr, IpAddr) = ("198.18.0.2".parse().unwrap(), "198.18.0.3".parse().unwrap());
    let list: Vec<(IpAddr, u16)> = (1..=4).flat_map(|p| [(a, p), (b, p)]).collect();
    let delay = Duration::from_millis(100);
    let p = Pace { scan_delay: Some(delay), timeout: Duration::from_millis(150), ..pace(1, 64) };
    let t0 = Instant::now();
    let mut m = Machine::new(list.into_iter(), p, t0, Seen::set());
    let mut sent: Vec<(Duration, IpAddr, u16)> = Vec::new();
    let mut now = t0;
    let mut out = Vec::new();
    while !m.is_done() && now - t0 < Duration::from_secs(10) {
        out.clear();
        m.poll(now, 16, &mut out);
        sent.extend(out.iter().map(|&(ip, port)| (now - t0, ip, port)));
        // Port 4 never answers (sent twice); the rest answer at once.
        for &(ip, port) in &out {
            if port != 4 {
                m.on_reply(&reply(ip, port, false));
            }
        }
        now = m.next_wakeup(now).map_or(now + Duration::from_millis(1), |t| t.max(now + Duration::from_micros(100)));
    }
    assert_eq!(sent.len(), 10, "8 probes and 2 retransmissions: {sent:?}");
    for host in [a, b] {
        let times: Vec<Duration> = sent.iter().filter(|s| s.1 == host).map(|s| s.0).collect();
        assert_eq!(times.len(), 5);
        for w in times.windows(2) {
            assert!(w[1] - w[0] >= delay, "{host}: {times:?}");
        }
    }
    // The two hosts share the time: both have their first probe at once.
    assert!(sent.iter().filter(|s| s.0 == Duration::ZERO).count() == 2, "{sent:?}");
}

/// Probes held for their host's turn count against the window: with a
/// window of 2 and a host that never answers, no more than 2 go out
/// before their time runs out, however short the delay.
#[test]
fn held_probes_count_against_the_window() {
    let ip: IpAddr = "198.18.0.2".parse().unwrap();
    let p = Pace { scan_delay: Some(Duration::from_millis(10)), timeout: Duration::from_secs(10), ..pace(0, 2) };
    let t0 = Instant::now();
    let mut m = Machine::new((1..=50).map(|port| (ip, port)), p, t0, Seen::set());
    let mut out = Vec::new();
    for ms in 0..1000 {
        m.poll(t0 + Duration::from_millis(ms), 16, &mut out);
    }
    assert_eq!(out.len(), 2, "{out:?}");
    assert_eq!(m.outstanding(), 2);
}

/// A stop sends the new probes held for their host's turn (taken from the
/// order, they would be lost to a resumed scan) and gives up the held
/// resends.
#[test]
fn a_stop_sends_the_new_probes_held_for_their_hosts_turn() {
    let ip: IpAddr = "198.18.0.2".parse().unwrap();
    let p = Pace { scan_delay: Some(Duration::from_secs(1)), timeout: Duration::from_millis(100), ..pace(0, 8) };
    let t0 = Instant::now();
    let mut m = Machine::new((1..=4).map(|port| (ip, port)), p, t0, Seen::set());
    let mut out = Vec::new();
    m.poll(t0, 16, &mut out);
    assert_eq!(out.len(), 1, "one now, three held: {out:?}");
    m.stop();
    assert!(!m.is_done(), "held probes still to go");
    m.poll(t0 + Duration::from_millis(1), 16, &mut out);
    assert_eq!(out.len(), 4, "the held ones went at the stop: {out:?}");
    let mut now = t0;
    while !m.is_done() && now < t0 + Duration::from_secs(5) {
        now += Duration::from_millis(50);
        m.poll(now, 16, &mut out);
    }
    assert!(m.is_done());
    assert_eq!((m.counts().sent, m.counts().filtered), (4, 4), "each sent once, then silent");
}

/// A stop gives up the probes waiting to be sent again, and says so
/// as it would after their last try; without `report_silence` nothing
/// is kept.
#[test]
fn a_stop_reports_the_probes_it_gives_up() {
    let ip: IpAddr = "198.18.0.2".parse().unwrap();
    for keep in [true, false] {
        let t0 = Instant::now();
        let m = Machine::new(vec![(ip, 7)].into_iter(), pace(3, 64), t0, Seen::set()).for_scan(ScanType::Fin);
        let mut m = if keep { m.report_silence() } else { m };
        let mut out = Vec::new();
        m.poll(t0, 16, &mut out);
        // Its time runs out: due again, then the scan stops.
        out.clear();
        m.poll(t0 + Duration::from_millis(150), 0, &mut out);
        m.stop();
        assert!(m.is_done());
        let silent = m.take_silent();
        if keep {
            assert_eq!(silent.len(), 1);
            assert_eq!((silent[0].port, silent[0].state), (7, PortState::OpenFiltered));
        } else {
            assert!(silent.is_empty());
        }
        assert_eq!(m.counts().filtered, 1);
    }
}

/// Runs a simulated scan: every probe sent is answered (or lost) by
/// `network`, which returns the replies to deliver and their delay.
fn simulate(
    list: Vec<(IpAddr, u16)>,
    pace: Pace,
    mut network: impl FnMut(IpAddr, u16, u32) -> Vec<(Duration, Reply)>,
) -> (Vec<Verdict>, Counts, Duration) {
    let t0 = Instant::now();
    let m = Machine::new(list.into_iter(), pace, t0, Seen::set());
    let (v, counts, took, _) = run(m, t0, None, |_, ip, port, n| network(ip, port, n));
    (v, counts, took)
}

/// How often each probe was sent.
type Sends = HashMap<(IpAddr, u16), u32>;

/// Runs machine `m` from `t0` on the simulated clock, stopping it at
/// `stop` if given: `network` answers each try (given the time it went
/// out). The verdicts, the counts, the time taken and how often each
/// probe was sent.
fn run<I: Iterator<Item = (IpAddr, u16)>>(
    mut m: Machine<I>,
    t0: Instant,
    stop: Option<Instant>,
    mut network: impl FnMut(Instant, IpAddr, u16, u32) -> Vec<(Duration, Reply)>,
) -> (Vec<Verdict>, Counts, Duration, Sends) {
    let c = Cookie::new(7, 7, 1);
    let mut now = t0;
    let mut stop = stop;
    let mut pending: Vec<(Instant, Reply)> = Vec::new();
    let mut sends: HashMap<(IpAddr, u16), u32> = HashMap::new();
    let mut verdicts = Vec::new();
    let mut out = Vec::new();
    for _ in 0..100_000 {
        // Deliver what is due.
        pending.sort_by_key(|p| p.0);
        while pending.first().is_some_and(|p| p.0 <= now) {
            let (_, r) = pending.remove(0);
            if c.accepts(&r).is_some() {
                verdicts.extend(m.on_reply(&r));
            }
        }
        if stop.is_some_and(|t| t <= now) {
            m.stop();
            stop = None;
        }
        out.clear();
        m.poll(now, 16, &mut out);
        for &(ip, port) in &out {
            let n = sends.entry((ip, port)).or_default();
            *n += 1;
            for (delay, mut r) in network(now, ip, port, *n) {
                // The answer to this try: its port says which try it was.
                let attempt = (*n - 1).min(7) as u8;
                let (seq, sport) = c.probe_try(SRC.parse().unwrap(), ip, port, 0, attempt);
                r.dport = sport;
                r.attempt = attempt;
                if r.ack != 0 {
                    r.ack = seq.wrapping_add(1);
                }
                pending.push((now + delay, r));
            }
        }
        if m.is_done() && pending.is_empty() {
            break;
        }
        let next = [m.next_wakeup(now), pending.iter().map(|p| p.0).min(), stop].into_iter().flatten().min();
        now = next.map_or(now + Duration::from_millis(1), |t| t.max(now));
    }
    (verdicts, m.counts(), now - t0, sends)
}

#[test]
fn answers_end_the_scan_without_waiting() {
    let (v, c, took) = simulate(targets(1000), pace(1, 64), |ip, port, _| {
        vec![(Duration::from_micros(50), reply(ip, port, port % 100 == 0))]
    });
    assert_eq!(v.iter().filter(|v| v.state == PortState::Open).count(), 10);
    assert_eq!(c, Counts { sent: 1000, open: 10, closed: 990, filtered: 0, late: 0 });
    assert!(took < Duration::from_millis(10), "no waiting for timeouts when all answered: {took:?}");
}

#[test]
fn lost_probes_are_retransmitted_then_given_up() {
    // Port 7 never answers; port 8 answers only its second send.
    let (v, c, took) = simulate(targets(10), pace(2, 64), |ip, port, nth| match port {
        7 => vec![],
        8 if nth < 2 => vec![],
        _ => vec![(Duration::from_micros(10), reply(ip, port, port == 8))],
    });
    assert_eq!(c.filtered, 1);
    assert_eq!(c.open, 1);
    assert_eq!(c.sent, 10 + 2 + 1, "port 7 sent three times, port 8 twice");
    assert!(v.iter().any(|v| v.port == 8 && v.state == PortState::Open));
    // Three timeouts of 100 ms for port 7.
    assert!(took >= Duration::from_millis(300) && took < Duration::from_millis(320), "{took:?}");
}

#[test]
fn duplicates_are_reported_once() {
    let (v, c, _) = simulate(targets(5), pace(1, 64), |ip, port, _| {
        let r = reply(ip, port, true);
        vec![(Duration::from_micros(10), r), (Duration::from_micros(20), r), (Duration::from_millis(500), r)]
    });
    assert_eq!(v.len(), 5);
    assert_eq!(c.open, 5);
}

#[test]
fn late_answers_still_count_once() {
    // Answers arrive after the last timeout: filtered first, then open.
    let (v, c, _) =
        simulate(targets(3), pace(0, 64), |ip, port, _| vec![(Duration::from_millis(250), reply(ip, port, true))]);
    assert_eq!(v.len(), 3);
    assert_eq!((c.open, c.filtered, c.late), (3, 0, 3));
}

#[test]
fn window_bounds_the_outstanding_probes() {
    let c = Cookie::new(0, 0, 1);
    let now = Instant::now();
    let mut m = Machine::new(targets(100).into_iter(), pace(0, 8), now, Seen::set());
    let mut out = Vec::new();
    m.poll(now, 64, &mut out);
    assert_eq!(out.len(), 8);
    assert_eq!(m.outstanding(), 8);
    let (ip, port) = out[0];
    let mut r = reply(ip, port, false);
    let (seq, sport) = c.probe(SRC.parse().unwrap(), ip, port, 0);
    r.dport = sport;
    r.ack = seq.wrapping_add(1);
    assert!(m.on_reply(&r).is_some());
    out.clear();
    m.poll(now, 64, &mut out);
    assert_eq!(out.len(), 1, "one answer frees one slot");
}

#[test]
fn rate_limit_paces_sends_on_the_simulated_clock() {
    let p = Pace { max_rate: Some(1000.0), ..pace(0, 100_000) };
    let (_, c, took) =
        simulate(targets(2000), p, |ip, port, _| vec![(Duration::from_micros(5), reply(ip, port, false))]);
    assert_eq!(c.sent, 2000);
    let secs = took.as_secs_f64();
    assert!((1.9..2.1).contains(&secs), "2000 probes at 1000/s took {secs} s");
}

#[test]
fn timers_of_answered_probes_do_not_pile_up() {
    let c = Cookie::new(0, 0, 1);
    let now = Instant::now();
    let mut m = Machine::new(targets(60_000).into_iter(), pace(0, 100_000), now, Seen::set());
    let mut out = Vec::new();
    while !m.is_done() {
        out.clear();
        m.poll(now, 64, &mut out);
        for &(ip, port) in &out {
            let (seq, sport) = c.probe(SRC.parse().unwrap(), ip, port, 0);
            let r = Reply { dport: sport, ack: seq.wrapping_add(1), ..reply(ip, port, false) };
            assert!(m.on_reply(&r).is_some());
        }
        // At most 64 probes are ever out here, so the queue must stay near the 1024 floor.
        assert!(m.timers.len() <= 1024 + 3 * 64, "{} timers", m.timers.len());
    }
    assert_eq!(m.counts().closed, 60_000);
}

#[test]
fn stop_sends_nothing_new_and_waits_for_the_rest() {
    let now = Instant::now();
    let mut m = Machine::new(targets(100).into_iter(), pace(3, 10), now, Seen::set());
    let mut out = Vec::new();
    m.poll(now, 64, &mut out);
    m.stop();
    out.clear();
    m.poll(now, 64, &mut out);
    assert!(out.is_empty());
    assert!(!m.is_done(), "ten probes still out");
    m.poll(now + Duration::from_millis(150), 64, &mut out);
    assert!(out.is_empty(), "no retransmissions once stopped");
    assert!(m.is_done());
    assert_eq!(m.counts().filtered, 10);
}

/// An open-ended machine (hosts fed as discovery finds them) waits on an
/// empty feed instead of ending, takes what is added, and ends once closed
/// with nothing out.
#[test]
fn an_open_ended_machine_waits_for_its_feed_until_closed() {
    let t0 = Instant::now();
    let ip: IpAddr = "198.18.0.2".parse().unwrap();
    let mut out = Vec::new();
    let mut m = Machine::new(Feed::default(), pace(0, 64), t0, Seen::set()).open_ended();
    m.poll(t0, 64, &mut out);
    assert!(out.is_empty() && !m.is_done(), "nothing yet is not the end");
    m.feed().0.extend([(ip, 22), (ip, 80)]);
    m.poll(t0, 64, &mut out);
    assert_eq!(out, vec![(ip, 22), (ip, 80)]);
    m.on_reply_at(&bare_rst(ip, 22, 0), t0);
    m.close();
    assert!(!m.is_done(), "port 80 is still out");
    m.on_reply_at(&bare_rst(ip, 80, 0), t0);
    m.poll(t0, 64, &mut out);
    assert!(m.is_done());
    // A forgotten probe is neither resent nor counted.
    let mut m = Machine::new(vec![(ip, 1)].into_iter(), pace(2, 64), t0, Seen::set()).report_silence();
    out.clear();
    m.poll(t0, 64, &mut out);
    m.forget(ip, 1);
    m.poll(t0 + Duration::from_secs(1), 64, &mut out);
    assert_eq!((out.len(), m.take_silent().len(), m.is_done()), (1, 0, true));
}

/// A feed the test can add to.
#[derive(Default)]
struct Feed(VecDeque<(IpAddr, u16)>);

impl Iterator for Feed {
    type Item = (IpAddr, u16);
    fn next(&mut self) -> Option<(IpAddr, u16)> {
        self.0.pop_front()
    }
}

/// With shared round trips (discovery), a host never heard from waits as
/// long as the hosts that answered took, not the full timeout.
#[test]
fn shared_round_trips_time_out_silent_hosts_early() {
    let t0 = Instant::now();
    let slow = Pace { timeout: Duration::from_secs(2), ..pace(0, 64) };
    let (live, dead): (IpAddr, IpAddr) = ("198.18.2.3".parse().unwrap(), "198.18.2.4".parse().unwrap());
    for shared in [false, true] {
        let m = Machine::new(vec![(live, 0), (dead, 0)].into_iter(), slow, t0, Seen::set()).report_silence();
        let mut m = if shared { m.share_rtt() } else { m };
        let mut out = Vec::new();
        m.poll(t0, 64, &mut out);
        m.on_reply_at(&bare_rst(live, 0, 0), t0 + Duration::from_millis(1));
        let want = if shared { MIN_RTT_TIMEOUT } else { Duration::from_secs(2) };
        assert_eq!(m.timeout_for(dead), want, "shared: {shared}");
        m.poll(t0 + MIN_RTT_TIMEOUT, 64, &mut out);
        assert_eq!(m.take_silent().len(), usize::from(shared), "shared: {shared}");
    }
}

/// Before any round trip is known a probe waits `initial_timeout`
/// (`--initial-rtt-timeout`), not the longest wait.
#[test]
fn the_first_wait_is_the_initial_timeout() {
    let t0 = Instant::now();
    let p = Pace { timeout: Duration::from_secs(2), initial_timeout: Some(Duration::from_millis(300)), ..pace(0, 64) };
    let ip: IpAddr = "198.18.0.2".parse().unwrap();
    let mut m = Machine::new(std::iter::once((ip, 1)), p, t0, Seen::set()).report_silence();
    let mut out = Vec::new();
    m.poll(t0, 8, &mut out);
    assert_eq!(m.timeout_for(ip), Duration::from_millis(300));
    m.poll(t0 + Duration::from_millis(299), 8, &mut out);
    assert!(m.take_silent().is_empty());
    m.poll(t0 + Duration::from_millis(301), 8, &mut out);
    assert_eq!(m.take_silent().len(), 1, "given up after 300 ms");
}

/// A probe whose tries went into a congested path is tried again, at
/// most CONGESTED_TRIES more times, then given up; one sent into a clean
/// path is given up after its retries.
#[test]
fn tries_sent_into_congestion_are_tried_again_a_bounded_number_of_times() {
    use crate::discovery::control::{Class, Controller, Limits};
    let t0 = Instant::now();
    let ip: IpAddr = "198.18.0.2".parse().unwrap();
    for congested in [true, false] {
        let limits = Limits { initial: 1000.0, min: None, max: None, adaptive: true };
        let mut ctl = Controller::new(limits, Duration::from_millis(100), t0);
        if congested {
            ctl.congested_for_tests(t0, t0 + Duration::from_secs(60));
        }
        let pacer = Pacer::from(ctl);
        let p = pace(1, 64);
        let mut m =
            Machine::new(std::iter::once((ip, 9)), p, t0, Seen::set()).paced_by(pacer, Class::Port).report_silence();
        let mut out = Vec::new();
        let mut now = t0;
        while !m.is_done() && now < t0 + Duration::from_secs(30) {
            m.poll(now, 8, &mut out);
            now += Duration::from_millis(20);
        }
        assert!(m.is_done(), "congested {congested}: the probe ends");
        let sends = if congested { 2 + CONGESTED_TRIES as usize } else { 2 };
        assert_eq!(out.len(), sends, "congested {congested}");
        assert_eq!(m.take_silent().len(), 1);
    }
}

/// Two machines in one thread share one pacer: together they send no
/// more than it allows.
#[test]
fn two_machines_share_one_pacer() {
    use crate::discovery::control::{Class, Limits};
    let t0 = Instant::now();
    let pacer = Pacer::new(Limits::fixed(Some(10.0)), Duration::from_secs(1), t0);
    let p = pace(0, 1000);
    let mut a = Machine::new(targets(5).into_iter(), p, t0, Seen::set()).paced_by(pacer.clone(), Class::Ping);
    let mut b = Machine::new(targets(100).into_iter(), p, t0, Seen::set()).paced_by(pacer, Class::Port);
    let mut out = Vec::new();
    let mut t = t0;
    while t < t0 + Duration::from_secs(2) {
        a.poll(t, 64, &mut out);
        b.poll(t, 64, &mut out);
        t += Duration::from_millis(10);
    }
    // 2 s at 10/s, plus the bucket's first token.
    assert!((19..=22).contains(&out.len()), "{} probes", out.len());
    assert!(b.counts().sent > 0, "the second machine got its share");
}

/// An answer without a verdict (ARP/NDP) ends its probe once, times the
/// round trip of a probe sent once, and is refused for a probe never sent,
/// answered already or given up.
#[test]
fn answers_without_a_verdict_end_their_probe_once() {
    let t0 = Instant::now();
    let (a, b, c): (IpAddr, IpAddr, IpAddr) =
        ("198.18.0.2".parse().unwrap(), "198.18.0.3".parse().unwrap(), "198.18.0.4".parse().unwrap());
    let slow = Pace { timeout: Duration::from_secs(2), ..pace(1, 64) };
    let mut m = Machine::new(vec![(a, 9), (b, 9)].into_iter(), slow, t0, Seen::set()).report_silence().share_rtt();
    let mut out = Vec::new();
    m.poll(t0, 64, &mut out);
    assert_eq!(out, vec![(a, 9), (b, 9)]);
    assert!(!m.answered_at(c, 9, t0), "never asked");
    assert!(!m.answered_at(a, 8, t0), "another probe of the host");
    assert!(m.answered_at(a, 9, t0 + Duration::from_millis(3)));
    assert!(!m.answered_at(a, 9, t0 + Duration::from_millis(4)), "a duplicate");
    assert_eq!(m.timeout_for(b), MIN_RTT_TIMEOUT, "the round trip was timed");
    // b is sent again, then given up; an answer after that is refused.
    m.poll(t0 + MIN_RTT_TIMEOUT, 64, &mut out);
    assert_eq!(out.len(), 3);
    m.poll(t0 + 2 * MIN_RTT_TIMEOUT, 64, &mut out);
    assert_eq!(m.take_silent().iter().map(|v| v.ip).collect::<Vec<_>>(), vec![b]);
    assert!(!m.answered_at(b, 9, t0 + 2 * MIN_RTT_TIMEOUT));
    assert!(m.is_done());
}

/// A quick probe (ARP/NDP) waits its own short time while no round trip
/// is known, the other probes the full timeout; once one is known, both
/// follow it.
#[test]
fn quick_probes_wait_their_own_time_until_a_round_trip_is_known() {
    let t0 = Instant::now();
    let slow = Pace { timeout: Duration::from_secs(2), ..pace(0, 64) };
    let (a, b): (IpAddr, IpAddr) = ("198.18.0.2".parse().unwrap(), "198.18.0.3".parse().unwrap());
    let quick = Duration::from_millis(100);
    let mut m = Machine::new(vec![(a, 7), (b, 7), (b, 1)].into_iter(), slow, t0, Seen::set())
        .report_silence()
        .share_rtt()
        .quick_probe(7, quick);
    assert_eq!((m.timeout_for_probe(a, 7), m.timeout_for_probe(a, 1)), (quick, slow.timeout));
    let mut out = Vec::new();
    m.poll(t0, 64, &mut out);
    m.poll(t0 + quick, 64, &mut out);
    let silent: Vec<_> = m.take_silent().into_iter().map(|v| (v.ip, v.port)).collect();
    assert_eq!(silent, vec![(a, 7), (b, 7)], "the quick probes are given up, the other waits");
    assert!(!m.is_done());
    // Never longer than the scan's own timeout.
    let m = Machine::new(std::iter::empty(), Pace { timeout: Duration::from_millis(50), ..slow }, t0, Seen::set())
        .quick_probe(7, quick);
    assert_eq!(m.timeout_for_probe(a, 7), Duration::from_millis(50));
}

/// A host that limits its ICMP errors as Linux does (a burst of six, then
/// one a second): every closed port is told closed, each silent port is
/// open|filtered, in about a second a port, never stopping the others.
#[test]
fn udp_ports_of_a_host_that_limits_its_errors_are_all_told() {
    let ip: IpAddr = "198.18.0.2".parse().unwrap();
    let t0 = Instant::now();
    let list: Vec<(IpAddr, u16)> = (1..=100u16).map(|p| (ip, p)).collect();
    let closed = |p: u16| !p.is_multiple_of(10);
    let p = Pace { timeout: Duration::from_millis(300), ..pace(2, 1000) };
    let mut m = Machine::new(list.into_iter(), p, t0, Seen::set()).for_scan(ScanType::Udp).report_silence();
    let base = Reply { proto: Proto::Udp, flags: 0, ..bare_rst(ip, 53, 0) };
    let (mut tokens, mut last) = (6.0f64, t0);
    let mut coming: VecDeque<(Instant, u16)> = VecDeque::new();
    let mut told = Vec::new();
    let mut now = t0;
    let mut out = Vec::new();
    while !m.is_done() && now < t0 + Duration::from_secs(300) {
        while coming.front().is_some_and(|c| c.0 <= now) {
            let (at, port) = coming.pop_front().unwrap();
            let r = Reply { sport: port, icmp: Some(Reason::PortUnreach), ..base };
            told.extend(m.on_reply_at(&r, at));
        }
        out.clear();
        m.poll(now, 64, &mut out);
        for &(_, port) in &out {
            tokens = (tokens + now.duration_since(last).as_secs_f64()).min(6.0);
            last = now;
            if closed(port) && tokens >= 1.0 {
                tokens -= 1.0;
                coming.push_back((now + Duration::from_millis(20), port));
            }
        }
        now += Duration::from_millis(5);
    }
    assert!(m.is_done());
    assert!(told.iter().all(|v| v.state == PortState::Closed));
    assert_eq!(told.len(), 90, "every closed port told");
    let silent = m.take_silent();
    assert_eq!(silent.len(), 10);
    assert!(silent.iter().all(|v| v.state == PortState::OpenFiltered && !closed(v.port)));
    let took = now.duration_since(t0).as_secs_f64();
    // 84 errors at one a second, and the silent ports asked twice each.
    assert!(took < 84.0 * 1.05 + 20.0 * 1.05 + 5.0, "{took:.0} s");
}

/// A host behind a limit of its own (here a policer that drops three
/// probes in ten) loses more than the scan as a whole shows: its silent
/// probes get the tries its own loss calls for, so every one of its
/// closed ports is told closed, while a clean host's silent port is not
/// asked more than the scan's loss calls for.
#[test]
fn a_lossy_host_gets_the_tries_its_own_loss_calls_for() {
    let (clean, lossy): (IpAddr, IpAddr) = ("198.18.0.2".parse().unwrap(), "198.18.0.3".parse().unwrap());
    let mut list: Vec<(IpAddr, u16)> = (1..=1000).flat_map(|p| [(clean, p), (lossy, p)]).collect();
    // Each host's silent port last, once the losses are known.
    list.extend([(clean, 5000), (lossy, 5000)]);
    let p = Pace { max_retries: 10, ..pace(1, 64) };
    let mut tries: HashMap<IpAddr, u32> = HashMap::new();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let (v, counts, _) = simulate(list, p, |ip, port, nth| {
        if port == 5000 {
            *tries.entry(ip).or_default() = nth;
            return vec![];
        }
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        if ip == lossy && seed % 10 < 3 {
            return vec![];
        }
        vec![(Duration::from_millis(1), reply(ip, port, false))]
    });
    let closed = |h: IpAddr| v.iter().filter(|v| v.ip == h && v.state == PortState::Closed).count();
    assert_eq!(closed(clean), 1000);
    assert_eq!(closed(lossy), 1000, "every closed port of the lossy host is told closed");
    assert_eq!(counts.filtered, 2, "only the two silent ports");
    // About 30 % lost (the estimate starts from a prior of one try in
    // 200 lost, so it reads a little less): seven or eight tries
    // (0.3^8 <= 1e-4); the clean host gets what the scan's loss (about
    // half of it) calls for, fewer.
    assert!((7..=9).contains(&tries[&lossy]), "{tries:?}");
    assert!(tries[&clean] < tries[&lossy], "{tries:?}");
}

/// Three hosts, one behind a policer (2,000 tries a second, a burst of
/// 50: what is sent faster is dropped, nothing queued), the scan's pace
/// 30,000/s: the policed host gets a gate of its own, its next probes
/// wait for it (the order behind them), and every port of every host is
/// told closed, none filtered for a dropped try, in about the policed
/// host's own time, without sending it everything many times. A stop
/// while its probe waits sends that probe: nothing taken from the
/// order is left unsent.
#[test]
fn a_policed_host_among_clean_ones_gets_a_gate_and_loses_nothing() {
    use crate::discovery::control::{Class, Limits};
    let hosts: Vec<IpAddr> = ["198.18.0.2", "198.18.0.3", "198.18.0.4"].iter().map(|h| h.parse().unwrap()).collect();
    let policed = hosts[1];
    let ports = 4000u16;
    let list: Vec<(IpAddr, u16)> = (1..=ports).flat_map(|p| hosts.iter().map(move |&h| (h, p))).collect();
    let p = Pace { max_retries: 10, ..pace(2, 4096) };
    let limits = Limits { initial: 30_000.0, min: None, max: Some(30_000.0), adaptive: true };
    for stop_after in [None, Some(Duration::from_millis(1500))] {
        let t0 = Instant::now();
        let pacer = Pacer::new(limits, p.timeout, t0);
        let taken = std::rc::Rc::new(std::cell::Cell::new(0usize));
        let count = taken.clone();
        let order = list.clone().into_iter().inspect(move |_| count.set(count.get() + 1));
        let m = Machine::new(order, p, t0, Seen::set()).paced_by(pacer.clone(), Class::Port);
        let (mut tokens, mut last) = (50.0f64, t0);
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let (v, counts, took, sends) = run(m, t0, stop_after.map(|d| t0 + d), |now, ip, port, _| {
            if ip == policed {
                // Refilled unevenly (2,000/s on average), as a real
                // policer's clock is not in step with the scan's timers.
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let dt = now.saturating_duration_since(last).as_secs_f64() * (seed % 2000) as f64 / 1000.0;
                tokens = (tokens + 2000.0 * dt).min(50.0);
                last = now;
                if tokens < 1.0 {
                    return vec![];
                }
                tokens -= 1.0;
            }
            vec![(Duration::from_millis(1), reply(ip, port, false))]
        });
        assert_eq!(pacer.lock().gated(), 1, "the policed host is paced apart");
        let notes = pacer.lock().take_notes();
        assert!(notes.iter().any(|n| matches!(n.why, Why::Host { ip, .. } if ip == policed)), "{notes:?}");
        let tries: u32 = sends.iter().filter(|s| s.0 .0 == policed).map(|s| s.1).sum();
        let probes = sends.keys().filter(|k| k.0 == policed).count() as u32;
        // The tries of the first moments, before the gate, are most of
        // the extra ones (this scan is short: 4,000 ports a host).
        assert!(tries < 3 * probes, "{tries} tries for {probes} probes");
        let closed = v.iter().filter(|v| v.state == PortState::Closed).count() as u64;
        match stop_after {
            None => {
                assert_eq!(counts.filtered, 0, "no dropped try's silence believed: {counts:?}");
                assert_eq!(closed, 3 * u64::from(ports));
                assert!(took.as_secs_f64() < 1.5 * f64::from(ports) / 2000.0, "{took:?}");
            }
            Some(_) => {
                // Every target taken from the order was sent, and every
                // probe sent was told: closed, or given up at the stop.
                assert_eq!(taken.get(), sends.len(), "taken from the order and not sent");
                assert_eq!(closed + counts.filtered, sends.len() as u64, "{counts:?}");
                assert!(sends.len() < list.len(), "stopped early");
            }
        }
    }
}
