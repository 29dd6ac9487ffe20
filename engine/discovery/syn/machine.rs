//! The SYN scan's state machine: which probe to send when, and what a reply
//! means. No I/O inside; the caller passes the time in, which lets the tests
//! drive it on a simulated clock.
//!
//! Validation is stateless: a probe's sequence number and source port come
//! from a keyed SipHash of its addresses and destination port ([`Cookie`]),
//! so a reply is ours only if its ack is that sequence number plus one. The
//! machine keeps state only for probes still unanswered (at most `window` of
//! them) and for open ports already reported (so a duplicate or late reply is
//! reported once): nothing grows with the size of the scan.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::Hasher;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use siphasher::sip::SipHasher13;

use super::frame::Reply;
use crate::discovery::TokenBucket;
use crate::findings::{PortState, Proto, Reason, ScanType};
use crate::targets::addrs::{addr, key};
use crate::targets::TargetSpace;

/// Source ports of probes: above Linux's ephemeral range, so no local socket
/// is ever confused with a probe.
pub const SPORT_BASE: u16 = 61_000;
const SPORT_SPAN: u32 = 4_500;

/// The keyed hash behind probe sequence numbers and source ports. The
/// source port also carries which of `workers` senders sent the probe, so
/// replies go back to the machine that waits for them.
#[derive(Clone, Copy, Debug)]
pub struct Cookie {
    k0: u64,
    k1: u64,
    workers: u16,
    kind: ScanType,
}

impl Cookie {
    /// The cookie of a SYN scan.
    pub fn new(k0: u64, k1: u64, workers: u16) -> Cookie {
        Cookie { k0, k1, workers: workers.clamp(1, 64), kind: ScanType::Syn }
    }

    /// The same for another raw scan type, whose replies carry the cookie
    /// elsewhere.
    pub fn for_scan(self, kind: ScanType) -> Cookie {
        Cookie { kind, ..self }
    }

    fn hash(&self, src: IpAddr, dst: IpAddr, dport: u16) -> u64 {
        let mut h = SipHasher13::new_with_keys(self.k0, self.k1);
        h.write_u128(key(src));
        h.write_u128(key(dst));
        h.write_u16(dport);
        h.finish()
    }

    /// The sequence number and source port of worker `worker`'s probe from
    /// `src` to `dst:dport`.
    pub fn probe(&self, src: IpAddr, dst: IpAddr, dport: u16, worker: usize) -> (u32, u16) {
        let v = self.hash(src, dst, dport);
        let n = u32::from(self.workers);
        let slot = (v >> 32) as u32 % (SPORT_SPAN / n);
        (v as u32, SPORT_BASE + (slot * n + worker as u32 % n) as u16)
    }

    /// Which worker's probe `r` answers, if it answers one of ours: the
    /// right source port, and the cookie where the reply carries it. A
    /// SYN's SYN-ACK or RST acknowledges sequence + 1; a RST to a probe
    /// with ACK set takes its sequence from our acknowledgement (RFC 793
    /// 3.4), one to a probe without acknowledges our sequence plus the FIN
    /// it carried; an ICMP error quotes our sequence itself.
    ///
    /// A UDP answer is ours if it comes back to the probe's keyed source
    /// port and, where its protocol echoes one, carries the keyed
    /// transaction id the probe did (the receiver reads it into `seq`); an
    /// ICMP error quoting a UDP probe, if it quotes the probe's IP id.
    pub fn accepts(&self, r: &Reply) -> Option<usize> {
        let udp = self.kind == ScanType::Udp;
        if r.dport < SPORT_BASE || (r.proto == Proto::Udp) != udp {
            return None;
        }
        let worker = usize::from((r.dport - SPORT_BASE) % self.workers);
        let (seq, sport) = self.probe(r.dst, r.src, r.sport, worker);
        let ours = match (r.icmp, self.kind) {
            (Some(_), ScanType::Udp) => r.seq == u32::from(seq as u16),
            (None, ScanType::Udp) => r.seq == seq & r.mask,
            (Some(_), _) => r.seq == seq,
            (None, ScanType::Syn | ScanType::Connect) => (r.is_syn_ack() || r.is_rst()) && r.ack == seq.wrapping_add(1),
            (None, ScanType::Ack | ScanType::Window | ScanType::Maimon) => r.is_rst() && r.seq == seq,
            (None, ScanType::Fin | ScanType::Xmas) => r.is_rst() && r.ack == seq.wrapping_add(1),
            (None, ScanType::Null) => r.is_rst() && r.ack == seq,
        };
        (r.dport == sport && ours).then_some(worker)
    }
}

/// What a reply said about a port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub ip: IpAddr,
    pub port: u16,
    pub state: PortState,
    pub reason: Reason,
    /// Of the reply; none for a probe that drew none.
    pub ttl: Option<u8>,
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
    pub timeout: Duration,
    /// Extra sends of a probe that got no answer.
    pub retries: u32,
    /// Most probes unanswered at once.
    pub window: usize,
    pub max_rate: Option<f64>,
    /// Least time between two probes to one host (`--scan-delay`).
    pub scan_delay: Option<Duration>,
}

type Key = (u128, u16);

/// The shortest a probe waits for its answer however fast the answers
/// come (nmap's default `--min-rtt-timeout`).
pub const MIN_RTT_TIMEOUT: Duration = Duration::from_millis(100);

/// Hosts whose round trips are kept at least before the table is trimmed
/// to those with probes out.
const RTT_HOSTS: usize = 4096;

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
    bucket: Option<TokenBucket>,
    /// Unanswered probes: how often each was sent, and when last.
    inflight: HashMap<Key, (u32, Instant)>,
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
}

impl<I: Iterator<Item = (IpAddr, u16)>> Machine<I> {
    pub fn new(targets: I, pace: Pace, now: Instant, seen: Seen) -> Machine<I> {
        Machine {
            targets,
            exhausted: false,
            stopping: false,
            pace,
            bucket: pace.max_rate.map(|r| TokenBucket::new(r, now)),
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
            rtt: HashMap::new(),
            rtt_trim_at: RTT_HOSTS,
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
        self.timeout_of(key(ip))
    }

    fn timeout_of(&self, host: u128) -> Duration {
        match self.rtt.get(&host) {
            None => self.pace.timeout,
            Some(&(srtt, var)) => (srtt + 4 * var).clamp(MIN_RTT_TIMEOUT.min(self.pace.timeout), self.pace.timeout),
        }
    }

    /// Takes one round-trip sample of `host`.
    fn sample(&mut self, host: u128, r: Duration) {
        let next = match self.rtt.get(&host) {
            None => (r, r / 2),
            Some(&(srtt, var)) => (srtt * 7 / 8 + r / 8, var * 3 / 4 + srtt.abs_diff(r) / 4),
        };
        self.rtt.insert(host, next);
        if self.rtt.len() > self.rtt_trim_at {
            let live: HashSet<u128> = self.inflight.keys().map(|k| k.0).collect();
            self.rtt.retain(|h, _| live.contains(h));
            self.rtt.shrink_to(2 * self.rtt.len());
            // Amortised: the next trim waits for as many new hosts as are kept.
            self.rtt_trim_at = RTT_HOSTS.max(2 * self.rtt.len());
        }
    }

    /// Keeps a verdict for every probe given up, for [`Machine::take_silent`].
    pub fn report_silence(self) -> Machine<I> {
        Machine { keep_silent: true, ..self }
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
        while let Some(k) = self.resend.pop_front() {
            if self.inflight.remove(&k).is_some() {
                self.give_up(k);
            }
        }
        // Held for their host's turn: resends are given up as above; new
        // ones were never sent and are counted as such.
        while let Some((_, k, resend)) = self.held.pop_front() {
            if !resend || self.inflight.remove(&k).is_some() {
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
        self.silent.push(Verdict { ip: addr(k.0), port: k.1, state, reason: Reason::NoResponse, ttl: None });
    }

    /// True once every probe is answered or given up (or the scan was stopped
    /// and the last outstanding probe has timed out).
    pub fn is_done(&self) -> bool {
        (self.exhausted || self.stopping) && self.inflight.is_empty() && self.held.is_empty()
    }

    /// Takes a reply that passed [`Cookie::accepts`], as come at the last poll.
    pub fn on_reply(&mut self, r: &Reply) -> Option<Verdict> {
        self.on_reply_at(r, self.clock)
    }

    /// Takes a reply that passed [`Cookie::accepts`], come at `now`; an
    /// answer to a probe sent once times the round trip (Karn: an answer
    /// to a resent probe could answer either send).
    pub fn on_reply_at(&mut self, r: &Reply, now: Instant) -> Option<Verdict> {
        if let Some(&(1, sent)) = self.inflight.get(&(key(r.src), r.sport)) {
            self.sample(key(r.src), now.saturating_duration_since(sent));
        }
        let k = (key(r.src), r.sport);
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
        let verdict = Verdict { ip: r.src, port: r.sport, state, reason, ttl: Some(r.ttl) };
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

    /// Moves probes whose time ran out to the resend queue or gives them up.
    /// The queue is in send order and each host has its own timeout, so a
    /// probe may wait behind an earlier one with a longer timeout: it then
    /// times out late, never early.
    fn expire(&mut self, now: Instant) {
        while let Some(&(sent, k, nth)) = self.timers.front() {
            if sent + self.timeout_of(k.0) > now {
                break;
            }
            self.timers.pop_front();
            if self.inflight.get(&k).map(|e| e.0) != Some(nth) {
                continue; // answered, or sent again since
            }
            if nth <= self.pace.retries && !self.stopping {
                self.resend.push_back(k);
            } else {
                self.inflight.remove(&k);
                self.give_up(k);
            }
        }
    }

    /// Appends to `out` the probes to send now (resends first), at most `max`.
    pub fn poll(&mut self, now: Instant, max: usize, out: &mut Vec<(IpAddr, u16)>) {
        self.clock = now;
        self.expire(now);
        if let Some(delay) = self.pace.scan_delay {
            self.poll_paced(now, max, out, delay);
            self.compact_timers();
            return;
        }
        while out.len() < max {
            let can_new = !self.stopping && !self.exhausted && self.inflight.len() < self.pace.window;
            if self.resend.is_empty() && !can_new {
                break;
            }
            if let Some(b) = &mut self.bucket {
                if b.try_take(now).is_err() {
                    break;
                }
            }
            if let Some(k) = self.resend.pop_front() {
                if let Some((nth, sent)) = self.inflight.get_mut(&k) {
                    *nth += 1;
                    *sent = now;
                    self.timers.push_back((now, k, *nth));
                    self.counts.sent += 1;
                    out.push((addr(k.0), k.1));
                }
                continue;
            }
            match self.targets.next() {
                None => self.exhausted = true,
                Some((ip, port)) => {
                    let k = (key(ip), port);
                    self.inflight.insert(k, (1, now));
                    self.timers.push_back((now, k, 1));
                    self.counts.sent += 1;
                    out.push((ip, port));
                }
            }
        }
        self.compact_timers();
    }

    /// `poll` with a scan delay: a probe whose host is not due yet waits in
    /// `held` with its turn reserved (each host's probes `delay` apart).
    fn poll_paced(&mut self, now: Instant, max: usize, out: &mut Vec<(IpAddr, u16)>, delay: Duration) {
        while out.len() < max {
            let Some((k, resend)) = self.next_due(now, delay) else { break };
            if let Some(b) = &mut self.bucket {
                if b.try_take(now).is_err() {
                    // First in line next time.
                    self.held.push_front((now, k, resend));
                    break;
                }
            }
            self.host_ready.insert(k.0, now + delay);
            let nth = if resend {
                match self.inflight.get_mut(&k) {
                    Some((nth, sent)) => {
                        *nth += 1;
                        *sent = now;
                        *nth
                    }
                    None => continue, // answered meanwhile
                }
            } else {
                self.inflight.insert(k, (1, now));
                1
            };
            self.timers.push_back((now, k, nth));
            self.counts.sent += 1;
            out.push((addr(k.0), k.1));
        }
        // Hosts whose turn has long passed need no entry.
        if self.host_ready.len() > 2 * self.pace.window + 1024 {
            self.host_ready.retain(|_, t| *t > now);
        }
    }

    /// The next probe whose host may be probed now; probes whose host is not
    /// due go to `held` with the host's next turn reserved for them.
    fn next_due(&mut self, now: Instant, delay: Duration) -> Option<(Key, bool)> {
        let due = |h: &(Instant, Key, bool)| h.0 <= now && self.host_ready.get(&h.1 .0).is_none_or(|&t| t <= now);
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
        let timer = self.timers.front().map(|t| t.0 + self.timeout_of(t.1 .0));
        let held = self.held.iter().map(|h| h.0).min();
        let timer = match (timer, held) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let sendable = !self.resend.is_empty()
            || (!self.stopping && !self.exhausted && self.inflight.len() + self.held.len() < self.pace.window);
        let token = match (&self.bucket, sendable) {
            (Some(b), true) => {
                let mut probe = b.clone();
                Some(probe.try_take(now).map_or_else(|wait| now + wait, |()| now))
            }
            (None, true) => Some(now),
            _ => None,
        };
        match (timer, token) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pnet_packet::tcp::TcpFlags;

    const SRC: &str = "198.18.0.1";

    fn pace(retries: u32, window: usize) -> Pace {
        Pace { timeout: Duration::from_millis(100), retries, window, max_rate: None, scan_delay: None }
    }

    fn targets(n: u16) -> Vec<(IpAddr, u16)> {
        (1..=n).map(|p| ("198.18.0.2".parse().unwrap(), p)).collect()
    }

    /// The reply a target would send to the probe for `ip:port`.
    fn answer(c: &Cookie, ip: IpAddr, port: u16, open: bool) -> Reply {
        let (seq, sport) = c.probe(SRC.parse().unwrap(), ip, port, 0);
        let flags = if open { TcpFlags::SYN | TcpFlags::ACK } else { TcpFlags::RST | TcpFlags::ACK };
        Reply {
            proto: Proto::Tcp,
            mask: 0,
            data: (0, 0),
            src: ip,
            dst: SRC.parse().unwrap(),
            sport: port,
            dport: sport,
            seq: 5,
            ack: seq.wrapping_add(1),
            flags,
            ttl: 64,
            window: 0,
            icmp: None,
            relayed: false,
        }
    }

    #[test]
    fn cookie_accepts_only_its_own_replies() {
        let c = Cookie::new(1, 2, 1);
        let ip: IpAddr = "198.18.0.2".parse().unwrap();
        let good = answer(&c, ip, 22, true);
        assert_eq!(c.accepts(&good), Some(0));
        assert_eq!(c.accepts(&answer(&c, ip, 22, false)), Some(0));
        assert_eq!(Cookie::new(1, 3, 1).accepts(&good), None, "another key");
        assert_eq!(c.accepts(&Reply { ack: good.ack.wrapping_add(1), ..good }), None, "wrong ack");
        assert_eq!(c.accepts(&Reply { dport: good.dport ^ 1, ..good }), None, "wrong port");
        assert_eq!(c.accepts(&Reply { sport: 23, ..good }), None, "answer for another port");
        assert_eq!(c.accepts(&Reply { flags: TcpFlags::ACK, ..good }), None, "a bare ACK");
        assert_eq!(c.accepts(&Reply { dport: 80, ..good }), None, "a port below ours");
    }

    #[test]
    fn cookie_routes_replies_to_the_worker_that_sent_the_probe() {
        let c = Cookie::new(5, 6, 3);
        let (src, ip): (IpAddr, IpAddr) = (SRC.parse().unwrap(), "198.19.0.9".parse().unwrap());
        for worker in 0..3 {
            for port in [1, 80, 65535] {
                let (seq, sport) = c.probe(src, ip, port, worker);
                assert!(sport >= SPORT_BASE);
                let mut r = answer(&c, ip, port, true);
                r.dport = sport;
                r.ack = seq.wrapping_add(1);
                assert_eq!(c.accepts(&r), Some(worker));
            }
        }
    }

    /// A RST from `ip:port` to our port `dport`, sequence and ack 0.
    fn bare_rst(ip: IpAddr, port: u16, dport: u16) -> Reply {
        let dst = SRC.parse().unwrap();
        Reply {
            proto: Proto::Tcp,
            src: ip,
            dst,
            sport: port,
            dport,
            seq: 0,
            ack: 0,
            mask: 0,
            data: (0, 0),
            flags: TcpFlags::RST,
            ttl: 64,
            window: 0,
            icmp: None,
            relayed: false,
        }
    }

    /// What a RFC 793 target sends back to each kind of probe, and whether
    /// the cookie takes it: a RST's sequence is the probe's ACK number when
    /// the probe had ACK set, else its acknowledgement is the probe's
    /// sequence plus the FIN; an ICMP error quotes the probe's sequence.
    #[test]
    fn cookies_of_every_scan_type_take_their_own_replies_only() {
        let ip: IpAddr = "198.18.0.2".parse().unwrap();
        let src: IpAddr = SRC.parse().unwrap();
        for kind in [ScanType::Ack, ScanType::Window, ScanType::Maimon, ScanType::Fin, ScanType::Xmas, ScanType::Null] {
            let c = Cookie::new(3, 4, 1).for_scan(kind);
            let (seq, sport) = c.probe(src, ip, 80, 0);
            let base = bare_rst(ip, 80, sport);
            let rst = match kind {
                ScanType::Ack | ScanType::Window | ScanType::Maimon => Reply { seq, ..base },
                ScanType::Null => Reply { ack: seq, flags: TcpFlags::RST | TcpFlags::ACK, ..base },
                _ => Reply { ack: seq.wrapping_add(1), flags: TcpFlags::RST | TcpFlags::ACK, ..base },
            };
            assert_eq!(c.accepts(&rst), Some(0), "{kind:?}");
            assert_eq!(c.accepts(&Reply { seq: rst.seq ^ 1, ack: rst.ack ^ 1, ..rst }), None, "{kind:?} wrong cookie");
            assert_eq!(c.accepts(&Reply { flags: TcpFlags::ACK, ..rst }), None, "{kind:?} not a RST");
            assert_eq!(Cookie::new(3, 5, 1).for_scan(kind).accepts(&rst), None, "{kind:?} another key");
            let icmp = Reply { seq, flags: 0, icmp: Some(Reason::AdminProhibited), ..base };
            assert_eq!(c.accepts(&icmp), Some(0), "{kind:?} ICMP");
            assert_eq!(c.accepts(&Reply { seq: seq ^ 1, ..icmp }), None, "{kind:?} ICMP for another probe");
        }
        // A SYN scan's ICMP errors too.
        let c = Cookie::new(3, 4, 1);
        let (seq, sport) = c.probe(src, ip, 81, 0);
        let icmp = Reply { seq, flags: 0, icmp: Some(Reason::PortUnreach), ..bare_rst(ip, 81, sport) };
        assert_eq!(c.accepts(&icmp), Some(0));
    }

    /// A UDP answer is ours when it comes back to the keyed source port with
    /// the keyed transaction id (where the protocol echoes one); an ICMP
    /// error quoting a UDP probe, when it quotes the probe's IP id. TCP
    /// segments never answer a UDP scan, nor UDP datagrams a TCP one.
    #[test]
    fn udp_cookies_check_the_port_the_echoed_id_and_the_quoted_ip_id() {
        let ip: IpAddr = "198.18.0.2".parse().unwrap();
        let src: IpAddr = SRC.parse().unwrap();
        let c = Cookie::new(7, 8, 2).for_scan(ScanType::Udp);
        let (seq, sport) = c.probe(src, ip, 53, 1);
        let base = Reply { proto: Proto::Udp, flags: 0, ..bare_rst(ip, 53, sport) };
        // No id echoed (the port's protocol has none): the port decides.
        assert_eq!(c.accepts(&base), Some(1));
        assert_eq!(c.accepts(&Reply { dport: sport ^ 2, ..base }), None, "another source port");
        assert_eq!(Cookie::new(7, 9, 2).for_scan(ScanType::Udp).accepts(&base), None, "another key");
        // A 2-byte id echoed.
        let echoed = Reply { seq: seq & 0xffff, mask: 0xffff, ..base };
        assert_eq!(c.accepts(&echoed), Some(1));
        assert_eq!(c.accepts(&Reply { seq: (seq ^ 1) & 0xffff, ..echoed }), None, "a wrong id");
        // ICMP quoting the probe: its IP id is the cookie's low 16 bits.
        let icmp = Reply { seq: u32::from(seq as u16), icmp: Some(Reason::PortUnreach), ..base };
        assert_eq!(c.accepts(&icmp), Some(1));
        assert_eq!(c.accepts(&Reply { seq: u32::from(seq as u16 ^ 1), ..icmp }), None, "quotes another probe");
        // Protocols do not cross.
        assert_eq!(c.accepts(&Reply { proto: Proto::Tcp, ..icmp }), None, "ICMP quoting TCP");
        let syn = Cookie::new(7, 8, 2);
        let (tseq, tsport) = syn.probe(src, ip, 53, 1);
        let tcp_icmp = Reply { seq: tseq, icmp: Some(Reason::PortUnreach), ..bare_rst(ip, 53, tsport) };
        assert_eq!(syn.accepts(&tcp_icmp), Some(1));
        assert_eq!(syn.accepts(&Reply { proto: Proto::Udp, ..tcp_icmp }), None, "ICMP quoting UDP");
    }

    /// UDP states as nmap's: an answer is open, ICMP port unreachable
    /// closed, another unreachable filtered, silence open|filtered; an
    /// answer after the probe was given up still makes the port open, once.
    #[test]
    fn udp_states_are_nmaps() {
        let ip: IpAddr = "198.18.0.2".parse().unwrap();
        let t0 = Instant::now();
        let list = vec![(ip, 53), (ip, 54), (ip, 55), (ip, 56), (ip, 57), (ip, 58)];
        let mut m =
            Machine::new(list.into_iter(), pace(1, 64), t0, Seen::set()).for_scan(ScanType::Udp).report_silence();
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
        assert_eq!(m.counts().sent, 4 + 2 * 2, "the silent ports were sent twice");
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
            now =
                m.next_wakeup(now).map_or(now + Duration::from_millis(1), |t| t.max(now + Duration::from_micros(100)));
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
        let c = Cookie::new(7, 7, 1);
        let t0 = Instant::now();
        let mut now = t0;
        let mut m = Machine::new(list.into_iter(), pace, now, Seen::set());
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
            out.clear();
            m.poll(now, 16, &mut out);
            for &(ip, port) in &out {
                let n = sends.entry((ip, port)).or_default();
                *n += 1;
                for (delay, mut r) in network(ip, port, *n) {
                    let (seq, sport) = c.probe(SRC.parse().unwrap(), ip, port, 0);
                    r.dport = sport;
                    if r.ack != 0 {
                        r.ack = seq.wrapping_add(1);
                    }
                    pending.push((now + delay, r));
                }
            }
            if m.is_done() && pending.is_empty() {
                break;
            }
            let next = [m.next_wakeup(now), pending.iter().map(|p| p.0).min()].into_iter().flatten().min();
            now = next.map_or(now + Duration::from_millis(1), |t| t.max(now));
        }
        (verdicts, m.counts(), now - t0)
    }

    fn reply(ip: IpAddr, port: u16, open: bool) -> Reply {
        let flags = if open { TcpFlags::SYN | TcpFlags::ACK } else { TcpFlags::RST | TcpFlags::ACK };
        Reply {
            proto: Proto::Tcp,
            mask: 0,
            data: (0, 0),
            src: ip,
            dst: SRC.parse().unwrap(),
            sport: port,
            dport: 0,
            seq: 1,
            ack: 1,
            flags,
            ttl: 63,
            window: 0,
            icmp: None,
            relayed: false,
        }
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
}
