//! Hosts behind a limit of their own: a pace per host inside the scan's
//! (nmap's per-host congestion window inside its group's).
//!
//! In: every TCP port probe sent (to which host, when), every answer
//! (which host, when its probe was first sent, how many of its tries were
//! lost), the host's probe timeout, and the time. Out: whether a first
//! try to a host may go now, when it may, and a note each time a host's
//! pace is set or cut. No I/O; the [`super::Controller`] holds it, so
//! every sender thread of a scan shares one gate per host.
//!
//! # Why
//!
//! The scan's pace ([`super::control`]) follows what the whole scan's
//! answers show. A host behind a limit of its own (a firewall's SYN
//! policer, a slow last link) is a small share of a scan of many hosts:
//! the scan's answer ratio hardly moves when that host's path drops
//! half of what it is sent, so the scan's pace never slows enough for
//! it, and its ports' retries are dropped as their first tries were
//! (three hosts, one behind a 3,000/s policer: 24,562 of its closed
//! ports were called filtered).
//!
//! # How
//!
//! Each host that answers is watched in *windows* of the probes first
//! sent to it (a fifth of a second, longer for a host that answers rarely).
//! A window is judged once its probes' second tries could have been
//! answered (two probe timeouts after its end): the share of
//! its answered probes' tries that were lost (each try carries its
//! number, so an answer to the third try proves two lost). Its loss is
//! compared with the loss of every *other* host of the scan (a path's
//! random loss, shared by all, is the scan pace's business):
//!
//! - A host losing clearly more (five points more, and at least five
//!   lost tries) gets a **gate**: its tries go out at most at 85 % of
//!   what its path delivered in that window (the tries it was sent a
//!   second, times the share not lost). While a host's gate has no turn
//!   for its next first try, that try waits at the head of its sender's
//!   order ([`super::syn::Machine`]): a scan's order interleaves its
//!   hosts evenly, so the scan then goes at the gated host's pace times
//!   the hosts, the time that host needs anyway, and nothing is taken
//!   from the order and left unsent (a stop or a resume loses nothing).
//!   Its retries wait for the gate too (out of other hosts' way), first
//!   in line: sent at once, the retries of what was lost before the gate
//!   were a burst the limit dropped again, until they ran out of tries.
//! - A gated host's window that loses as much again is cut the same way
//!   (at most halved a window); one that loses little raises the gate a
//!   tenth, so a limit that rises is found again.
//! - A cut that did not lower the loss shows a loss that is not the
//!   rate's (a lossy last hop): the host's pace goes back to what it was
//!   before the cuts and that loss becomes the host's own floor, so a
//!   randomly lossy host is never paced down to nothing.
//!
//! Windows count tries by their first send, never by when an answer
//! came: a try's loss shows only when its retry is answered, a timeout
//! later, when the pace may have changed. Counting answers as they come
//! charged each window with losses from a faster moment before it, and
//! cut a gate to nothing.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// A window's length at first; a host that answered fewer than
/// [`MIN_ANSWERS`] in one gets windows twice as long, up to [`MAX_WINDOW`].
const WINDOW: Duration = Duration::from_millis(200);
const MAX_WINDOW: Duration = Duration::from_secs(8);
/// A window is judged this many of the host's probe timeouts after its
/// end, once its probes' second tries could have been answered.
const RETRY_WAITS: u32 = 2;
/// After a gate opens or moves, windows begun within this many probe
/// timeouts are not judged: the probes lost before still have retries
/// to go (a scan gives up to 10), and those would be the window's loss.
const CALM_WAITS: u32 = 10;
/// Fewest answers in a window for it to be judged.
const MIN_ANSWERS: u32 = 20;
/// Fewest answers the other hosts of the scan gave before their loss is
/// a yardstick (a scan of one host has none: its pace is the scan's).
const OTHERS_ANSWERS: u64 = 200;
/// A window's loss this much above its yardstick (the other hosts', or
/// the host's own floor), with at least [`MIN_LOST`] lost tries, is the
/// host's limit.
const EXCESS: f64 = 0.05;
const MIN_LOST: u32 = 5;
/// A gate's pace: this share of what the host's path delivered.
const MARGIN: f64 = 0.85;
/// A clean window raises a gate this much.
const GROWTH: f64 = 1.10;
/// A cut after which the loss stayed this high (of the loss before it)
/// did not help: the loss is not the rate's.
const NO_HELP: f64 = 0.8;
/// The slowest a gate paces, and the fastest (probes a second).
const FLOOR: f64 = 10.0;
const CEILING: f64 = 10_000_000.0;
/// First tries a gate lets go at once after a pause.
const BURST: f64 = 4.0;
/// Hosts watched before the table is trimmed to the gated and the
/// recent that answered more than once.
const HOSTS: usize = 4096;
/// A host not sent to for this long (and not gated) is forgotten at a trim.
const IDLE: Duration = Duration::from_secs(10);
/// The most hosts watched: past it, a trim keeps the gated hosts and the
/// recent ones with enough answers to judge (a sweep's hosts answer
/// once, and are never judged), then the gated alone.
pub const MAX_HOSTS: usize = 65_536;

/// One host's current window: its probes first sent in `since..until`.
#[derive(Clone, Copy, Debug)]
struct Window {
    since: Instant,
    until: Instant,
    /// Tries sent to the host in it, retries included.
    sent: u32,
    /// Of the probes first sent in it and answered: tries lost, answers.
    lost: u32,
    answered: u32,
    /// Answers that came while it was open (to any try): what the
    /// host's path delivered.
    arrived: u32,
}

impl Window {
    fn new(now: Instant, len: Duration) -> Window {
        Window { since: now, until: now + len, sent: 0, lost: 0, answered: 0, arrived: 0 }
    }

    fn len(&self) -> Duration {
        self.until.saturating_duration_since(self.since)
    }
}

/// A host's pace: a virtual clock (GCRA): the next try's turn.
#[derive(Clone, Copy, Debug)]
struct Gate {
    rate: f64,
    turn: Instant,
}

/// The cuts in a row a host's gate took, to see whether they helped.
#[derive(Clone, Copy, Debug)]
struct Cuts {
    /// The loss of the window that made the last cut.
    loss: f64,
    /// The pace before the first of them (none: there was no gate).
    before: Option<f64>,
}

#[derive(Clone, Copy, Debug)]
struct Host {
    window: Window,
    /// Every answer of the host: tries lost, answers.
    lost: u64,
    answered: u64,
    gate: Option<Gate>,
    cuts: Option<Cuts>,
    /// A loss the host shows whatever its pace (see the module's docs).
    floor: f64,
    /// Windows begun before this are not judged: the retries of what
    /// was lost before the gate last moved still go out.
    calm_at: Instant,
    last_send: Instant,
}

/// A host's pace set or cut, for the -v notes and `scan_end`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GateNote {
    pub host: u128,
    /// Tries a second the host was sent, and its gate's pace now.
    pub from: f64,
    pub to: f64,
    /// The window's share of lost tries, and the other hosts'.
    pub loss: f64,
    pub others: f64,
}

/// Every watched host and its gate.
#[derive(Debug, Default)]
pub struct Gates {
    hosts: HashMap<u128, Host>,
    /// Over every host: tries lost, answers.
    lost: u64,
    answered: u64,
    gated: usize,
    trim_at: usize,
}

impl Gates {
    /// Hosts with a gate now.
    pub fn gated(&self) -> usize {
        self.gated
    }

    /// The pace of `host`'s gate, if it has one.
    pub fn rate(&self, host: u128) -> Option<f64> {
        self.hosts.get(&host)?.gate.map(|g| g.rate)
    }

    /// A try went to `host` at `now` (once [`Gates::admit`] let it):
    /// counted in the host's window and taken from its gate's turns.
    pub fn on_send(&mut self, host: u128, now: Instant) {
        if self.hosts.is_empty() {
            return;
        }
        let Some(h) = self.hosts.get_mut(&host) else { return };
        h.last_send = now;
        if now >= h.window.since && now < h.window.until {
            h.window.sent = h.window.sent.saturating_add(1);
        }
        if let Some(g) = &mut h.gate {
            g.turn = g.turn.max(now) + Duration::from_secs_f64(1.0 / g.rate);
        }
    }

    /// When a try to `host` may go: now (`Ok`) or at the instant given.
    pub fn admit(&self, host: u128, now: Instant) -> Result<(), Instant> {
        if self.gated == 0 {
            return Ok(());
        }
        match self.hosts.get(&host).and_then(|h| h.gate) {
            None => Ok(()),
            Some(g) => {
                let slack = Duration::from_secs_f64(BURST / g.rate);
                if g.turn <= now + slack {
                    Ok(())
                } else {
                    Err(g.turn - slack)
                }
            }
        }
    }

    /// `host` answered a probe first sent at `first` after `lost` of its
    /// tries were lost; `timeout` is the host's wait for an answer. A note
    /// when the host's gate opened or was cut.
    pub fn on_answer(
        &mut self,
        host: u128,
        first: Instant,
        lost: u32,
        timeout: Duration,
        now: Instant,
    ) -> Option<GateNote> {
        self.lost += u64::from(lost);
        self.answered += 1;
        if !self.hosts.contains_key(&host) {
            self.trim(now);
        }
        let h = self.hosts.entry(host).or_insert_with(|| Host {
            window: Window::new(now, WINDOW),
            lost: 0,
            answered: 0,
            gate: None,
            cuts: None,
            floor: 0.0,
            calm_at: now,
            last_send: now,
        });
        h.lost += u64::from(lost);
        h.answered += 1;
        let w = &mut h.window;
        if first >= w.since && first < w.until {
            w.lost = w.lost.saturating_add(lost);
            w.answered += 1;
        }
        if now < w.until {
            w.arrived += 1;
        }
        if now < w.until + timeout * RETRY_WAITS {
            return None;
        }
        let done = *w;
        if done.answered < MIN_ANSWERS {
            let len = (done.len() * 2).min(MAX_WINDOW);
            *w = Window::new(now, len);
            return None;
        }
        *w = Window::new(now, WINDOW.max(done.len() / 2));
        let (others_lost, others_answered) = (self.lost - h.lost, self.answered - h.answered);
        if others_answered < OTHERS_ANSWERS {
            return None;
        }
        let others = others_lost as f64 / (others_lost + others_answered) as f64;
        if done.since < h.calm_at {
            return None;
        }
        let was_gated = h.gate.is_some();
        let rate = h.gate.map(|g| g.rate);
        let note = judge(h, &done, others, now);
        if h.gate.map(|g| g.rate) != rate {
            h.calm_at = now + timeout * CALM_WAITS;
        }
        self.gated = self.gated + usize::from(h.gate.is_some()) - usize::from(was_gated);
        note.map(|(from, to, loss)| GateNote { host, from, to, loss, others })
    }

    /// When the gate of `host` next gives a first try its turn (none: no gate).
    pub fn ready_at(&self, host: u128) -> Option<Instant> {
        let g = self.hosts.get(&host)?.gate?;
        Some(g.turn.checked_sub(Duration::from_secs_f64(BURST / g.rate)).unwrap_or(g.turn))
    }

    /// Past its bound, keeps the gated hosts and those sent to lately.
    fn trim(&mut self, now: Instant) {
        if self.hosts.len() < self.trim_at.max(HOSTS) {
            return;
        }
        let recent = |h: &Host| h.last_send + IDLE > now;
        // A host that answered once is judged only once it answers more
        // (a sweep's hosts answer once each: they go at the next trim).
        self.hosts.retain(|_, h| h.gate.is_some() || (recent(h) && h.answered > 1));
        if self.hosts.len() >= MAX_HOSTS {
            self.hosts.retain(|_, h| h.gate.is_some() || (recent(h) && h.answered >= u64::from(MIN_ANSWERS)));
        }
        if self.hosts.len() >= MAX_HOSTS {
            self.hosts.retain(|_, h| h.gate.is_some());
        }
        self.hosts.shrink_to(2 * self.hosts.len());
        self.trim_at = (2 * self.hosts.len()).clamp(HOSTS, MAX_HOSTS);
    }

    /// Hosts watched.
    pub fn watched(&self) -> usize {
        self.hosts.len()
    }
}

/// Judges host `h`'s window `w` against the other hosts' loss, moving
/// its gate: (from, to, loss) when it was set or cut.
fn judge(h: &mut Host, w: &Window, others: f64, now: Instant) -> Option<(f64, f64, f64)> {
    let loss = f64::from(w.lost) / f64::from(w.lost + w.answered);
    let yardstick = others.max(h.floor);
    let secs = w.len().as_secs_f64().max(1e-3);
    let sent_rate = f64::from(w.sent) / secs;
    let lossy = loss > yardstick + EXCESS && w.lost >= MIN_LOST;
    // What the path let through: the answers that came a second, to any
    // try (a share of the tries lost by the answered probes alone says
    // less: the probes no try of which got through are not among them).
    let delivered = f64::from(w.arrived) / secs;
    match h.gate {
        None if lossy => {
            let to = (MARGIN * delivered).clamp(FLOOR, CEILING);
            h.gate = Some(Gate { rate: to, turn: now });
            h.cuts = Some(Cuts { loss, before: None });
            Some((sent_rate, to, loss))
        }
        // A gate not used to its pace in the window says nothing of it.
        Some(g) if lossy && sent_rate >= 0.5 * g.rate => {
            if let Some(c) = h.cuts.filter(|c| loss >= NO_HELP * c.loss) {
                // The last cut did not lower the loss: not the rate's.
                h.floor = loss;
                h.cuts = None;
                match c.before {
                    None => h.gate = None,
                    Some(r) => h.gate = Some(Gate { rate: r, ..g }),
                }
                return None;
            }
            let to = (MARGIN * delivered.min(g.rate)).max(g.rate / 2.0).clamp(FLOOR, g.rate);
            h.gate = Some(Gate { rate: to, ..g });
            h.cuts = Some(Cuts { loss, before: h.cuts.map_or(Some(g.rate), |c| c.before) });
            Some((g.rate, to, loss))
        }
        Some(g) if loss <= yardstick + EXCESS / 2.0 => {
            h.gate = Some(Gate { rate: (g.rate * GROWTH).min(CEILING), ..g });
            h.cuts = None;
            None
        }
        _ => None,
    }
}

#[cfg(test)]
#[path = "gates_tests.rs"]
mod tests;
