//! Hosts behind a limit of their own, for the raw TCP scans: a pace per
//! host, beside the scan's.
//!
//! The scan's pace ([`crate::discovery::control`]) follows what the
//! whole scan's answers show. A host behind a limit of its own (a
//! firewall's SYN policer, a slow last link) is a small share of a scan
//! of many hosts: the scan's answers hardly change when that host's
//! path drops half of what it is sent, so the scan's pace never slows
//! for it, and its ports' retries are dropped as their first tries were.
//! nmap keeps a congestion window per host beside its group's for this.
//!
//! Here each host that answers is watched in half-second windows of the
//! probes first sent to it, each judged once their retries could have
//! been answered: the share of its answered probes' tries that were lost
//! (each try carries its number, so an answer to the third try proves
//! two lost) against the scan's own. A host that loses far more than the scan (a tenth of its
//! tries, and twice the scan's share) gets a *gate*: its probes go out at
//! most at a share of what its path delivered in that window (the tries
//! it was sent a second, times the share not lost); the probes its gate
//! holds back wait in the host's queue (bounded), while every other host
//! goes on at the scan's pace. A window that loses little raises the gate
//! a tenth; one that loses as much again lowers it. A path that loses
//! the same for every host (random loss, a shared bottleneck) is the
//! scan's pace's business and opens no gate. No I/O, the time passed in.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::time::{Duration, Instant};

use crate::discovery::TokenBucket;

/// A host's window: probes first sent in it are counted, and it is
/// judged once their retries could have been answered (`RETRY_WAITS`
/// timeouts after its end), with at least [`MIN_ANSWERS`] answers.
const WINDOW: Duration = Duration::from_millis(500);
const RETRY_WAITS: u32 = 4;
const MIN_ANSWERS: u32 = 20;
/// A host whose share of lost tries is above this, and above
/// [`OVER_SCAN`] times the scan's, has a limit of its own.
const LOSSY: f64 = 0.10;
const OVER_SCAN: f64 = 2.0;
/// A gate's pace: this share of what the host's path delivered.
const MARGIN: f64 = 0.85;
/// A window that lost less than half of [`LOSSY`] raises a gate this much.
const GROWTH: f64 = 1.10;
/// The slowest a gate paces (probes a second).
const FLOOR: f64 = 1.0;
/// Probes held back by gates, at most: past it no new target is taken.
pub const HELD_MAX: usize = 1 << 18;

/// One host's window: its probes first sent from `since` to `until`.
#[derive(Clone, Copy, Debug)]
struct Window {
    since: Instant,
    until: Instant,
    /// Probes sent in it, tries included.
    sent: u32,
    /// Of the probes first sent in it and answered: tries lost, answers.
    lost: u32,
    answered: u32,
}

impl Window {
    fn new(now: Instant) -> Window {
        Window { since: now, until: now + WINDOW, sent: 0, lost: 0, answered: 0 }
    }
}

#[derive(Debug)]
struct Gate {
    rate: f64,
    bucket: TokenBucket,
    /// Probes held back: port, and whether it is a resend.
    queue: VecDeque<(u16, bool)>,
    /// In `due` now.
    scheduled: bool,
}

/// A gate opened or moved, for the -v notes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GateNote {
    pub host: u128,
    /// Probes a second the host was sent, and its gate's pace now.
    pub from: f64,
    pub to: f64,
    /// Its share of lost tries in the window that moved it.
    pub loss: f64,
}

/// Every host's window and gate.
#[derive(Debug, Default)]
pub struct Gates {
    windows: HashMap<u128, Window>,
    gates: HashMap<u128, Gate>,
    /// Gates with probes held, by when their next token is there.
    due: BinaryHeap<Reverse<(Instant, u128)>>,
    held: usize,
}

impl Gates {
    /// Probes held back by gates now.
    pub fn held(&self) -> usize {
        self.held
    }

    /// Hosts with a gate.
    pub fn gated(&self) -> usize {
        self.gates.len()
    }

    /// A probe went to `host` at `now`.
    pub fn on_send(&mut self, host: u128, now: Instant) {
        if let Some(w) = self.windows.get_mut(&host) {
            if now < w.until {
                w.sent = w.sent.saturating_add(1);
            }
        }
    }

    /// `host` answered a probe first sent at `first` after `lost` tries
    /// proved lost; `scan_loss` is the scan's share of lost tries and
    /// `timeout` the host's wait for an answer. A note when the host's
    /// gate opened or moved.
    pub fn on_answer(
        &mut self,
        host: u128,
        first: Instant,
        lost: u32,
        scan_loss: f64,
        timeout: Duration,
        now: Instant,
    ) -> Option<GateNote> {
        let w = self.windows.entry(host).or_insert_with(|| Window::new(now));
        if first >= w.since && first < w.until {
            w.lost = w.lost.saturating_add(lost);
            w.answered += 1;
        }
        if now < w.until + timeout * RETRY_WAITS {
            return None;
        }
        let done = *w;
        *w = Window::new(now);
        if done.answered < MIN_ANSWERS {
            return None;
        }
        let loss = f64::from(done.lost) / f64::from(done.lost + done.answered);
        let sent_rate = f64::from(done.sent) / WINDOW.as_secs_f64();
        let lossy = loss > LOSSY.max(OVER_SCAN * scan_loss);
        let note = match self.gates.get_mut(&host) {
            None if lossy && done.sent > 0 => {
                let to = (MARGIN * sent_rate * (1.0 - loss)).max(FLOOR);
                let gate =
                    Gate { rate: to, bucket: TokenBucket::new(to, now), queue: VecDeque::new(), scheduled: false };
                self.gates.insert(host, gate);
                Some(GateNote { host, from: sent_rate, to, loss })
            }
            Some(g) if lossy => {
                // At most halved a window: what is lost is partly the
                // retries of what was lost before.
                let to = (MARGIN * sent_rate.min(g.rate) * (1.0 - loss)).max(g.rate / 2.0).max(FLOOR).min(g.rate);
                let from = g.rate;
                g.rate = to;
                g.bucket.set_rate(to);
                Some(GateNote { host, from, to, loss })
            }
            Some(g) if loss < LOSSY / 2.0 => {
                g.rate *= GROWTH;
                g.bucket.set_rate(g.rate);
                None
            }
            _ => None,
        };
        note
    }

    /// Whether a probe to `host` may go now (taking its gate's token if
    /// it has one); false: hold it ([`Gates::hold`]).
    pub fn admit(&mut self, host: u128, now: Instant) -> bool {
        match self.gates.get_mut(&host) {
            None => true,
            Some(g) => g.queue.is_empty() && g.bucket.try_take(now).is_ok(),
        }
    }

    /// Holds back the probe of `port` on `host` (a gated host's) until
    /// its gate lets it go.
    pub fn hold(&mut self, host: u128, port: u16, resend: bool, now: Instant) {
        let Some(g) = self.gates.get_mut(&host) else { return };
        g.queue.push_back((port, resend));
        self.held += 1;
        if !g.scheduled {
            g.scheduled = true;
            self.due.push(Reverse((g.bucket.ready_at(now), host)));
        }
    }

    /// The next held probe its gate lets go at `now`: host, port, resend.
    pub fn next(&mut self, now: Instant) -> Option<(u128, u16, bool)> {
        while let Some(&Reverse((at, host))) = self.due.peek() {
            if at > now {
                return None;
            }
            self.due.pop();
            let Some(g) = self.gates.get_mut(&host) else { continue };
            if g.queue.is_empty() {
                g.scheduled = false;
                continue;
            }
            if g.bucket.try_take(now).is_err() {
                let at = g.bucket.ready_at(now).max(now + Duration::from_micros(1));
                self.due.push(Reverse((at, host)));
                continue;
            }
            let (port, resend) = g.queue.pop_front().expect("not empty");
            self.held -= 1;
            if g.queue.is_empty() {
                g.scheduled = false;
            } else {
                self.due.push(Reverse((g.bucket.ready_at(now), host)));
            }
            return Some((host, port, resend));
        }
        None
    }

    /// Puts back a probe [`Gates::next`] gave that could not be sent
    /// (the scan's pace had no token): first in its queue again.
    pub fn unnext(&mut self, host: u128, port: u16, resend: bool, now: Instant) {
        let Some(g) = self.gates.get_mut(&host) else { return };
        g.bucket.give_back();
        g.queue.push_front((port, resend));
        self.held += 1;
        if !g.scheduled {
            g.scheduled = true;
            self.due.push(Reverse((now, host)));
        }
    }

    /// When a held probe is next due.
    pub fn next_due(&self) -> Option<Instant> {
        self.due.peek().map(|r| r.0 .0)
    }

    /// Every held probe, taken out (a stop): host, port, resend.
    pub fn drain(&mut self) -> Vec<(u128, u16, bool)> {
        let mut all = Vec::with_capacity(self.held);
        for (&host, g) in &mut self.gates {
            all.extend(g.queue.drain(..).map(|(p, r)| (host, p, r)));
            g.scheduled = false;
        }
        self.due.clear();
        self.held = 0;
        all
    }

    /// Keeps the windows of hosts `live` says have probes out, and of
    /// gated hosts; gates that hold nothing and whose host is not live go.
    pub fn trim(&mut self, live: impl Fn(u128) -> bool) {
        let gates = &self.gates;
        self.windows.retain(|&h, _| live(h) || gates.contains_key(&h));
        self.gates.retain(|&h, g| live(h) || !g.queue.is_empty());
        self.windows.shrink_to(2 * self.windows.len());
    }

    /// Hosts watched.
    pub fn watched(&self) -> usize {
        self.windows.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMEOUT: Duration = Duration::from_millis(100);

    /// Drives `host` for `ms` milliseconds from `t0`: a probe a
    /// millisecond; every `lose_every`-th is lost once and answered on its
    /// retry a timeout later (0: none lost). The notes it gave.
    fn drive(g: &mut Gates, host: u128, t0: Instant, ms: u64, lose_every: u64, scan_loss: f64) -> Vec<GateNote> {
        let mut notes = Vec::new();
        for i in 0..ms {
            let now = t0 + Duration::from_millis(i);
            g.on_send(host, now);
            let lost = lose_every > 0 && i % lose_every == 0;
            let (first, n) = if lost { (now.checked_sub(TIMEOUT).unwrap_or(t0), 1) } else { (now, 0) };
            notes.extend(g.on_answer(host, first, n, scan_loss, TIMEOUT, now + Duration::from_micros(500)));
        }
        notes
    }

    /// A host whose probes lose a third of their tries while the scan
    /// loses little gets a gate at a share of what it delivered; its
    /// probes then go no faster than the gate, the rest wait in order,
    /// and a host that loses nothing never waits.
    #[test]
    fn a_host_losing_far_more_than_the_scan_is_gated() {
        let t0 = Instant::now();
        let mut g = Gates::default();
        let (lossy, clean) = (1u128, 2u128);
        let notes = drive(&mut g, lossy, t0, 1500, 3, 0.02);
        assert!(drive(&mut g, clean, t0, 1500, 0, 0.02).is_empty());
        let n = *notes.first().expect("the lossy host is gated");
        assert_eq!(n.host, lossy);
        assert!((n.loss - 1.0 / 4.0).abs() < 0.1, "{n:?}");
        assert!(n.to < 0.85 * n.from && n.to > 0.4 * n.from, "{n:?}");
        assert_eq!(g.gated(), 1);
        // Now 100 probes at once: the gate lets a handful through, holds the rest.
        let now = t0 + Duration::from_secs(2);
        let mut admitted = 0;
        for port in 0..100u16 {
            if g.admit(lossy, now) {
                admitted += 1;
            } else {
                g.hold(lossy, port, false, now);
            }
            assert!(g.admit(clean, now), "the clean host never waits");
        }
        assert!(admitted <= 10, "{admitted}");
        assert_eq!(g.held(), 100 - admitted);
        // Over a tenth of a second the gate lets out at most its pace (and its burst).
        let rate = g.gates[&lossy].rate;
        let mut out = Vec::new();
        let mut t = now;
        while t < now + Duration::from_millis(100) {
            while let Some(p) = g.next(t) {
                out.push(p);
            }
            t = g.next_due().unwrap_or(t).max(t + Duration::from_micros(100));
        }
        assert!(!out.is_empty());
        assert!((out.len() as f64) <= rate / 10.0 + 10.0, "{} in 0.1 s at {rate:.0}/s", out.len());
        let ports: Vec<u16> = out.iter().map(|p| p.1).collect();
        assert!(ports.windows(2).all(|w| w[0] < w[1]), "held in order");
        // A stop takes out the rest.
        let rest = g.drain();
        assert_eq!(rest.len() + out.len() + admitted, 100);
        assert_eq!(g.held(), 0);
        assert_eq!(g.next(now + Duration::from_secs(10)), None);
    }

    /// Loss shared by every host (the scan's own share as high) opens no
    /// gate; a gated host whose windows lose little is let faster; a
    /// window's cut is at most a half.
    #[test]
    fn shared_loss_opens_no_gate_and_a_clean_window_raises_one() {
        let t0 = Instant::now();
        let mut g = Gates::default();
        assert!(drive(&mut g, 1, t0, 3000, 4, 0.2).is_empty(), "the scan loses as much: its pace's business");
        assert_eq!(g.gated(), 0);
        let t1 = t0 + Duration::from_secs(3);
        let notes = drive(&mut g, 1, t1, 3000, 2, 0.01);
        assert!(!notes.is_empty(), "gated");
        assert!(notes.windows(2).all(|w| w[1].to >= w[0].to / 2.0), "{notes:?}");
        // The window open when the loss stopped may still lower it once.
        let later = drive(&mut g, 1, t1 + Duration::from_secs(3), 3000, 0, 0.01);
        assert!(later.len() <= 1, "{later:?}");
        let low = later.last().map_or(notes.last().expect("a note").to, |n| n.to);
        assert!(g.gates[&1].rate > low * 1.05, "raised: {} from {low}", g.gates[&1].rate);
    }
}
