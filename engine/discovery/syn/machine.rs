//! The raw scans' state machine: which probe to send when, and what a reply
//! means. No I/O inside; the caller passes the time in, which lets the tests
//! drive it on a simulated clock.
//!
//! Validation is stateless ([`super::cookie`]): the machine takes only
//! replies the keyed cookie accepted. It keeps state only for probes still unanswered (at most `window` of
//! them) and for open ports already reported (so a duplicate or late reply is
//! reported once): nothing grows with the size of the scan.

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::IpAddr;
use std::time::{Duration, Instant};

use super::lanes::Lanes;
use super::reply::Reply;
use crate::discovery::control::{retries_for, Answer, Class, Limits, CONGESTED_TRIES};
use crate::discovery::pacer::Pacer;
use crate::findings::{PortState, Reason, ScanType};
use crate::targets::addrs::{addr, key};
use crate::targets::TargetSpace;

/// What a reply said about a port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub ip: IpAddr,
    pub port: u16,
    pub state: PortState,
    pub reason: Reason,
    /// Of the reply; none for a probe that drew none.
    pub ttl: Option<u8>,
    /// The round trip of the probe answered, when it was sent once (Karn).
    pub rtt: Option<Duration>,
}

/// Totals so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Probes sent, retransmissions included.
    pub sent: u64,
    pub open: u64,
    pub closed: u64,
    pub filtered: u64,
    /// Replies that came after their probe was given up (counted open anyway).
    pub late: u64,
}

/// How patient the machine is.
#[derive(Clone, Copy, Debug)]
pub struct Pace {
    /// The longest a probe waits for its answer (`--max-rtt-timeout`).
    pub timeout: Duration,
    /// The wait before any round trip is known (`--initial-rtt-timeout`;
    /// none: `timeout`).
    pub initial_timeout: Option<Duration>,
    /// Extra sends of a probe that got no answer, on a path that loses
    /// nothing; more as the pacer sees loss, up to `max_retries`.
    pub retries: u32,
    pub max_retries: u32,
    /// Most probes unanswered at once.
    pub window: usize,
    pub max_rate: Option<f64>,
    /// Least time between two probes to one host (`--scan-delay`).
    pub scan_delay: Option<Duration>,
}

impl Pace {
    /// Unlimited: no rate, no delay, a second's wait, no retry, a window of 1024.
    pub fn quiet() -> Pace {
        Pace {
            timeout: Duration::from_secs(1),
            initial_timeout: None,
            retries: 0,
            max_retries: 0,
            window: 1024,
            max_rate: None,
            scan_delay: None,
        }
    }
}

type Key = (u128, u16);

/// The shortest a probe waits for its answer however fast the answers
/// come (nmap's default `--min-rtt-timeout`).
pub const MIN_RTT_TIMEOUT: Duration = Duration::from_millis(100);

/// Hosts whose round trips are kept at least before the table is trimmed
/// to those with probes out.
const RTT_HOSTS: usize = 4096;

/// Hosts seen losing probes whose loss counts are kept while they have
/// no probe out (past this, only hosts with probes out are kept).
const LOSSY_HOSTS: usize = 65_536;

/// Open ports already reported, so a duplicate or late SYN-ACK is reported
/// once. A bitmap over the scan's index space (one bit a target, pages only
/// resident where touched) when the space allows, else a set.
pub enum Seen {
    Bits { space: TargetSpace, bits: Vec<u64> },
    Set(HashSet<Key>),
}

impl Seen {
    /// Spaces up to 2^33 targets (1 GiB of bits, mostly never touched) get a bitmap.
    pub fn for_space(space: &TargetSpace) -> Seen {
        if space.len() <= 1 << 33 {
            Seen::Bits { space: space.clone(), bits: vec![0; space.len().div_ceil(64) as usize] }
        } else {
            Seen::Set(HashSet::new())
        }
    }

    pub fn set() -> Seen {
        Seen::Set(HashSet::new())
    }

    /// Records a pair; true if it was not recorded before.
    fn insert(&mut self, ip: IpAddr, port: u16) -> bool {
        match self {
            Seen::Bits { space, bits } => match space.index_of(ip, port) {
                Some(i) => {
                    let (w, b) = ((i / 64) as usize, 1u64 << (i % 64));
                    let fresh = bits[w] & b == 0;
                    bits[w] |= b;
                    fresh
                }
                None => false, // not a target of this scan
            },
            Seen::Set(s) => s.insert((key(ip), port)),
        }
    }
}

/// The SYN scan of one sequence of `(address, port)` pairs.
pub struct Machine<I> {
    targets: I,
    exhausted: bool,
    stopping: bool,
    pace: Pace,
    /// The rate's owner (shared with the other machine of a thread), and
    /// which of its classes this machine's probes are.
    pacer: Pacer,
    class: Class,
    /// Probes on their last try, timed out, whose send's epoch the pacer
    /// has not judged yet: (sent at, probe, which send), in send order.
    awaiting: VecDeque<(Instant, Key, u32)>,
    /// UDP: ports of hosts that limit their ICMP errors, asked again at
    /// the host's pace.
    lanes: Lanes,
    lanes_trim_at: usize,
    /// Unanswered probes: how often each was sent, when last, and when
    /// first (a host's gate counts its tries by their first send).
    inflight: HashMap<Key, (u32, Instant, Instant)>,
    /// (sent at, probe, which send) in sending order, which is also
    /// deadline order: every probe's deadline is its send time plus the
    /// timeout of the moment ([`Machine::timeout`]).
    timers: VecDeque<(Instant, Key, u32)>,
    /// Per host that has answered: smoothed round-trip time and its
    /// variation (RFC 6298), from answers to probes sent once. Trimmed to
    /// the hosts with probes out when it grows past `rtt_trim_at` (a sweep
    /// answers each host once: its entries go at the next trim).
    rtt: HashMap<u128, (Duration, Duration)>,
    rtt_trim_at: usize,
    /// Per host that has answered: tries proved lost, tries answered.
    /// A host behind a limit of its own (a policer, a slow link) loses
    /// more than the scan as a whole shows: its silent probes get the
    /// tries its own loss calls for. Trimmed with `rtt`.
    losses: HashMap<u128, (u32, u32)>,
    /// The same over every host, for hosts not timed yet when asked
    /// ([`Machine::share_rtt`]: host discovery, where most hosts never answer).
    all_rtt: Option<(Duration, Duration)>,
    share_rtt: bool,
    /// Probes of this "port" wait at most this long while no round trip is
    /// known ([`Machine::quick_probe`]).
    quick: Option<(u16, Duration)>,
    /// The targets come in while the machine runs (hosts as discovery finds
    /// them): a `None` from them means "nothing yet" until [`Machine::close`].
    open_ended: bool,
    /// The time of the last poll: when a reply without a time of its own came.
    clock: Instant,
    /// Probes whose time ran out and that are due another send.
    resend: VecDeque<Key>,
    reported_open: Seen,
    counts: Counts,
    kind: ScanType,
    /// Probes given up, and what their silence says, until the caller takes
    /// them: kept only for a caller that asked ([`Machine::report_silence`])
    /// and drains them, so nothing grows with the scan otherwise.
    silent: Vec<Verdict>,
    keep_silent: bool,
    /// With a scan delay: when each host may next be probed, and the probes
    /// (and whether each is a resend) waiting for their host's turn. Both
    /// stay within the window.
    host_ready: HashMap<u128, Instant>,
    held: VecDeque<(Instant, Key, bool)>,
    /// The next target, taken from the order while its host's gate had
    /// no turn for it: the order waits behind it (see [`crate::discovery::gates`]).
    slot: Option<(IpAddr, u16)>,
    /// Retries whose host's gate had no turn for them, in order.
    gated: VecDeque<Key>,
}

impl<I: Iterator<Item = (IpAddr, u16)>> Machine<I> {
    pub fn new(targets: I, pace: Pace, now: Instant, seen: Seen) -> Machine<I> {
        Machine {
            targets,
            exhausted: false,
            stopping: false,
            pace,
            pacer: Pacer::new(Limits::fixed(pace.max_rate), pace.timeout, now),
            class: Class::Port,
            awaiting: VecDeque::new(),
            lanes: Lanes::default(),
            lanes_trim_at: RTT_HOSTS,
            inflight: HashMap::new(),
            timers: VecDeque::new(),
            resend: VecDeque::new(),
            reported_open: seen,
            counts: Counts::default(),
            kind: ScanType::Syn,
            silent: Vec::new(),
            keep_silent: false,
            host_ready: HashMap::new(),
            held: VecDeque::new(),
            slot: None,
            gated: VecDeque::new(),
            rtt: HashMap::new(),
            rtt_trim_at: RTT_HOSTS,
            losses: HashMap::new(),
            all_rtt: None,
            share_rtt: false,
            quick: None,
            open_ended: false,
            clock: now,
        }
    }

    /// How long a probe to `ip` waits for its answer now: `pace.timeout`
    /// until an answer from that host has been timed, then the host's
    /// smoothed round trip plus four times its variation (as TCP's RTO, RFC
    /// 6298), at least [`MIN_RTT_TIMEOUT`] and never above `pace.timeout`
    /// (`--max-rtt-timeout`). Per host: a near host's quick answers never
    /// shorten the wait for a far one.
    pub fn timeout_for(&self, ip: IpAddr) -> Duration {
        self.timeout_of((key(ip), 0))
    }

    /// The same for the probe `port` of `ip` (see [`Machine::quick_probe`]).
    pub fn timeout_for_probe(&self, ip: IpAddr, port: u16) -> Duration {
        self.timeout_of((key(ip), port))
    }

    fn timeout_of(&self, k: Key) -> Duration {
        let own = self.rtt.get(&k.0).or(if self.share_rtt { self.all_rtt.as_ref() } else { None });
        match own {
            None => match self.quick {
                Some((port, wait)) if port == k.1 => wait.min(self.pace.timeout),
                _ => self.pace.initial_timeout.unwrap_or(self.pace.timeout).min(self.pace.timeout),
            },
            Some(&(srtt, var)) => (srtt + 4 * var).clamp(MIN_RTT_TIMEOUT.min(self.pace.timeout), self.pace.timeout),
        }
    }

    /// Takes one round-trip sample of `host`.
    fn sample(&mut self, host: u128, r: Duration) {
        let smooth = |old: Option<&(Duration, Duration)>| match old {
            None => (r, r / 2),
            Some(&(srtt, var)) => (srtt * 7 / 8 + r / 8, var * 3 / 4 + srtt.abs_diff(r) / 4),
        };
        let next = smooth(self.rtt.get(&host));
        self.rtt.insert(host, next);
        self.all_rtt = Some(smooth(self.all_rtt.as_ref()));
        self.trim_hosts();
    }

    /// Keeps the per-host tables to the hosts with probes out once they
    /// pass their bound.
    fn trim_hosts(&mut self) {
        if self.rtt.len().max(self.losses.len()) > self.rtt_trim_at {
            let live: HashSet<u128> = self.inflight.keys().map(|k| k.0).collect();
            self.rtt.retain(|h, _| live.contains(h));
            self.rtt.shrink_to(2 * self.rtt.len());
            // A host seen losing is remembered past its probes (up to a
            // bound): its next probes in a permuted scan come later.
            self.losses.retain(|h, l| live.contains(h) || l.0 > 0);
            if self.losses.len() > LOSSY_HOSTS {
                self.losses.retain(|h, _| live.contains(h));
            }
            self.losses.shrink_to(2 * self.losses.len());
            // Amortised: the next trim waits for as many new hosts as are kept.
            self.rtt_trim_at = RTT_HOSTS.max(2 * self.rtt.len().max(self.losses.len()));
        }
    }

    /// Keeps a verdict for every probe given up, for [`Machine::take_silent`].
    pub fn report_silence(self) -> Machine<I> {
        Machine { keep_silent: true, ..self }
    }

    /// Hosts not timed yet wait as long as the hosts timed so far (their
    /// smoothed round trip over all of them) rather than `pace.timeout`:
    /// nmap's way with discovery probes, where most hosts of a sweep may
    /// never answer and the ones that do tell how far the network is.
    pub fn share_rtt(self) -> Machine<I> {
        Machine { share_rtt: true, ..self }
    }

    /// Probes of `port` whose host's round trip is not known yet (nor, with
    /// shared round trips, any host's) wait `wait` rather than
    /// `pace.timeout` (at most that): nmap's ARP/NDP requests, which a
    /// host on the link answers within milliseconds, wait 100 ms at first.
    /// A probe waiting behind one with a longer timeout still times out
    /// late, never early.
    pub fn quick_probe(self, port: u16, wait: Duration) -> Machine<I> {
        Machine { quick: Some((port, wait)), ..self }
    }

    /// Targets that come in while the machine runs: until [`Machine::close`],
    /// an empty iterator means "nothing yet", not the end.
    pub fn open_ended(self) -> Machine<I> {
        Machine { open_ended: true, ..self }
    }

    /// The targets, to add to an open-ended machine's (which then looks
    /// at them again).
    pub fn feed(&mut self) -> &mut I {
        if self.open_ended && !self.stopping {
            self.exhausted = false;
        }
        &mut self.targets
    }

    /// The targets, as they are (an open-ended machine's "nothing yet"
    /// stands).
    pub fn source(&mut self) -> &mut I {
        &mut self.targets
    }

    /// No more targets will come in.
    pub fn close(&mut self) {
        self.open_ended = false;
    }

    /// Forgets the probe of `port` on `ip` if it is outstanding (its answer
    /// no longer matters): never sent again, never counted.
    pub fn forget(&mut self, ip: IpAddr, port: u16) {
        self.inflight.remove(&(key(ip), port));
    }

    /// Paced by `pacer` (the scan's, shared with every sender's machines) rather
    /// than a fixed pace of its own, its probes of class `class`.
    pub fn paced_by(self, pacer: Pacer, class: Class) -> Machine<I> {
        Machine { pacer, class, ..self }
    }

    /// Which try of the probe of `port` on `ip` goes out now (0 the first).
    pub fn attempt(&self, ip: IpAddr, port: u16) -> u8 {
        self.inflight.get(&(key(ip), port)).map_or(0, |e| e.0.saturating_sub(1).min(255) as u8)
    }

    /// Whether its probes' hosts get gates of their own: TCP port scans
    /// without a scan delay (UDP's ICMP limits have lanes; a scan delay
    /// is the user's own per-host pace).
    fn gating(&self) -> bool {
        self.class == Class::Port && self.kind != ScanType::Udp && self.pace.scan_delay.is_none()
    }

    /// The machine of another raw scan type (the default is SYN).
    pub fn for_scan(self, kind: ScanType) -> Machine<I> {
        Machine { kind, ..self }
    }

    /// Probes given up since the last call, with what their silence says
    /// (`filtered`; `open|filtered` for -sF/-sN/-sX/-sM).
    pub fn take_silent(&mut self) -> Vec<Verdict> {
        std::mem::take(&mut self.silent)
    }

    pub fn counts(&self) -> Counts {
        self.counts
    }

    /// Probes sent and not yet answered or given up.
    pub fn outstanding(&self) -> usize {
        self.inflight.len()
    }

    /// No new probes and no more retransmissions; the ones out still count
    /// until their time runs out.
    pub fn stop(&mut self) {
        self.stopping = true;
        while let Some((_, k, nth)) = self.awaiting.pop_front() {
            if self.inflight.get(&k).map(|e| e.0) == Some(nth) {
                self.inflight.remove(&k);
                self.give_up(k);
            }
        }
        for (host, port) in self.lanes.drain() {
            if self.inflight.remove(&(host, port)).is_some() {
                self.give_up((host, port));
            }
        }
        while let Some(k) = self.resend.pop_front().or_else(|| self.gated.pop_front()) {
            if self.inflight.remove(&k).is_some() {
                self.give_up(k);
            }
        }
        // Held for their host's turn: resends are given up as above; new
        // ones were taken from the order (which will not give them again,
        // to a resumed scan either) and go out now, their host's turn or not.
        let held = std::mem::take(&mut self.held);
        for (at, k, resend) in held {
            if !resend {
                self.held.push_back((at, k, resend));
            } else if self.inflight.remove(&k).is_some() {
                self.give_up(k);
            }
        }
    }

    /// Counts a probe that drew no answer and keeps what its silence says.
    fn give_up(&mut self, k: Key) {
        self.counts.filtered += 1;
        if !self.keep_silent {
            return;
        }
        let state = match self.kind {
            ScanType::Syn | ScanType::Connect | ScanType::Ack | ScanType::Window => PortState::Filtered,
            ScanType::Fin | ScanType::Null | ScanType::Xmas | ScanType::Maimon | ScanType::Udp => {
                PortState::OpenFiltered
            }
        };
        self.silent.push(Verdict { ip: addr(k.0), port: k.1, state, reason: Reason::NoResponse, ttl: None, rtt: None });
    }

    /// True once every probe is answered or given up (or the scan was stopped
    /// and the last outstanding probe has timed out).
    pub fn is_done(&self) -> bool {
        (self.stopping || (self.exhausted && !self.open_ended))
            && self.inflight.is_empty()
            && self.held.is_empty()
            && self.slot.is_none()
    }

    /// Takes a reply that passed [`Cookie::accepts`](super::Cookie::accepts), as come at the last poll.
    pub fn on_reply(&mut self, r: &Reply) -> Option<Verdict> {
        self.on_reply_at(r, self.clock)
    }

    /// Takes a reply that passed [`Cookie::accepts`](super::Cookie::accepts), come at `now`; an
    /// answer to a probe sent once times the round trip (Karn: an answer
    /// to a resent probe could answer either send).
    pub fn on_reply_at(&mut self, r: &Reply, now: Instant) -> Option<Verdict> {
        let k = (key(r.src), r.sport);
        let rtt = match self.inflight.get(&k) {
            Some(&(nth, sent, first)) => self.tell_pacer(k, (nth, sent, first), u32::from(r.attempt), now),
            None => None,
        };
        let (state, reason) = match (r.icmp, self.kind) {
            // Only the target itself says its port is closed; a router or
            // firewall that answers port unreachable filters it (nmap's reading).
            (Some(Reason::PortUnreach), ScanType::Udp) if !r.relayed => (PortState::Closed, Reason::PortUnreach),
            (Some(why), _) => (PortState::Filtered, why),
            (None, ScanType::Udp) => (PortState::Open, Reason::UdpResponse),
            (None, ScanType::Syn | ScanType::Connect) if r.is_syn_ack() => (PortState::Open, Reason::SynAck),
            (None, ScanType::Ack) => (PortState::Unfiltered, Reason::Reset),
            (None, ScanType::Window) if r.window > 0 => (PortState::Open, Reason::Reset),
            (None, _) => (PortState::Closed, Reason::Reset),
        };
        let verdict = Verdict { ip: r.src, port: r.sport, state, reason, ttl: Some(r.ttl), rtt };
        if reason == Reason::PortUnreach && state == PortState::Closed {
            self.lanes.told(k.0);
        }
        if self.inflight.contains_key(&k) {
            self.lanes.forget(k.0, k.1);
        }
        if self.inflight.remove(&k).is_some() {
            match state {
                PortState::Open => {
                    self.counts.open += 1;
                    self.reported_open.insert(r.src, r.sport);
                }
                PortState::Closed | PortState::Unfiltered => self.counts.closed += 1,
                PortState::Filtered | PortState::OpenFiltered => self.counts.filtered += 1,
            }
            return Some(verdict);
        }
        // Not outstanding: a duplicate, or an answer after the probe was given up.
        if matches!(self.kind, ScanType::Syn | ScanType::Udp)
            && state == PortState::Open
            && self.reported_open.insert(r.src, r.sport)
        {
            self.counts.open += 1;
            self.counts.filtered = self.counts.filtered.saturating_sub(1);
            self.counts.late += 1;
            return Some(verdict);
        }
        None
    }

    /// Takes an answer that says nothing of a port (an ARP or NDP reply) to
    /// the probe `port` of `ip`, come at `now`: true if that probe was
    /// outstanding, which is then done (and its round trip timed if it was
    /// sent once); false for a duplicate, a late answer or a probe never sent.
    pub fn answered_at(&mut self, ip: IpAddr, port: u16, now: Instant) -> bool {
        let k = (key(ip), port);
        match self.inflight.remove(&k) {
            Some(sends) => {
                self.tell_pacer(k, sends, 0, now);
                true
            }
            None => false,
        }
    }

    /// An answer to try `attempt` (0 the first; the port it came back to
    /// tells) of probe `k`, sent `nth` times, last at `sent`: times the
    /// round trip if it was sent once (Karn), and tells the pacer.
    /// Tells the pacer of an answer; returns its round trip when the
    /// probe went out once.
    fn tell_pacer(&mut self, k: Key, sends: (u32, Instant, Instant), attempt: u32, now: Instant) -> Option<Duration> {
        let (nth, sent, first) = sends;
        let rtt = (nth == 1).then(|| now.saturating_duration_since(sent));
        if let Some(r) = rtt {
            self.sample(k.0, r);
        }
        // An answer to the latest try was sent at `sent`; one to an earlier
        // try (its answer slower than the timeout) at an unknown time.
        let latest = attempt + 1 >= nth;
        let lost = if latest { nth - 1 } else { attempt };
        let a = Answer { class: self.class, sent, first: nth == 1, lost, rtt };
        let timeout = self.gating().then(|| self.timeout_of(k));
        {
            let mut pacer = self.pacer.lock();
            pacer.on_answer(a, now);
            if let Some(timeout) = timeout {
                pacer.on_answer_from(k.0, first, lost, timeout, now);
            }
        }
        let host = self.losses.entry(k.0).or_default();
        host.0 = host.0.saturating_add(lost);
        host.1 = host.1.saturating_add(1);
        self.trim_hosts();
        rtt
    }

    /// Extra tries a silent probe to `host` gets now: more on a path seen
    /// losing, the scan's or the host's own, whichever lost more.
    fn retries(&self, host: u128) -> u32 {
        let (base, cap) = (self.pace.retries, self.pace.max_retries);
        let scan = self.pacer.lock().retries(base, cap);
        let own = self.losses.get(&host).map_or(base, |&(l, a)| retries_for(l.into(), a.into(), base, cap));
        scan.max(own)
    }

    /// Moves probes whose time ran out to the resend queue or gives them up.
    /// The queue is in send order and each host has its own timeout, so a
    /// probe may wait behind an earlier one with a longer timeout: it then
    /// times out late, never early.
    fn expire(&mut self, now: Instant) {
        while let Some(&(sent, k, nth)) = self.timers.front() {
            if sent + self.timeout_of(k) > now {
                break;
            }
            self.timers.pop_front();
            if self.inflight.get(&k).map(|e| e.0) != Some(nth) {
                continue; // answered, or sent again since
            }
            if nth <= self.retries(k.0) && !self.stopping {
                self.resend.push_back(k);
            } else {
                self.awaiting.push_back((sent, k, nth));
            }
        }
        self.settle();
    }

    /// Decides the probes whose last try timed out, in send order, as soon
    /// as the pacer has judged the moment of their last send: a try sent
    /// into a congested path goes again (at most [`CONGESTED_TRIES`] more
    /// times), since its silence says nothing; otherwise the probe is
    /// given up.
    fn settle(&mut self) {
        while let Some(&(sent, k, nth)) = self.awaiting.front() {
            if self.inflight.get(&k).map(|e| e.0) != Some(nth) {
                self.awaiting.pop_front();
                continue; // answered meanwhile
            }
            let congested = if self.stopping { Some(false) } else { self.pacer.lock().congested_at(sent) };
            let Some(congested) = congested else { break };
            self.awaiting.pop_front();
            if self.lanes.is_current(k.0, k.1) && self.stopping {
                self.lanes.drop_current(k.0, k.1);
                self.inflight.remove(&k);
                self.give_up(k);
            } else if self.lanes.is_current(k.0, k.1) {
                // A lane's probe: silent at its host's pace.
                for port in self.lanes.silent(k.0, k.1) {
                    if self.inflight.remove(&(k.0, port)).is_some() {
                        self.give_up((k.0, port));
                    }
                }
            } else if congested && nth <= self.retries(k.0) + CONGESTED_TRIES {
                self.resend.push_back(k);
            } else if self.stopping
                || self.pace.retries == 0
                || self.pace.scan_delay.is_some()
                || !self.lanes.take(k.0, k.1, sent)
            {
                self.inflight.remove(&k);
                self.give_up(k);
            }
        }
    }

    /// Appends to `out` the probes to send now (resends first), at most `max`.
    pub fn poll(&mut self, now: Instant, max: usize, out: &mut Vec<(IpAddr, u16)>) {
        self.clock = now;
        self.pacer.lock().poll(now);
        self.expire(now);
        if let Some(delay) = self.pace.scan_delay {
            self.poll_paced(now, max, out, delay);
            self.compact_timers();
            return;
        }
        while out.len() < max && !self.stopping {
            // Lane probes first: each is due at its host's pace.
            let Some(k) = self.lanes.next(now) else { break };
            if self.pacer.lock().try_take(now).is_err() {
                self.lanes.unsend(k.0, k.1, now);
                break;
            }
            if !self.send_again(k, now, out) {
                // Decided meanwhile.
                self.lanes.drop_current(k.0, k.1);
            }
        }
        if self.lanes.hosts() > self.lanes_trim_at {
            let live: HashSet<u128> = self.inflight.keys().map(|k| k.0).collect();
            self.lanes.trim(now, |h| live.contains(&h));
            self.lanes_trim_at = RTT_HOSTS.max(2 * self.lanes.hosts());
        }
        let gating = self.gating();
        while out.len() < max {
            // Resends of probes answered (or forgotten) meanwhile are dropped.
            while self.resend.front().is_some_and(|k| !self.inflight.contains_key(k)) {
                self.resend.pop_front();
            }
            while self.gated.front().is_some_and(|k| !self.inflight.contains_key(k)) {
                self.gated.pop_front();
            }
            // Retries that waited for their host's gate, first when it allows.
            if let Some(&k) = self.gated.front() {
                let mut pacer = self.pacer.lock();
                if pacer.gate_ready(k.0).is_none_or(|t| t <= now) && pacer.try_take(now).is_ok() {
                    drop(pacer);
                    self.gated.pop_front();
                    self.send_again(k, now, out);
                    continue;
                }
            }
            // A target waiting for its host's turn goes out on a stop too:
            // taken from the order, it would be lost to a resumed scan.
            let can_new =
                self.slot.is_some() || (!self.stopping && !self.exhausted && self.inflight.len() < self.pace.window);
            if self.resend.is_empty() && !can_new {
                break;
            }
            if self.pacer.lock().try_take(now).is_err() {
                break;
            }
            if let Some(k) = self.resend.pop_front() {
                // A retry waits for its host's gate as a first try does
                // (sent at once, a burst of them would be lost again), out
                // of the way of other hosts' probes.
                if gating && self.pacer.lock().admit(k.0, now).is_err() {
                    self.gated.push_back(k);
                    continue;
                }
                self.send_again(k, now, out);
                continue;
            }
            // A target is taken from the order only with its token in hand
            // (a stop never drops one taken but not sent); an empty feed
            // gives the token back (another machine may share the bucket).
            let Some((ip, port)) = self.slot.take().or_else(|| self.targets.next()) else {
                self.exhausted = true;
                self.pacer.lock().give_back();
                continue;
            };
            let k = (key(ip), port);
            {
                let mut pacer = self.pacer.lock();
                // Its host's gate has no turn for it: the order waits
                // behind it (its token given back).
                if gating && !self.stopping && pacer.admit(k.0, now).is_err() {
                    self.slot = Some((ip, port));
                    break;
                }
                pacer.on_send(self.class, true, now);
                if gating {
                    pacer.on_send_to(k.0, now);
                }
            }
            self.inflight.insert(k, (1, now, now));
            self.timers.push_back((now, k, 1));
            self.counts.sent += 1;
            out.push((ip, port));
        }
        self.compact_timers();
    }

    /// Sends probe `k` once more now, its token taken: false (and the
    /// token given back) if it is no longer outstanding.
    fn send_again(&mut self, k: Key, now: Instant, out: &mut Vec<(IpAddr, u16)>) -> bool {
        let gating = self.gating();
        let Some((nth, sent, _)) = self.inflight.get_mut(&k) else {
            self.pacer.lock().give_back();
            return false;
        };
        *nth += 1;
        *sent = now;
        self.timers.push_back((now, k, *nth));
        self.counts.sent += 1;
        out.push((addr(k.0), k.1));
        let mut pacer = self.pacer.lock();
        pacer.on_send(self.class, false, now);
        if gating {
            pacer.on_send_to(k.0, now);
        }
        true
    }

    /// `poll` with a scan delay: a probe whose host is not due yet waits in
    /// `held` with its turn reserved (each host's probes `delay` apart).
    fn poll_paced(&mut self, now: Instant, max: usize, out: &mut Vec<(IpAddr, u16)>, delay: Duration) {
        while out.len() < max {
            let Some((k, resend)) = self.next_due(now, delay) else { break };
            if self.pacer.lock().try_take(now).is_err() {
                // First in line next time.
                self.held.push_front((now, k, resend));
                break;
            }
            self.host_ready.insert(k.0, now + delay);
            let nth = if resend {
                match self.inflight.get_mut(&k) {
                    Some((nth, sent, _)) => {
                        *nth += 1;
                        *sent = now;
                        *nth
                    }
                    None => continue, // answered meanwhile
                }
            } else {
                self.inflight.insert(k, (1, now, now));
                1
            };
            self.timers.push_back((now, k, nth));
            self.counts.sent += 1;
            out.push((addr(k.0), k.1));
            self.pacer.lock().on_send(self.class, nth == 1, now);
        }
        // Hosts whose turn has long passed need no entry.
        if self.host_ready.len() > 2 * self.pace.window + 1024 {
            self.host_ready.retain(|_, t| *t > now);
        }
    }

    /// The next probe whose host may be probed now; probes whose host is not
    /// due go to `held` with the host's next turn reserved for them.
    fn next_due(&mut self, now: Instant, delay: Duration) -> Option<(Key, bool)> {
        let due = |h: &(Instant, Key, bool)| {
            self.stopping || (h.0 <= now && self.host_ready.get(&h.1 .0).is_none_or(|&t| t <= now))
        };
        if let Some(at) = self.held.iter().position(due) {
            let (_, k, resend) = self.held.remove(at).expect("position is inside");
            return Some((k, resend));
        }
        loop {
            let (k, resend) = if let Some(k) = self.resend.pop_front() {
                (k, true)
            } else if !self.stopping && !self.exhausted && self.inflight.len() + self.held.len() < self.pace.window {
                match self.targets.next() {
                    Some((ip, port)) => ((key(ip), port), false),
                    None => {
                        self.exhausted = true;
                        return None;
                    }
                }
            } else {
                return None;
            };
            match self.host_ready.get(&k.0).copied().filter(|&t| t > now) {
                None => return Some((k, resend)),
                Some(_) => {
                    // Reserve the host's next turn after those already held.
                    let turn = self.held.iter().filter(|h| h.1 .0 == k.0).map(|h| h.0).max();
                    let at = turn.map_or_else(|| self.host_ready[&k.0], |t| t + delay);
                    self.held.push_back((at, k, resend));
                }
            }
        }
    }

    /// Drops timers of probes already answered once they outnumber the live
    /// ones, so the queue stays proportional to the probes outstanding
    /// (amortised O(1): a pass runs only after that many pushes).
    fn compact_timers(&mut self) {
        if self.timers.len() > 2 * self.inflight.len() + 1024 {
            let inflight = &self.inflight;
            self.timers.retain(|(_, k, nth)| inflight.get(k).map(|e| e.0) == Some(*nth));
        }
    }

    /// When the machine next has something to do, if nothing comes in before.
    pub fn next_wakeup(&self, now: Instant) -> Option<Instant> {
        let timer = self.timers.front().map(|t| t.0 + self.timeout_of(t.1));
        let held = self.held.iter().map(|h| h.0).min();
        let timer = match (timer, held) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let sendable = !self.resend.is_empty()
            || self.slot.is_some()
            || (!self.stopping && !self.exhausted && self.inflight.len() + self.held.len() < self.pace.window);
        let pacer = self.pacer.lock();
        let mut token = sendable.then(|| pacer.token_at(now));
        // A target waiting for its host's gate, with nothing else to send.
        if let Some((ip, _)) = self.slot.filter(|_| self.resend.is_empty() && !self.stopping) {
            let gate = pacer.gate_ready(key(ip)).unwrap_or(now);
            token = token.map(|t| t.max(gate));
        }
        // Retries waiting for their host's gate.
        if let Some(k) = self.gated.front() {
            let gate = pacer.gate_ready(k.0).unwrap_or(now).max(pacer.token_at(now));
            token = Some(token.map_or(gate, |t| t.min(gate)));
        }
        // Probes waiting for the pacer's verdict on their last send, or in lanes.
        let verdict = if self.awaiting.is_empty() { None } else { pacer.next_event(now) };
        let lane = self.lanes.next_due().map(|t| t.max(pacer.token_at(now)));
        let verdict = match (verdict, lane) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let token = match (token, verdict) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        match (timer, token) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

#[cfg(test)]
#[path = "machine_tests.rs"]
mod tests;
