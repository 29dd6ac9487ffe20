//! Congestion control of the raw scans and the connect scan: the one
//! owner of a scan's send rate.
//!
//! In: every probe sent (when, first try or not, of which class), every
//! answer (to which send, after how many lost tries, its round trip), and
//! the time. Out: whether a probe may go now (a paced token), the rate,
//! the estimated loss and round trip, whether a given moment's sends went
//! into a congested path (so their silence is not believed), and notes of
//! every slowdown. No I/O; the caller passes the time in, so the tests
//! drive it on a simulated path.
//!
//! # Design: a delivery-ratio estimator, in the spirit of BBR
//!
//! A scan's probes are not a TCP flow: most of them may never be answered
//! (filtered ports, hosts down), so neither a timeout nor a missing answer
//! says a probe was lost. What a stateless scanner can observe is the
//! **answer ratio**: of the first tries sent in an interval (an *epoch*, about one
//! round trip long), how many were answered. A scan's order is a keyed
//! permutation, so that ratio is stationary while the path carries
//! everything; once the scan sends faster than the path's bottleneck,
//! the bottleneck drops the excess and the ratio falls in proportion
//! (sending at twice the capacity halves it). The controller keeps the
//! recent clean epochs' mean ratio as its baseline and compares each
//! epoch with it (and each epoch's mean round trip with the least recent one):
//!
//! - **Startup**: from a modest rate (the template's), the rate doubles
//!   each epoch the ratio holds (as BBR's and TCP's slow start), so a fast
//!   path is found in a few round trips.
//! - **Back off**: an epoch whose ratio fell clearly below the baseline
//!   (by a tenth, and by more than 2.5 standard deviations of the count,
//!   so a path's random loss never looks like congestion) shows what the
//!   path delivered: the rate goes to 85 % of that delivered rate
//!   (`epoch rate x ratio / baseline`), never below `--min-rate`. Epochs
//!   sent before the cut are not judged again (one cut per round trip, as
//!   TCP's recovery), and their time spans are kept as *congested*: a
//!   probe whose last try went out then is tried again before its silence
//!   counts ([`Controller::congested_at`]).
//! - **Probe up**: after startup, clean epochs are summed into a *tally*
//!   until it holds enough answers (400 expected) to show a drop of an
//!   eighth; a tally that shows none raises the rate 4 % for each round
//!   trip it spans (10 % at most) and gives the
//!   baseline its ratio, one that does is congestion too. A limit
//!   exceeded by a tenth loses a tenth of the answers, too few to see in
//!   one epoch's handful: judged epoch by epoch, such epochs passed as
//!   clean, joined the baseline and sank it, and the rate climbed on (a
//!   policer, which queues nothing, was overrun twice over). So the rate
//!   grows only as fast as the answers can show it went too far, and a ratio
//!   measured while sending first tries faster than the path carried
//!   when it last congested never joins the baseline (unless the
//!   baseline is empty). A path whose capacity grows is found again a
//!   step a tally at a time.
//! - **The bottleneck's estimate** is the most the path delivered in the
//!   last ten round trips (two seconds at least), each sample the latest
//!   epochs holding 300 answers (thinner samples' noise raised the most
//!   well above the path's rate). Congestion while sending at half that
//!   or less means the estimate is stale (the scan's mix changed: the
//!   hosts behind a fast path are done, one behind a slow one is left),
//!   and what the path delivers now (a full sample since the last cut)
//!   replaces it.
//!
//! Why not nmap's AIMD congestion window: a window is clocked by answers,
//! and a scan of mostly filtered ports gets few, so nmap's window crawls
//! (its -p- of a host behind a WAN takes minutes). Pacing by rate keeps
//! the speed where answers are rare; the ratio still sees the bottleneck
//! wherever some probes are answered. Where none are (a wholly silent
//! network), there is nothing to observe: the rate then grows slowly
//! (a quarter per inconclusive epoch) to the template's ceiling, as
//! masscan's fixed rate would, and `--max-rate` bounds it.
//!
//! Epochs with too few answers to judge are pooled with the next until
//! they have enough. Each class of probe (port probes, discovery pings)
//! has its own baseline, since their ratios differ; the rate is shared.
//!
//! Loss is made observable by the try number each probe carries in its
//! source port ([`super::syn::Cookie`]): an answer to the third try proves the
//! first two were lost. The loss shown is the share of lost tries among
//! the answered probes' tries (random loss and congestion alike).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::discovery::gates::Gates;
use crate::discovery::rate::TokenBucket;

/// Which kind of probe: each has its own answer-ratio baseline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    Port = 0,
    Ping = 1,
}

/// The rates a controller keeps to.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Limits {
    /// Where the rate starts (probes/s).
    pub initial: f64,
    /// Never below (`--min-rate`).
    pub min: Option<f64>,
    /// Never above (`--max-rate`, or the template's ceiling).
    pub max: Option<f64>,
    /// False: a fixed pace at `max` (or none), no adaptation (`-T0`..`-T2`,
    /// where the template's rate is the point, and the link's own ARP).
    pub adaptive: bool,
}

impl Limits {
    /// A fixed pace of at most `max` probes a second (none: unpaced).
    pub fn fixed(max: Option<f64>) -> Limits {
        Limits { initial: max.unwrap_or(f64::INFINITY), min: None, max, adaptive: false }
    }
}

/// A slowdown, as the -v notes and `scan_end` tell it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Slowdown {
    /// Seconds from the controller's start.
    pub at: f64,
    pub from: f64,
    pub to: f64,
    pub why: Why,
    /// The cut stopped at `--min-rate`.
    pub floored: bool,
}

/// What showed a congested path.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Why {
    /// Fewer probes answered than before: the answer ratio of an epoch
    /// against the recent best.
    Loss { ratio: f64, baseline: f64 },
    /// Answers slower than before: a queue building at the bottleneck
    /// (an epoch's mean round trip against the recent least, seconds).
    Queue { rtt: f64, least: f64 },
    /// One host lost far more of its tries than the other hosts: a limit
    /// of its own; `from`/`to` are that host's pace ([`super::gates`]).
    Host { ip: std::net::IpAddr, loss: f64, others: f64 },
}

/// A slowdown in a line, as the -v notes and `scan_end` tell it.
pub fn describe(n: &Slowdown) -> String {
    let why = match n.why {
        Why::Loss { ratio, baseline } => format!(
            "{:.0} % of the probes answered where {:.0} % were (the path drops what is sent faster)",
            ratio * 100.0,
            baseline * 100.0
        ),
        Why::Queue { rtt, least } => {
            format!("round trips grew from {:.0} ms to {:.0} ms (a queue on the path)", least * 1e3, rtt * 1e3)
        }
        Why::Host { ip, loss, others } => {
            return format!(
                "at {:.2} s, {ip} {:.0} -> {:.0} probes/s: it lost {:.0} % of its tries where the other hosts lost {:.0} % (a limit of its own: its probes are paced apart)",
                n.at,
                n.from,
                n.to,
                loss * 100.0,
                others * 100.0
            );
        }
    };
    let floor = if n.floored { ", held at `min_rate`" } else { "" };
    format!("at {:.2} s, {:.0} -> {:.0} probes/s{floor}: {why}", n.at, n.from, n.to)
}

/// What the controller knows now.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Status {
    /// Current pace, probes per second (infinite when unpaced).
    pub rate: f64,
    /// Share of the answered probes' tries that were lost (0..1).
    pub loss: f64,
    /// Smoothed round trip over every answer, if any came.
    pub srtt: Option<Duration>,
    /// Cuts so far, and the rate before the first.
    pub slowdowns: u32,
    pub peak: f64,
}

/// Most extra tries of a probe whose tries went into a congested path
/// (their silence says nothing of the port).
pub const CONGESTED_TRIES: u32 = 3;

/// A silent probe is tried until an answering port would have lost every
/// try less often than this (at the loss seen so far).
const MISS: f64 = 1e-4;
/// The loss estimate's prior: one lost try in this many, until answers
/// say otherwise.
const PRIOR_TRIES: f64 = 200.0;

/// Fewest expected answers for an epoch to be judged alone.
const MIN_ANSWERS: f64 = 30.0;
/// Expected answers a tally of clean epochs holds before it is judged
/// (and the pace grows a step): a drop of more than an eighth shows
/// (2.5 standard deviations of 400 is 50).
const TALLY_ANSWERS: f64 = 400.0;
/// Fewest answers in one sample of the path's delivery rate (the most of
/// recent samples is the bottleneck's estimate: thin samples' noise would
/// raise it well above the path's rate).
const DELIVERY_ANSWERS: f64 = 300.0;
/// Shortest epoch; longest an inconclusive pool grows before it is
/// judged as "no evidence".
const MIN_EPOCH: Duration = Duration::from_millis(2);
const MAX_POOL: Duration = Duration::from_secs(2);
/// A ratio this far below the baseline, and this many standard deviations
/// of the count expected below it, is congestion.
const DROP: f64 = 0.9;
const SIGMAS: f64 = 2.5;
/// Congested at this share of the bottleneck's estimate or less: the
/// estimate is stale.
const STALE: f64 = 0.5;
/// After a cut, the rate is this share of what the path delivered.
const MARGIN: f64 = 0.85;
/// Growth per judged epoch: startup, probing up, without evidence.
const STARTUP_GAIN: f64 = 2.0;
const PROBE_GAIN: f64 = 1.04;
/// The most one clean tally raises the rate.
const STEP_MAX: f64 = 1.10;
const BLIND_GAIN: f64 = 1.25;
/// How long a baseline ratio or a least round trip is remembered (as
/// BBR's windowed filters: a path or a scan whose mix changes for good is
/// learnt again within it).
const MEMORY: Duration = Duration::from_secs(10);
/// The highest pace ever set (probes/s): no sender goes faster, and a
/// pace that is not reached (a window, a slow sender) does not grow.
const CEILING: f64 = 10_000_000.0;
/// Congested spans remembered.
const SPANS: usize = 4096;
/// Fewest round trips for an epoch's mean to count.
const MIN_RTTS: u64 = 10;
/// A mean round trip this much above the least recent one (a quarter
/// of it, at least 5 ms) is a queue building at the bottleneck.
const QUEUE_SHARE: f64 = 0.25;
const QUEUE_FLOOR: f64 = 0.005;

#[derive(Clone, Copy, Debug)]
struct Epoch {
    start: Instant,
    end: Instant,
    /// Pace while it lasted.
    rate: f64,
    sent: [u64; 2],
    /// Every probe sent in it, retries included.
    all_sent: u64,
    answered: [u64; 2],
    /// First-try answers that arrived while it was open (whenever sent).
    arrived: [u64; 2],
    /// Round trips of its first tries' answers: sum (s) and count.
    rtt: (f64, u64),
}

impl Epoch {
    fn new(start: Instant, rate: f64) -> Epoch {
        Epoch { start, end: start, rate, sent: [0; 2], all_sent: 0, answered: [0; 2], arrived: [0; 2], rtt: (0.0, 0) }
    }

    /// This epoch and a later one as one.
    fn merge(self, e: Epoch) -> Epoch {
        Epoch {
            start: self.start,
            end: e.end,
            rate: self.rate.max(e.rate),
            sent: [self.sent[0] + e.sent[0], self.sent[1] + e.sent[1]],
            all_sent: self.all_sent + e.all_sent,
            answered: [self.answered[0] + e.answered[0], self.answered[1] + e.answered[1]],
            arrived: [self.arrived[0] + e.arrived[0], self.arrived[1] + e.arrived[1]],
            rtt: (self.rtt.0 + e.rtt.0, self.rtt.1 + e.rtt.1),
        }
    }

    /// Mean round trip of its answers, with enough of them.
    fn mean_rtt(&self) -> Option<f64> {
        (self.rtt.1 >= MIN_RTTS).then(|| self.rtt.0 / self.rtt.1 as f64)
    }
}

/// The scan's pace: a token bucket whose rate the epochs' verdicts move.
#[derive(Debug)]
pub struct Controller {
    limits: Limits,
    rate: f64,
    /// The pace itself; none when unpaced (an infinite rate).
    bucket: Option<TokenBucket>,
    t0: Instant,
    startup: bool,
    /// Epochs still taking answers, oldest first; the last one is open.
    epochs: VecDeque<Epoch>,
    /// Judged epochs too thin to say anything, pooled per class.
    pool: [Option<Epoch>; 2],
    /// After startup, judged pools without a drop of their own, summed per
    /// class until they can show a small one ([`Controller::tally`]).
    tallies: [Option<Epoch>; 2],
    /// The step up the last clean tally earned.
    step: f64,
    /// Recent conclusive, uncongested ratios per class (when, ratio; newest last).
    baselines: [VecDeque<(Instant, f64)>; 2],
    /// Sends before this moment are not judged again (the last cut's time).
    recovered: Instant,
    /// The bottleneck's estimate at the last cut: the most the path was
    /// seen to carry when it last congested (none before the first).
    limit: Option<f64>,
    congested: VecDeque<(Instant, Instant)>,
    /// Everything before this moment has been judged.
    judged_until: Instant,
    srtt: Option<(Duration, Duration)>,
    /// Recent epochs' mean round trips (when, seconds; the least is the path's own).
    rtts: VecDeque<(Instant, f64)>,
    /// Recent epochs' delivered rates (end, probes/s); the most is the
    /// bottleneck's estimate.
    delivery: VecDeque<(Instant, f64, u64)>,
    /// The latest epochs' deliveries (end, probes through, answers,
    /// seconds), as many as the last sample summed.
    delivered: VecDeque<(Instant, f64, u64, f64)>,
    lost_tries: u64,
    answered_tries: u64,
    slowdowns: u32,
    peak: f64,
    notes: Vec<Slowdown>,
    /// Longest an answer is waited for before its epoch is judged without it.
    patience: Duration,
    /// Hosts behind a limit of their own, paced apart inside the scan's
    /// pace (TCP port probes only: UDP's ICMP limits have lanes).
    gates: Gates,
}

impl Controller {
    /// A controller keeping to `limits`; answers not come within
    /// `patience` (the probes' initial timeout) of their epoch's end are
    /// not waited for.
    pub fn new(limits: Limits, patience: Duration, now: Instant) -> Controller {
        let floor = limits.min.unwrap_or(0.0);
        let rate = limits.initial.max(floor).min(limits.max.unwrap_or(f64::INFINITY));
        Controller {
            limits,
            rate,
            bucket: rate.is_finite().then(|| TokenBucket::new(rate, now)),
            t0: now,
            startup: true,
            epochs: VecDeque::from([Epoch::new(now, rate)]),
            pool: [None, None],
            tallies: [None, None],
            step: PROBE_GAIN,
            baselines: [VecDeque::new(), VecDeque::new()],
            recovered: now,
            limit: None,
            congested: VecDeque::new(),
            judged_until: now,
            srtt: None,
            rtts: VecDeque::new(),
            delivery: VecDeque::new(),
            delivered: VecDeque::new(),
            lost_tries: 0,
            answered_tries: 0,
            slowdowns: 0,
            peak: rate,
            notes: Vec::new(),
            patience,
            gates: Gates::default(),
        }
    }

    /// The current pace, probes per second.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    pub fn status(&self) -> Status {
        let tries = self.lost_tries + self.answered_tries;
        Status {
            rate: self.rate,
            loss: if tries == 0 { 0.0 } else { self.lost_tries as f64 / tries as f64 },
            srtt: self.srtt.map(|s| s.0),
            slowdowns: self.slowdowns,
            peak: self.peak,
        }
    }

    /// Extra tries a silent probe gets: at least `base` (the template's, for
    /// a path that loses nothing), more while the loss seen makes a missed
    /// answer likelier than one in 10,000 (nmap's adaptive retransmissions,
    /// as its retry count follows the tries it saw answered), never more
    /// than `cap` (`--max-retries`).
    pub fn retries(&self, base: u32, cap: u32) -> u32 {
        retries_for(self.lost_tries, self.answered_tries, base, cap)
    }

    /// Whether a first try to `host` may go now, its gate allowing (the
    /// scan's token is taken already: given back when not); else when.
    pub fn admit(&mut self, host: u128, now: Instant) -> Result<(), Instant> {
        if !self.limits.adaptive {
            return Ok(());
        }
        self.gates.admit(host, now).inspect_err(|_| self.give_back())
    }

    /// When `host`'s gate next lets a first try go (none: it has no gate).
    pub fn gate_ready(&self, host: u128) -> Option<Instant> {
        self.gates.ready_at(host)
    }

    /// Notes a port probe's try sent to `host` (a gated scan's: TCP).
    pub fn on_send_to(&mut self, host: u128, now: Instant) {
        if self.limits.adaptive {
            self.gates.on_send(host, now);
        }
    }

    /// Notes an answer from `host` (a gated scan's) to a probe first
    /// sent at `first`, `lost` of its tries lost; `timeout` is the
    /// host's probe timeout. A note when its pace was set or cut.
    pub fn on_answer_from(&mut self, host: u128, first: Instant, lost: u32, timeout: Duration, now: Instant) {
        if !self.limits.adaptive {
            return;
        }
        if let Some(n) = self.gates.on_answer(host, first, lost, timeout, now) {
            let at = now.saturating_duration_since(self.t0).as_secs_f64();
            let why = Why::Host { ip: crate::targets::addrs::addr(n.host), loss: n.loss, others: n.others };
            self.slowdowns += 1;
            self.notes.push(Slowdown { at, from: n.from, to: n.to, why, floored: false });
        }
    }

    /// Hosts paced apart now.
    pub fn gated(&self) -> usize {
        self.gates.gated()
    }

    /// Slowdowns since the last call.
    pub fn take_notes(&mut self) -> Vec<Slowdown> {
        std::mem::take(&mut self.notes)
    }

    /// Takes a token for one probe, or says how long until one is there.
    pub fn try_take(&mut self, now: Instant) -> Result<(), Duration> {
        self.bucket.as_mut().map_or(Ok(()), |b| b.try_take(now))
    }

    /// Gives back a token taken for a probe that was not sent after all.
    pub fn give_back(&mut self) {
        if let Some(b) = &mut self.bucket {
            b.give_back();
        }
    }

    /// When a token will be there (now if one is).
    pub fn token_at(&self, now: Instant) -> Instant {
        self.bucket.as_ref().map_or(now, |b| b.ready_at(now))
    }

    /// Notes a probe sent at `now` (`first`: its first try).
    pub fn on_send(&mut self, class: Class, first: bool, now: Instant) {
        if !self.limits.adaptive {
            return;
        }
        self.roll(now);
        // The epoch it went out in: threads read their clocks before they
        // take the lock, so a send may belong to the epoch before the open one.
        let at = self.epochs.partition_point(|e| e.start <= now).max(1);
        if let Some(e) = self.epochs.get_mut(at - 1) {
            e.all_sent += 1;
            e.sent[class as usize] += u64::from(first);
        }
    }

    /// Notes an answer come at `now` to a probe whose answered try went
    /// out at `sent`: `first` if that was its first try and it was sent
    /// once, `lost` tries before it proved lost, `rtt` a clean sample.
    pub fn on_answer(&mut self, a: Answer, now: Instant) {
        let Answer { class, sent, first, lost, rtt } = a;
        self.lost_tries += u64::from(lost);
        self.answered_tries += 1;
        if let Some(r) = rtt {
            self.srtt = Some(match self.srtt {
                None => (r, r / 2),
                Some((s, v)) => (s * 7 / 8 + r / 8, v * 3 / 4 + s.abs_diff(r) / 4),
            });
        }
        if !first || !self.limits.adaptive {
            return;
        }
        self.roll(now);
        if let Some(e) = self.epochs.back_mut() {
            e.arrived[class as usize] += 1;
        }
        // The epoch it was sent in, if still taking answers.
        let at = self.epochs.partition_point(|e| e.start <= sent);
        if let Some(e) = at.checked_sub(1).and_then(|i| self.epochs.get_mut(i)) {
            e.answered[class as usize] += 1;
            if let Some(r) = rtt {
                e.rtt.0 += r.as_secs_f64();
                e.rtt.1 += 1;
            }
        }
    }

    /// How long an epoch lasts: about a round trip.
    fn epoch_len(&self) -> Duration {
        self.srtt.map_or(MIN_EPOCH * 4, |s| s.0).clamp(MIN_EPOCH, Duration::from_millis(500))
    }

    /// How long after its end an epoch is judged: a retransmission
    /// timeout's worth (round trip plus four variations), within
    /// `patience` once a round trip is known.
    fn judge_delay(&self) -> Duration {
        match self.srtt {
            None => self.patience,
            Some((s, v)) => (s + 4 * v + MIN_EPOCH).min(self.patience),
        }
    }

    /// Closes the open epoch when its time is up, opening the next.
    fn roll(&mut self, now: Instant) {
        let len = self.epoch_len();
        let rate = self.rate;
        let open = self.epochs.back_mut().expect("one epoch is always open");
        if now.saturating_duration_since(open.start) >= len {
            open.end = now;
            // What arrived while it was open is all in: the path's delivery
            // now, not a judge's delay (a few round trips) later, when a
            // startup's rate has doubled since.
            let closed = *open;
            self.measure_delivery(&closed, now.saturating_duration_since(closed.start).as_secs_f64().max(1e-3));
            self.epochs.push_back(Epoch::new(now, rate));
        }
    }

    /// Judges every epoch whose answers are in, moving the rate.
    pub fn poll(&mut self, now: Instant) {
        if !self.limits.adaptive {
            return;
        }
        self.roll(now);
        let delay = self.judge_delay();
        while self.epochs.len() > 1 && self.epochs[0].end + delay <= now {
            let e = self.epochs.pop_front().expect("more than one");
            self.judged_until = self.judged_until.max(e.end);
            self.judge(e, now);
        }
    }

    /// When the controller next has an epoch to judge.
    pub fn next_event(&self, now: Instant) -> Option<Instant> {
        if !self.limits.adaptive {
            return None;
        }
        let first = self.epochs.front()?;
        let due = if self.epochs.len() > 1 { first.end } else { first.start + self.epoch_len() };
        Some((due + self.judge_delay()).max(now))
    }

    fn judge(&mut self, e: Epoch, now: Instant) {
        let len = e.end.saturating_duration_since(e.start).as_secs_f64().max(1e-3);
        let mut verdict = Verdict::Blind;
        if let Some(mean) = e.mean_rtt() {
            let least = self.rtts.iter().map(|r| r.1).fold(f64::INFINITY, f64::min);
            if least.is_finite() && mean > least + (QUEUE_SHARE * least).max(QUEUE_FLOOR) {
                if e.start >= self.recovered {
                    verdict = Verdict::Congested(Why::Queue { rtt: mean, least });
                }
            } else {
                self.rtts.push_back((e.end, mean));
            }
        }
        while self.rtts.front().is_some_and(|r| r.0 + MEMORY < e.end) {
            self.rtts.pop_front();
        }
        for b in &mut self.baselines {
            while b.front().is_some_and(|r| r.0 + MEMORY < e.end) {
                b.pop_front();
            }
        }
        for c in [Class::Port as usize, Class::Ping as usize] {
            if e.sent[c] == 0 {
                continue;
            }
            let pooled = match self.pool[c].take() {
                None => e,
                Some(p) => p.merge(e),
            };
            let (sent, got) = (pooled.sent[c] as f64, pooled.answered[c] as f64);
            let ratio = got / sent;
            let base = self.base(c);
            let expected = base * sent;
            let thin = if base > 0.0 { expected < MIN_ANSWERS } else { got < MIN_ANSWERS };
            if thin && pooled.end.saturating_duration_since(pooled.start) < MAX_POOL {
                self.pool[c] = Some(pooled);
                continue;
            }
            // A long thin pool is judged on what there is, if it shows a drop.
            let dropped = self.shows_drop(&pooled, c);
            if dropped {
                self.mark_congested(pooled.start, pooled.end);
                // Sent before the last cut: already cut for.
                if pooled.start >= self.recovered {
                    verdict = verdict.worst(Verdict::Congested(Why::Loss { ratio, baseline: base }));
                }
            } else if !self.startup {
                verdict = verdict.worst(self.tally(pooled, c));
            } else if !thin {
                self.baselines[c].push_back((e.end, ratio));
                verdict = verdict.worst(Verdict::Clean);
            } else {
                // A long pool without a drop: clean enough to probe up.
                verdict = verdict.worst(Verdict::Clean);
            }
        }
        // Growth is per round trip, whatever an epoch's length, and only
        // while the scan sends at its pace (a window or a slow sender that
        // holds it below gains nothing from a higher one).
        let per_rtt = self.srtt.map_or(1.0, |s| (len / s.0.as_secs_f64().max(1e-4)).min(1.0));
        let paced = e.all_sent as f64 >= 0.5 * e.rate * len;
        match verdict {
            Verdict::Congested(why) => self.cut(e, why, now),
            _ if !paced => {}
            Verdict::Clean if e.start >= self.recovered => {
                // After startup a clean verdict is a tally's: one step.
                let gain = if self.startup { STARTUP_GAIN.powf(per_rtt) } else { self.step };
                self.set_rate(self.rate * gain);
            }
            Verdict::Blind if e.sent.iter().sum::<u64>() > 0 && e.start >= self.recovered && self.startup => {
                self.set_rate(self.rate * BLIND_GAIN.powf(per_rtt));
            }
            _ => {}
        }
    }

    /// After startup, adds a pool that showed no drop on its own to the
    /// tally of class `c`, and judges the tally once it holds
    /// [`TALLY_ANSWERS`] expected answers (or [`MAX_POOL`] of time): a
    /// drop there is congestion too (a limit exceeded by a tenth loses a
    /// tenth of the answers, too few to see in one epoch's handful);
    /// otherwise its ratio joins the baseline and the pace may grow one
    /// step. Until then: no verdict, so the pace holds (it grows only
    /// as fast as the answers can show it went too far), and the baseline
    /// takes no ratio measured over a limit.
    fn tally(&mut self, pooled: Epoch, c: usize) -> Verdict {
        if pooled.start < self.recovered {
            return Verdict::Blind;
        }
        let t = match self.tallies[c].take() {
            // One left when its class stopped being sent long ago: stale.
            Some(t) if t.end + MAX_POOL < pooled.start => pooled,
            None => pooled,
            Some(t) => t.merge(pooled),
        };
        let base = self.base(c);
        let (sent, got) = (t.sent[c] as f64, t.answered[c] as f64);
        let held = if base > 0.0 { base * sent } else { got };
        if held < TALLY_ANSWERS && t.end.saturating_duration_since(t.start) < MAX_POOL {
            self.tallies[c] = Some(t);
            return Verdict::Blind;
        }
        if self.shows_drop(&t, c) {
            self.mark_congested(t.start, t.end);
            return Verdict::Congested(Why::Loss { ratio: got / sent, baseline: base });
        }
        // A ratio measured while sending first tries faster than the path
        // carried when it last congested may be a limit's loss too small
        // to show: kept out of the baseline, which would sink with it (and
        // the pace rise). An empty baseline takes it all the same: without
        // one, no drop can be seen at all.
        let first_rate =
            (t.sent[0] + t.sent[1]) as f64 / t.end.saturating_duration_since(t.start).as_secs_f64().max(1e-3);
        let under = self.limit.is_none_or(|l| first_rate <= l);
        if got >= MIN_ANSWERS && (under || self.baselines[c].is_empty()) {
            self.baselines[c].push_back((t.end, got / sent));
        }
        // The step: 4 % a round trip the tally spans (a short path's
        // tally spans many), at most STEP_MAX.
        let rtts = t.end.saturating_duration_since(t.start).as_secs_f64() / self.epoch_len().as_secs_f64();
        self.step = PROBE_GAIN.powf(rtts.max(1.0)).min(STEP_MAX);
        Verdict::Clean
    }

    /// Takes what the path delivered while `e` was open into the
    /// bottleneck estimate: the answers that arrived, over the share of
    /// probes that are answered, is the rate of probes that got through.
    /// A sample is the latest epochs that together hold enough answers
    /// (a sliding sum, so the sample at a cut is the path's delivery of
    /// the last moments, not of a bucket begun a while before, when the
    /// rate was lower; a handful of answers says little of a rate).
    fn measure_delivery(&mut self, e: &Epoch, len: f64) {
        let mut through = 0.0;
        let mut arrived = 0;
        for c in 0..2 {
            let base = self.base(c);
            if base > 0.0 {
                through += e.arrived[c] as f64 / base;
                arrived += e.arrived[c];
            }
        }
        self.delivered.push_back((e.end, through, arrived, len));
        let (mut sum, mut got, mut secs) = (0.0, 0, 0.0);
        let mut keep = 0;
        for &(_, t, a, l) in self.delivered.iter().rev() {
            sum += t;
            got += a;
            secs += l;
            keep += 1;
            if got as f64 >= DELIVERY_ANSWERS || secs >= MAX_POOL.as_secs_f64() {
                break;
            }
        }
        if got as f64 >= DELIVERY_ANSWERS || (secs >= MAX_POOL.as_secs_f64() && got > 0) {
            self.delivery.push_back((e.end, sum / secs, got));
        }
        while self.delivered.len() > keep {
            self.delivered.pop_front();
        }
        // A window of ten round trips (at least two seconds), as BBR's.
        let span = self.srtt.map_or(Duration::from_secs(2), |s| (s.0 * 10).max(Duration::from_secs(2)));
        while self.delivery.front().is_some_and(|&(t, _, _)| t + span < e.end) {
            self.delivery.pop_front();
        }
    }

    /// The bottleneck's estimate: the most the path delivered lately.
    fn bottleneck(&self) -> Option<f64> {
        let b = self.delivery.iter().map(|d| d.1).fold(0.0, f64::max);
        (b > 0.0).then_some(b)
    }

    /// The path is congested: down to a margin under what it delivers.
    fn cut(&mut self, e: Epoch, why: Why, now: Instant) {
        self.mark_congested(e.start, e.end);
        let from = self.rate;
        let floor = self.limits.min.unwrap_or(0.0);
        // Congested while sending at half what the path delivered lately
        // or less: that estimate is stale (the scan's mix changed, say the
        // hosts behind a fast path are done and one behind a slow one is
        // left): what the path delivers now replaces it.
        // Only a full sample taken since the last cut says so.
        if let (Some(b), Some(&(at, now_b, got))) = (self.bottleneck(), self.delivery.back()) {
            if from < STALE * b && at > self.recovered && got as f64 >= DELIVERY_ANSWERS {
                self.delivery.clear();
                self.delivery.push_back((at, now_b, got));
            }
        }
        let to = match self.bottleneck() {
            Some(b) => MARGIN * b,
            None => from.min(CEILING) / 2.0,
        };
        self.limit = self.bottleneck();
        self.set_rate(to.min(0.9 * from).max(floor));
        self.startup = false;
        self.recovered = now;
        self.pool = [None, None];
        self.tallies = [None, None];
        self.slowdowns += 1;
        let at = now.saturating_duration_since(self.t0).as_secs_f64();
        self.notes.push(Slowdown { at, from, to: self.rate, why, floored: self.rate <= floor });
    }

    /// Whether the answers of class `c` to the first tries of `e` fell
    /// clearly below the baseline: by a tenth, and by more than
    /// [`SIGMAS`] standard deviations of the count expected (a path's random loss and
    /// a thin sample's noise are not congestion).
    fn shows_drop(&self, e: &Epoch, c: usize) -> bool {
        let (sent, got) = (e.sent[c] as f64, e.answered[c] as f64);
        let base = self.base(c);
        let expected = base * sent;
        sent > 0.0 && base > 0.0 && got / sent < DROP * base && (expected - got) > SIGMAS * expected.sqrt()
    }

    /// The answer-ratio baseline of class `c` (0 while unknown).
    /// The mean of the recent clean epochs' ratios: not their most, which
    /// a few noisy epochs would raise above what the path gives.
    fn base(&self, c: usize) -> f64 {
        let b = &self.baselines[c];
        if b.is_empty() {
            return 0.0;
        }
        b.iter().map(|b| b.1).sum::<f64>() / b.len() as f64
    }

    fn set_rate(&mut self, r: f64) {
        let floor = self.limits.min.unwrap_or(0.0);
        self.rate = r.max(floor).clamp(1.0, CEILING).min(self.limits.max.unwrap_or(f64::INFINITY));
        if let Some(b) = &mut self.bucket {
            b.set_rate(self.rate);
        }
        self.peak = self.peak.max(self.rate);
        if let Some(e) = self.epochs.back_mut() {
            e.rate = e.rate.min(self.rate);
        }
    }

    fn mark_congested(&mut self, start: Instant, end: Instant) {
        match self.congested.back_mut() {
            Some(last) if last.1 >= start => last.1 = last.1.max(end),
            _ => self.congested.push_back((start, end)),
        }
        if self.congested.len() > SPANS {
            self.congested.pop_front();
        }
    }

    /// Takes `start..end` as judged congested (the machine's tests).
    #[cfg(test)]
    pub(crate) fn congested_for_tests(&mut self, start: Instant, end: Instant) {
        self.mark_congested(start, end);
        self.judged_until = self.judged_until.max(end);
    }

    /// Whether a probe sent at `t` went into a congested path: `None`
    /// while its epoch is not judged yet (ask again later).
    pub fn congested_at(&self, t: Instant) -> Option<bool> {
        if !self.limits.adaptive {
            return Some(false);
        }
        if t >= self.judged_until {
            return None;
        }
        // Sends of epochs pooled until they hold enough answers: what the
        // pool shows so far (a scan does not wait seconds for a pool).
        for (i, p) in self.pool.iter().chain(&self.tallies).enumerate() {
            if let Some(p) = p.filter(|p| p.start <= t && t <= p.end) {
                if self.shows_drop(&p, i % 2) {
                    return Some(true);
                }
            }
        }
        let at = self.congested.partition_point(|s| s.0 <= t);
        Some(at.checked_sub(1).is_some_and(|i| self.congested[i].1 >= t))
    }
}

/// Extra tries a silent probe gets when `lost` tries were proved lost
/// among `answered` answered ones (a scan's, or one host's: a host behind
/// a limit of its own loses more than the scan shows): at least `base`,
/// enough that an answering port misses every try less often than one in
/// 10,000, at most `cap` (see [`Controller::retries`]).
pub fn retries_for(lost: u64, answered: u64, base: u32, cap: u32) -> u32 {
    let tries = (lost + answered) as f64;
    let p = (lost as f64 + 1.0) / (tries + PRIOR_TRIES);
    // The fewest tries n with p^n <= MISS, less the first.
    let needed = (MISS.ln() / p.ln()).ceil().max(1.0) as u32 - 1;
    needed.max(base).min(cap.max(base))
}

/// An answer, as [`Controller::on_answer`] takes it.
#[derive(Clone, Copy, Debug)]
pub struct Answer {
    pub class: Class,
    /// When the try it answers went out.
    pub sent: Instant,
    /// It answers the first try, sent once.
    pub first: bool,
    /// Tries before it proved lost.
    pub lost: u32,
    /// A clean round-trip sample (Karn's rule).
    pub rtt: Option<Duration>,
}

/// An epoch's verdict.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Verdict {
    /// Too few answers to say.
    Blind,
    Clean,
    Congested(Why),
}

impl Verdict {
    /// The worse of two verdicts.
    fn worst(self, other: Verdict) -> Verdict {
        match (self, other) {
            (Verdict::Congested(_), _) => self,
            (_, Verdict::Congested(_)) => other,
            (Verdict::Clean, _) | (_, Verdict::Clean) => Verdict::Clean,
            _ => Verdict::Blind,
        }
    }
}

#[cfg(test)]
#[path = "control_tests.rs"]
mod tests;
