use super::*;
use std::collections::VecDeque;

const RTT: Duration = Duration::from_millis(1);
const TIMEOUT: Duration = Duration::from_millis(100);
const STEP: Duration = Duration::from_micros(100);
/// Extra tries of a probe whose tries were dropped (nmap's -T4).
const RETRIES: u32 = 6;

/// A host's path in the simulator.
#[derive(Clone, Copy)]
enum Path {
    Clean,
    /// Drops tries beyond this many a second (a burst of 100), queues nothing.
    Policer(f64),
    /// Drops this share of tries at random, whatever the pace.
    Lossy(f64),
}

/// What one simulated host saw.
#[derive(Default)]
struct Seen {
    sent: u64,
    dropped: u64,
    /// Tries sent and dropped in the run's second half.
    late_sent: u64,
    late_dropped: u64,
    firsts: u64,
}

/// The simulated network: each host's path, the policers' tokens, and
/// the answers and retries due.
struct Sim<'a> {
    paths: &'a [Path],
    tokens: Vec<f64>,
    /// (due, host, first sent, tries so far), in due order (one delay each).
    answers: VecDeque<(Instant, usize, Instant, u32)>,
    retries: VecDeque<(Instant, usize, Instant, u32)>,
    rng: u64,
    seen: Vec<Seen>,
}

impl Sim<'_> {
    /// A try of host `h`'s probe first sent at `first` goes out at `now`.
    fn send(&mut self, g: &mut Gates, h: usize, first: Instant, tries: u32, now: Instant, late: bool) {
        g.on_send(h as u128 + 1, now);
        let s = &mut self.seen[h];
        s.sent += 1;
        s.late_sent += u64::from(late);
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let dropped = match self.paths[h] {
            Path::Clean => false,
            Path::Lossy(p) => (self.rng % 10_000) as f64 / 10_000.0 < p,
            Path::Policer(_) if self.tokens[h] >= 1.0 => {
                self.tokens[h] -= 1.0;
                false
            }
            Path::Policer(_) => true,
        };
        if dropped {
            s.dropped += 1;
            s.late_dropped += u64::from(late);
            if tries < RETRIES {
                // A timeout's worth later, give or take the timer's slack
                // (not in lockstep with the policer's refills).
                let slack = STEP * (self.rng % 7) as u32;
                let due = self.retries.back().map_or(now, |r| r.0).max(now + TIMEOUT + slack);
                self.retries.push_back((due, h, first, tries + 1));
            }
        } else {
            self.answers.push_back((now + RTT, h, first, tries + 1));
        }
    }
}

/// Drives `paths.len()` hosts (keys 1, 2, ...) for `secs` simulated
/// seconds: the scan offers each host `offered` first tries a second,
/// and holds a host's tries while its gate says wait, its retries first
/// (as the machine does); a dropped try is sent again a timeout later,
/// at most [`RETRIES`] times.
fn simulate(paths: &[Path], offered: f64, secs: u64) -> (Gates, Vec<Seen>, Vec<GateNote>) {
    let t0 = Instant::now();
    let mut g = Gates::default();
    let mut notes = Vec::new();
    let mut sim = Sim {
        paths,
        tokens: vec![100.0; paths.len()],
        answers: VecDeque::new(),
        retries: VecDeque::new(),
        rng: 0x2545_f491_4f6c_dd1d,
        seen: paths.iter().map(|_| Seen::default()).collect(),
    };
    let mut credit = vec![0.0; paths.len()];
    let mut waiting = VecDeque::new();
    let steps = secs * 1_000_000 / STEP.as_micros() as u64;
    for i in 0..steps {
        let now = t0 + STEP * i as u32;
        let late = i >= steps / 2;
        for (h, p) in paths.iter().enumerate() {
            if let Path::Policer(rate) = p {
                sim.tokens[h] = (sim.tokens[h] + rate * STEP.as_secs_f64()).min(100.0);
            }
        }
        while sim.answers.front().is_some_and(|a| a.0 <= now) {
            let (_, h, first, tries) = sim.answers.pop_front().expect("one is due");
            notes.extend(g.on_answer(h as u128 + 1, first, tries - 1, TIMEOUT, now));
        }
        while sim.retries.front().is_some_and(|r| r.0 <= now) {
            let r = sim.retries.pop_front().expect("one is due");
            waiting.push_back(r);
        }
        // Retries first, each when its host's gate allows (in order).
        let mut i = 0;
        while i < waiting.len() {
            let (_, h, first, tries) = waiting[i];
            if g.admit(h as u128 + 1, now).is_ok() {
                waiting.remove(i);
                sim.send(&mut g, h, first, tries, now, late);
            } else {
                i += 1;
            }
        }
        for (h, c) in credit.iter_mut().enumerate() {
            *c = (*c + offered * STEP.as_secs_f64()).min(4.0);
            let retrying = waiting.iter().any(|w| w.1 == h);
            while *c >= 1.0 && !retrying && g.admit(h as u128 + 1, now).is_ok() {
                *c -= 1.0;
                sim.seen[h].firsts += 1;
                sim.send(&mut g, h, now, 0, now, late);
            }
        }
    }
    (g, sim.seen, notes)
}

/// A host behind a 3,000/s policer among clean ones, each offered
/// 10,000 first tries a second: its gate finds the policer's pace (its
/// tries in the second half within 0.6-1.15x the limit, under a tenth of
/// them dropped) while the clean hosts are never gated.
#[test]
fn a_policed_host_among_clean_ones_is_paced_at_its_limit() {
    let (g, seen, notes) = simulate(&[Path::Clean, Path::Policer(3000.0), Path::Clean], 10_000.0, 20);
    assert!(!notes.is_empty() && notes.iter().all(|n| n.host == 2), "only the policed host is gated: {notes:#?}");
    assert_eq!(g.gated(), 1);
    let p = &seen[1];
    let rate = p.late_sent as f64 / 10.0;
    assert!(rate > 0.6 * 3000.0 && rate < 1.15 * 3000.0, "{rate:.0} tries/s against a 3,000/s policer");
    let dropped = p.late_dropped as f64 / p.late_sent as f64;
    assert!(dropped < 0.10, "{:.1} % of its tries dropped", dropped * 100.0);
    for clean in [&seen[0], &seen[2]] {
        assert!(clean.firsts as f64 > 0.95 * 10_000.0 * 20.0, "a clean host never waits: {}", clean.firsts);
    }
    // The first note says what the window lost and what the others did.
    let n = notes[0];
    assert!(n.loss > 0.3 && n.others < 0.01 && n.to < n.from, "{n:?}");
}

/// A host that loses a fifth of its tries whatever its pace (a lossy
/// last hop) is not paced down to nothing: the cut that did not help is
/// undone and that loss becomes the host's own.
#[test]
fn a_host_that_loses_whatever_its_pace_is_not_paced_down() {
    let (g, seen, _) = simulate(&[Path::Clean, Path::Lossy(0.2)], 5_000.0, 20);
    let firsts = seen[1].firsts as f64;
    assert!(firsts > 0.8 * 5_000.0 * 20.0, "{firsts} first tries of 100,000 offered");
    assert!(g.rate(2).is_none_or(|r| r > 4_000.0), "{:?}", g.rate(2));
}

/// A scan of one host has no other hosts to compare with: its pace is
/// the scan's (the controller's), and no gate opens however much it loses.
#[test]
fn a_lone_host_is_never_gated() {
    let (g, seen, notes) = simulate(&[Path::Policer(2000.0)], 10_000.0, 5);
    assert!(notes.is_empty(), "{:?}", notes.first());
    assert_eq!(g.gated(), 0);
    assert!(seen[0].firsts as f64 > 0.95 * 50_000.0);
}

/// A gate's tries keep to its pace: at most its rate times the time
/// plus its burst; a try sent without asking (a stop's) takes its turns.
#[test]
fn a_gate_lets_first_tries_go_at_its_pace_and_retries_take_turns() {
    let t0 = Instant::now();
    let mut g = Gates::default();
    let host = 7u128;
    // Another host's answers make the yardstick; then a window of which
    // half the tries were lost opens a gate on host 7.
    for i in 0..300u32 {
        g.on_answer(9, t0, 0, TIMEOUT, t0 + Duration::from_micros(u64::from(i)));
    }
    for i in 0..1000u32 {
        let at = t0 + Duration::from_micros(400 * u64::from(i));
        g.on_send(host, at);
        g.on_answer(host, at, u32::from(i % 2 == 0), TIMEOUT, at);
    }
    let judge = t0 + Duration::from_secs(1);
    let n = g.on_answer(host, judge, 0, TIMEOUT, judge).expect("a gate opens");
    assert!(n.loss > 0.3 && n.to < n.from, "{n:?}");
    let rate = g.rate(host).expect("gated");
    let mut sent = 0u32;
    let mut t = judge;
    let end = judge + Duration::from_millis(200);
    while t < end {
        if g.admit(host, t).is_ok() {
            g.on_send(host, t);
            sent += 1;
        } else {
            let at = g.ready_at(host).expect("gated");
            assert!(at > t);
            t = at;
            continue;
        }
    }
    assert!(f64::from(sent) <= rate * 0.2 + BURST + 1.0, "{sent} in 0.2 s at {rate:.0}/s");
    assert!(f64::from(sent) >= rate * 0.2 - 1.0, "{sent} in 0.2 s at {rate:.0}/s");
    // Ten tries sent without asking: the next try waits ten turns.
    for _ in 0..10 {
        g.on_send(host, end);
    }
    let wait = g.ready_at(host).expect("gated").saturating_duration_since(end).as_secs_f64();
    assert!(wait >= 9.0 / rate, "{wait} s");
    // Other hosts never wait.
    assert!(g.admit(9, end).is_ok() && g.admit(1234, end).is_ok());
}

/// The watched hosts stay bounded: a sweep's hosts, each answering once,
/// never hold more than [`MAX_HOSTS`] entries, and a gated host is kept
/// through every trim.
#[test]
fn the_hosts_watched_stay_bounded_and_gates_outlive_a_trim() {
    let t0 = Instant::now();
    let mut g = Gates::default();
    // Host 7 gated, as in the test above.
    for i in 0..300u32 {
        g.on_answer(9, t0, 0, TIMEOUT, t0 + Duration::from_micros(u64::from(i)));
    }
    for i in 0..1000u32 {
        let at = t0 + Duration::from_micros(400 * u64::from(i));
        g.on_send(7, at);
        g.on_answer(7, at, u32::from(i % 2 == 0), TIMEOUT, at);
    }
    let judge = t0 + Duration::from_secs(1);
    assert!(g.on_answer(7, judge, 0, TIMEOUT, judge).is_some());
    // Then 3 x MAX_HOSTS hosts answer once each, within a second.
    let n = 3 * MAX_HOSTS as u128;
    for h in 0..n {
        let at = judge + Duration::from_nanos((h * 5) as u64);
        g.on_send(1000 + h, at);
        g.on_answer(1000 + h, at, 0, TIMEOUT, at);
        assert!(g.watched() <= MAX_HOSTS, "{} hosts watched after {h}", g.watched());
    }
    assert!(g.rate(7).is_some(), "the gate outlived the trims");
    assert_eq!(g.gated(), 1);
}
