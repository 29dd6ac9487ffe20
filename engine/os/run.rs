//! Sends nmap's OS probes to many hosts at once over a packet socket and
//! gathers each host's replies: the only I/O of OS detection.
//!
//! In: the hosts as the scan hands them on (each made a [`Target`]: its
//! path, its open and closed ports and its round trip), the interface,
//! [`Settings`], the port scan's pace while there is one, and a stop
//! signal. Out: for each host, in the order they finish, its tries
//! ([`Try`]: the probes' parameters, what was sent and what came back,
//! with times). It ends when the hosts' stream closes and every host is
//! done. What always
//! holds: the six SEQ probes of a try go out 100 ms apart (nmap's tests
//! read rates from them), the other ten right after them; at most
//! [`PARALLEL`] hosts are probed at once and sending keeps under the rate
//! limit; a try ends when every probe is answered or when the host's wait
//! after its last probe is over, once the probes other than SEQ still
//! unanswered then were sent again and waited for (as nmap retransmits
//! them within a try); a host gets another try only when a SEQ probe went
//! unanswered (their 100 ms spacing cannot be sent again alone), at most
//! `max_tries`.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use std::sync::mpsc::{Receiver, TryRecvError};

use super::compute::{Exchange, Replies};
use super::probes::{self, Params, Probe};
use super::seen::HostSeen;
use crate::discovery::pacer::Pacer;
use crate::discovery::syn::Hop;
use crate::raw::packet::{Checksum, PacketSocket, BATCH, FRAME};

/// Hosts probed at once.
pub const PARALLEL: usize = 256;
/// Between two SEQ probes (nmap's spacing).
pub const SEQ_GAP: Duration = Duration::from_millis(100);
/// From the last SEQ probe to the other probes (nmap sends them after).
pub const AFTER_SEQ: Duration = Duration::from_millis(10);
const ETH: usize = 14;

/// A host to fingerprint.
#[derive(Clone, Copy, Debug)]
pub struct Target {
    pub ip: Ipv4Addr,
    pub hop: Hop,
    pub open: Option<u16>,
    pub closed: Option<u16>,
    pub closed_udp: u16,
    /// Its round trip, when the scan timed it.
    pub rtt: Option<Duration>,
    /// What the scan saw of it.
    pub seen: HostSeen,
}

/// How OS detection paces itself.
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    /// Most tries of a host (nmap's `--max-os-tries`).
    pub max_tries: u32,
    /// The least wait for replies after a try's last probe.
    pub min_wait: Duration,
    /// The longest wait (the scan's largest round-trip timeout).
    pub max_wait: Duration,
    /// Packets a second, at most.
    pub max_rate: Option<f64>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            max_tries: 5,
            min_wait: Duration::from_millis(120),
            max_wait: Duration::from_secs(2),
            max_rate: None,
        }
    }
}

/// One try of a host: what was sent and what came back.
#[derive(Debug)]
pub struct Try {
    pub params: Params,
    pub replies: Replies,
}

impl Try {
    /// How many probes were answered.
    pub fn answered(&self) -> usize {
        self.replies.of.values().filter(|e| e.reply.is_some()).count()
    }
}

/// The probes a host gets: those whose port is known.
fn planned(t: &Target) -> Vec<Probe> {
    probes::ORDER
        .iter()
        .copied()
        .filter(|p| match p {
            Probe::Seq(_) | Probe::Ecn | Probe::T(2..=4) => t.open.is_some(),
            Probe::T(_) => true,
            Probe::Ie(_) | Probe::U1 => true,
        })
        .collect()
}

/// A host being probed.
struct Active {
    idx: usize,
    params: Params,
    plan: Vec<Probe>,
    /// Next probe of `plan` to send.
    next: usize,
    start: Instant,
    last_send: Instant,
    sent: HashMap<Probe, Exchange>,
    /// The unanswered probes other than SEQ were sent again.
    resent: bool,
    tries: Vec<Try>,
}

/// Fresh per-try values (source ports, sequence numbers, IP id, ICMP id).
fn params_for(t: &Target, seed: u64) -> Params {
    let r = |shift: u32| (seed >> shift) as u32;
    Params {
        src: match t.hop.src {
            IpAddr::V4(a) => a,
            IpAddr::V6(_) => Ipv4Addr::UNSPECIFIED,
        },
        dst: t.ip,
        open: t.open.unwrap_or(0),
        closed: t.closed.unwrap_or(0),
        closed_udp: t.closed_udp,
        // 32768..61000 minus room for the probes' own ports.
        sport: 33_000 + (r(0) % 27_000) as u16,
        seq: r(7),
        ack: r(19).rotate_left(11),
        ip_id: r(29) as u16,
        icmp_id: r(43) as u16,
        ttl: 64,
    }
}

fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    let _ = getrandom::fill(&mut b);
    u64::from_le_bytes(b)
}

impl Active {
    fn new(idx: usize, t: &Target, now: Instant, tries: Vec<Try>) -> Active {
        Active {
            idx,
            params: params_for(t, random_u64()),
            plan: planned(t),
            next: 0,
            start: now,
            last_send: now,
            sent: HashMap::new(),
            resent: false,
            tries,
        }
    }

    /// When the next probe is due (SEQ probes 100 ms apart, the rest at once).
    fn due(&self) -> Option<Instant> {
        let p = *self.plan.get(self.next)?;
        let seq_sent = self.plan[..self.next].iter().filter(|p| matches!(p, Probe::Seq(_))).count() as u32;
        Some(match p {
            Probe::Seq(_) => self.start + SEQ_GAP * seq_sent,
            _ if seq_sent > 0 => self.start + SEQ_GAP * (seq_sent - 1) + AFTER_SEQ,
            _ => self.start,
        })
    }

    fn all_answered(&self) -> bool {
        self.next == self.plan.len() && self.sent.values().all(|e| e.reply.is_some())
    }

    fn finish_try(&mut self) -> Try {
        Try { params: self.params, replies: Replies { of: std::mem::take(&mut self.sent) } }
    }
}

/// Whether a host needs another try: its last try lost a SEQ reply (the
/// other probes were sent again within the try), and it has tries left.
fn again(tries: &[Try], max: u32) -> bool {
    if tries.len() as u32 >= max {
        return false;
    }
    match tries.last() {
        None => true,
        Some(t) => t.replies.of.iter().any(|(p, e)| matches!(p, Probe::Seq(_)) && e.reply.is_none()),
    }
}

/// The probes of a try to send again: the unanswered ones but SEQ.
fn to_resend(sent: &HashMap<Probe, Exchange>) -> Vec<Probe> {
    let mut v: Vec<Probe> =
        sent.iter().filter(|(p, e)| !matches!(p, Probe::Seq(_)) && e.reply.is_none()).map(|(p, _)| *p).collect();
    v.sort_by_key(|p| probes::ORDER.iter().position(|q| q == p));
    v
}

/// The try to judge a host by: the one with the most replies (the latest
/// of equals).
pub fn best_try(tries: &[Try]) -> Option<&Try> {
    tries.iter().max_by_key(|t| t.answered())
}

/// Paces sending under a rate.
struct Pace {
    gap: Option<Duration>,
    next: Instant,
}

impl Pace {
    fn ready(&mut self, now: Instant) -> bool {
        match self.gap {
            None => true,
            Some(_) if now < self.next => false,
            Some(g) => {
                self.next = now.max(self.next) + g;
                true
            }
        }
    }
}

/// Whether a probe may go now: a turn of the port scan's pace when there
/// is one (the two share the scan's rate), else of OS detection's own.
fn turn(shared: Option<&Pacer>, own: &mut Pace, now: Instant) -> bool {
    match shared {
        Some(p) => {
            let mut c = p.lock();
            c.poll(now);
            c.try_take(now).is_ok()
        }
        None => own.ready(now),
    }
}

/// Probes the hosts `incoming` brings (made targets by `resolve`; one it
/// refuses is skipped) and calls `done(target, tries)` for each as it
/// finishes, until `incoming` closes and every host is done. Stops early
/// (hosts left get no call) when `stop` says so.
#[allow(clippy::too_many_arguments)]
pub fn run(
    incoming: &Receiver<(IpAddr, HostSeen)>,
    resolve: &mut dyn FnMut(IpAddr, &HostSeen) -> Option<Target>,
    ifindex: u32,
    settings: &Settings,
    pacer: &dyn Fn() -> Option<Pacer>,
    stop: &dyn Fn() -> bool,
    mut done: impl FnMut(&Target, Vec<Try>),
) -> io::Result<()> {
    let sock = PacketSocket::open(ifindex)?;
    sock.tune(8 << 20)?;
    let mut hosts = Hosts::default();
    let mut own =
        Pace { gap: settings.max_rate.map(|r| Duration::from_secs_f64(1.0 / r.max(0.01))), next: Instant::now() };
    let mut frame = [0u8; ETH + probes::MAX_PACKET];
    let mut bufs = vec![[0u8; FRAME]; BATCH];
    let mut lens = [0usize; BATCH];
    let mut sums = [Checksum::Unchecked; BATCH];
    let t0 = Instant::now();
    let mut open = true;
    while open || !(hosts.waiting.is_empty() && hosts.active.is_empty()) {
        if stop() {
            return Ok(());
        }
        // Hosts the scan has finished with.
        while open {
            match incoming.try_recv() {
                Ok((ip, s)) => {
                    if let Some(t) = resolve(ip, &s) {
                        hosts.targets.push(t);
                        hosts.waiting.push_back((hosts.targets.len() - 1, Vec::new()));
                    }
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => open = false,
            }
        }
        let now = Instant::now();
        hosts.start(now);
        hosts.send_due(&sock, &mut frame, pacer().as_ref(), &mut own, now, t0)?;
        // Receive until the next thing is due (at most 10 ms).
        let next_due = hosts.active.iter().filter_map(Active::due).min();
        let wait = next_due.map_or(Duration::from_millis(10), |d| d.saturating_duration_since(Instant::now()));
        let got = sock.recv_batch(&mut bufs, &mut lens, &mut sums, wait.min(Duration::from_millis(10)))?;
        let at = Instant::now();
        for (buf, &len) in bufs.iter().zip(&lens).take(got) {
            hosts.read(&buf[..len.min(FRAME)], at.duration_since(t0));
        }
        hosts.end_tries(settings, Instant::now(), &mut done);
    }
    Ok(())
}

/// The hosts OS detection was given: those waiting for a try (a first
/// one, or another) and those in one.
#[derive(Default)]
struct Hosts {
    targets: Vec<Target>,
    /// Hosts by index in `targets`, with their tries so far.
    waiting: VecDeque<(usize, Vec<Try>)>,
    active: Vec<Active>,
    /// The index in `active` of each address in a try.
    by_ip: HashMap<Ipv4Addr, usize>,
}

impl Hosts {
    /// Starts tries (one whose address is being probed waits its turn).
    fn start(&mut self, now: Instant) {
        let (targets, by_ip) = (&self.targets, &mut self.by_ip);
        while self.active.len() < PARALLEL {
            let Some(pos) = self.waiting.iter().position(|(i, _)| !by_ip.contains_key(&targets[*i].ip)) else {
                break;
            };
            let (i, tries) = self.waiting.remove(pos).expect("position is in range");
            by_ip.insert(targets[i].ip, self.active.len());
            self.active.push(Active::new(i, &targets[i], now, tries));
        }
    }

    /// Sends what is due, at the pace's turns (the port scan's `shared`
    /// one when there is one, else `own`), built in `frame`.
    fn send_due(
        &mut self,
        sock: &PacketSocket,
        frame: &mut [u8; ETH + probes::MAX_PACKET],
        shared: Option<&Pacer>,
        own: &mut Pace,
        now: Instant,
        t0: Instant,
    ) -> io::Result<()> {
        for a in &mut self.active {
            while a.due().is_some_and(|d| d <= now) && turn(shared, own, now) {
                let p = a.plan[a.next];
                a.next += 1;
                let t = &self.targets[a.idx];
                let n = probes::build(p, &a.params, &mut frame[ETH..]);
                frame[..6].copy_from_slice(&t.hop.dst_mac);
                frame[6..12].copy_from_slice(&t.hop.src_mac);
                frame[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
                let sent = sock.send_batch(&[&frame[..ETH + n]])? == 1;
                let at = now.duration_since(t0);
                a.last_send = now;
                let exchange =
                    Exchange { sent: frame[ETH..ETH + n].to_vec(), sent_at: at, reply: None, reply_at: None };
                if sent {
                    a.sent.insert(p, exchange);
                }
            }
        }
        Ok(())
    }

    /// A frame received `at` (since the start): the first reply to one of
    /// an active host's probes is kept.
    fn read(&mut self, f: &[u8], at: Duration) {
        if f.len() < ETH + 20 || f[12..14] != [0x08, 0x00] {
            return;
        }
        let ip = &f[ETH..];
        let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
        let Some(&k) = self.by_ip.get(&src) else { return };
        let a = &mut self.active[k];
        let Some(p) = probes::answers(&a.params, ip) else { return };
        if let Some(e) = a.sent.get_mut(&p).filter(|e| e.reply.is_none()) {
            e.reply = Some(ip.to_vec());
            e.reply_at = Some(at);
        }
    }

    /// Ends tries: all answered, or waited long enough after the last
    /// probe. A host goes again (`settings.max_tries`) or is `done`.
    fn end_tries(&mut self, settings: &Settings, now: Instant, done: &mut impl FnMut(&Target, Vec<Try>)) {
        let (targets, active, by_ip) = (&self.targets, &mut self.active, &mut self.by_ip);
        let mut i = 0;
        while i < active.len() {
            let a = &active[i];
            let t = &targets[a.idx];
            let wait = t.rtt.map_or(settings.max_wait, |r| (r * 8).clamp(settings.min_wait, settings.max_wait));
            let over = a.next == a.plan.len() && (a.all_answered() || now >= a.last_send + wait);
            if !over {
                i += 1;
                continue;
            }
            // Once within a try, the unanswered probes but SEQ go again
            // (at the pace's turns, as the first ones).
            let again_now = if a.resent || a.all_answered() { Vec::new() } else { to_resend(&a.sent) };
            if !again_now.is_empty() {
                let a = &mut active[i];
                a.resent = true;
                a.last_send = now;
                a.plan.extend(again_now);
                i += 1;
                continue;
            }
            let mut a = active.swap_remove(i);
            by_ip.remove(&t.ip);
            if let Some(moved) = active.get(i) {
                by_ip.insert(targets[moved.idx].ip, i);
            }
            let one = a.finish_try();
            a.tries.push(one);
            if again(&a.tries, settings.max_tries) {
                self.waiting.push_front((a.idx, a.tries));
            } else {
                done(&targets[a.idx], a.tries);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn try_with(answered: &[Probe], sent: &[Probe]) -> Try {
        let of = sent
            .iter()
            .map(|p| {
                let reply = answered.contains(p).then(|| vec![0u8]);
                (*p, Exchange { sent: vec![], sent_at: Duration::ZERO, reply, reply_at: None })
            })
            .collect();
        let t = Target {
            ip: Ipv4Addr::new(198, 18, 0, 2),
            hop: Hop { src_mac: [0; 6], dst_mac: [0; 6], src: IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)) },
            open: Some(22),
            closed: Some(1),
            closed_udp: 40_000,
            rtt: None,
            seen: HostSeen::default(),
        };
        Try { params: params_for(&t, 7), replies: Replies { of } }
    }

    #[test]
    fn a_host_is_tried_again_only_when_a_seq_probe_went_unanswered() {
        let all = probes::ORDER;
        let no_t2 = [&all[..10], &all[11..]].concat();
        assert!(again(&[], 5));
        assert!(!again(&[try_with(&all, &all)], 5), "every probe answered: one try");
        assert!(!again(&[try_with(&no_t2, &all)], 5), "T2 silent (it was sent twice): one try");
        assert!(again(&[try_with(&all[1..], &all)], 5), "SEQ 1 lost: another try");
        let five: Vec<Try> = (0..5).map(|_| try_with(&all[1..], &all)).collect();
        assert!(!again(&five, 5), "never past max_tries");
        assert!(!again(&five[..1], 1));
    }

    #[test]
    fn only_unanswered_probes_but_seq_are_sent_again() {
        let all = probes::ORDER;
        let t = try_with(&[&all[..3], &all[8..10], &all[12..]].concat(), &all);
        assert_eq!(to_resend(&t.replies.of), [Probe::Ie(0), Probe::Ie(1), Probe::T(2), Probe::T(3)], "SEQ 4-6 are not");
    }

    #[test]
    fn the_try_with_most_replies_is_judged() {
        let all = probes::ORDER;
        let tries = [try_with(&all[..12], &all), try_with(&all[..14], &all), try_with(&all[..14], &all)];
        assert!(std::ptr::eq(best_try(&tries).unwrap(), &tries[2]));
        assert!(best_try(&[]).is_none());
    }

    #[test]
    fn seq_probes_go_100ms_apart_and_the_rest_after_them() {
        let mut t = try_with(&[], &[]);
        t.params.open = 22;
        let target = Target {
            ip: Ipv4Addr::new(198, 18, 0, 2),
            hop: Hop { src_mac: [0; 6], dst_mac: [0; 6], src: IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)) },
            open: Some(22),
            closed: None,
            closed_udp: 40_000,
            rtt: None,
            seen: HostSeen::default(),
        };
        let now = Instant::now();
        let mut a = Active::new(0, &target, now, Vec::new());
        let mut dues = Vec::new();
        while let Some(d) = a.due() {
            dues.push((a.plan[a.next], d.duration_since(now)));
            a.next += 1;
        }
        let seq: Vec<Duration> = dues.iter().filter(|(p, _)| matches!(p, Probe::Seq(_))).map(|d| d.1).collect();
        assert_eq!(seq, (0..6).map(|i| SEQ_GAP * i).collect::<Vec<_>>());
        assert!(dues.iter().filter(|(p, _)| !matches!(p, Probe::Seq(_))).all(|(_, d)| *d > SEQ_GAP * 5));
        assert_eq!(dues.len(), 16, "every probe, the closed port unknown or not");
        let no_open = Target { open: None, ..target };
        let plan = planned(&no_open);
        assert!(plan.iter().all(|p| matches!(p, Probe::T(5..=7) | Probe::Ie(_) | Probe::U1)), "{plan:?}");
    }
}
