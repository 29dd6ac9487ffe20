//! Host discovery inside a raw scan's sender thread, and the port scan of
//! the hosts it finds.
//!
//! [`Discovery`] runs its own [`Machine`] over `(host, probe index)` pairs
//! ([`PingFeed`]: a host's probes one after the other, hosts in the scan's
//! keyed order) and decides each host up at its first answer or down when
//! every probe to it is given up. An on-link host gets one probe instead
//! of the plan's, an ARP request or neighbour solicitation (as nmap on
//! Ethernet): it is up only when it answers that request, never from the
//! neighbour table, and its answer gives the MAC its ports are scanned
//! with. A host found up goes into a [`LiveFeed`], from which the port
//! scan's machine takes pairs while discovery goes on. What is kept per
//! host is bounded by the probes outstanding: a host is pending only while
//! one of its probes is.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::links::Links;
use super::machine::Machine;
use super::neighbour::{self, Answer};
use crate::discovery::ping::HostPlan;
use crate::findings::Reason;
use crate::targets::addrs::key;
use crate::targets::ScanOrder;

/// What discovery decided about a host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostVerdict {
    pub ip: IpAddr,
    pub up: bool,
    pub reason: Reason,
    pub ttl: Option<u8>,
    pub latency: Option<Duration>,
    pub mac: Option<[u8; 6]>,
}

/// The discovery probes of `ip`, by index: an ARP/NDP request
/// ([`neighbour::PROBE`]) for an on-link host, else the plan's that apply.
fn probes_of<'p>(links: &Links, plan: &'p HostPlan, ip: IpAddr) -> impl Iterator<Item = u16> + 'p {
    let on_link = links.on_link(ip).is_some();
    let plan = plan.probes_for(ip).filter(move |_| !on_link).map(|(i, _)| i);
    on_link.then_some(neighbour::PROBE).into_iter().chain(plan)
}

/// The discovery probes of a share of the hosts: each host's probes in a
/// row. Unreachable hosts get no probe: their verdicts are left in
/// `decided`.
pub struct PingFeed<'a> {
    hosts: ScanOrder,
    links: &'a Links,
    plan: Arc<HostPlan>,
    current: Option<(IpAddr, usize)>,
    decided: Rc<RefCell<VecDeque<HostVerdict>>>,
}

impl<'a> PingFeed<'a> {
    pub fn new(hosts: ScanOrder, links: &'a Links, plan: Arc<HostPlan>) -> PingFeed<'a> {
        PingFeed { hosts, links, plan, current: None, decided: Rc::default() }
    }
}

impl PingFeed<'_> {
    /// The host is decided: the rest of its probes are not sent.
    fn skip(&mut self, ip: IpAddr) {
        if self.current.is_some_and(|(c, _)| c == ip) {
            self.current = None;
        }
    }
}

impl Iterator for PingFeed<'_> {
    type Item = (IpAddr, u16);

    fn next(&mut self) -> Option<(IpAddr, u16)> {
        loop {
            if let Some((ip, from)) = self.current {
                let next = probes_of(self.links, &self.plan, ip).find(|&i| usize::from(i) >= from);
                match next {
                    Some(i) => {
                        self.current = Some((ip, usize::from(i) + 1));
                        return Some((ip, i));
                    }
                    None => self.current = None,
                }
            }
            let (ip, _) = self.hosts.next()?;
            if self.links.on_link(ip).is_some_and(|h| h.src == ip) {
                // Our own address on the link: a request for it would be a
                // gratuitous ARP, and no frame of ours comes back to us.
                let down =
                    HostVerdict { ip, up: false, reason: Reason::NoResponse, ttl: None, latency: None, mac: None };
                self.decided.borrow_mut().push_back(down);
                continue;
            }
            if self.links.on_link(ip).is_none() && self.links.hop(ip).is_err() {
                // No path: never probed, down (the scan said why once per block).
                let down =
                    HostVerdict { ip, up: false, reason: Reason::NetUnreach, ttl: None, latency: None, mac: None };
                self.decided.borrow_mut().push_back(down);
                continue;
            }
            self.current = Some((ip, 0));
        }
    }
}

/// A host waiting for its first answer: probes not yet given up, when the
/// first was sent, and what a router said about it.
struct Pending {
    left: u16,
    first: Instant,
    why: Option<Reason>,
}

/// Host discovery of one sender thread's share of the hosts.
pub struct Discovery<'a> {
    pub machine: Machine<PingFeed<'a>>,
    links: &'a Links,
    plan: Arc<HostPlan>,
    pending: HashMap<u128, Pending>,
    /// ARP/NDP requests sent, retries included.
    requests: u64,
    decided: Rc<RefCell<VecDeque<HostVerdict>>>,
}

impl<'a> Discovery<'a> {
    /// Discovery of `feed`'s hosts, paced as `machine` says.
    pub fn new(feed: PingFeed<'a>, make: impl FnOnce(PingFeed<'a>) -> Machine<PingFeed<'a>>) -> Discovery<'a> {
        let (links, plan, decided) = (feed.links, feed.plan.clone(), feed.decided.clone());
        Discovery { machine: make(feed), links, plan, pending: HashMap::new(), requests: 0, decided }
    }

    /// Notes the probes just sent (`due`, from the machine's poll).
    /// A host is pending from its first probe; a later one of a host
    /// already decided (sent before its answer came) opens nothing.
    pub fn sent(&mut self, due: &[(IpAddr, u16)], now: Instant) {
        for &(ip, idx) in due {
            self.requests += u64::from(idx == neighbour::PROBE);
            let mut probes = probes_of(self.links, &self.plan, ip);
            if probes.next() == Some(idx) {
                let left = 1 + probes.count() as u16;
                self.pending.insert(key(ip), Pending { left, first: now, why: None });
            }
        }
    }

    /// Takes an answer the ping cookie accepted (its `sport` the probe's
    /// index); a host's first real answer makes it up.
    pub fn on_reply(&mut self, r: &super::Reply, now: Instant) -> Option<HostVerdict> {
        // The machine forgets the probe (and times the round trip).
        self.machine.on_reply_at(r, now)?;
        let host = key(r.src);
        let reason = crate::discovery::ping::up_reason(r);
        let p = self.pending.get_mut(&host)?;
        let Some(reason) = reason else {
            // A router's error: this probe is over.
            p.why = r.icmp;
            return self.one_less(r.src);
        };
        let first = p.first;
        self.pending.remove(&host);
        for i in probes_of(self.links, &self.plan, r.src) {
            self.machine.forget(r.src, i);
        }
        self.machine.source().skip(r.src);
        Some(HostVerdict {
            ip: r.src,
            up: true,
            reason,
            ttl: Some(r.ttl),
            latency: Some(now.saturating_duration_since(first)),
            mac: None,
        })
    }

    /// Takes an ARP reply or neighbour advertisement: an on-link host is up
    /// if it answers the request this discovery sent it (still
    /// outstanding, asked from the source `a` answers), with the MAC it gives.
    pub fn on_neighbour(&mut self, a: &Answer, now: Instant) -> Option<HostVerdict> {
        let hop = self.links.on_link(a.ip)?;
        if !a.answers(&hop) || !self.pending.contains_key(&key(a.ip)) {
            return None;
        }
        if !self.machine.answered_at(a.ip, neighbour::PROBE, now) {
            return None;
        }
        let p = self.pending.remove(&key(a.ip))?;
        self.machine.source().skip(a.ip);
        let reason = if a.ip.is_ipv4() { Reason::ArpResponse } else { Reason::NdResponse };
        let latency = Some(now.saturating_duration_since(p.first));
        Some(HostVerdict { ip: a.ip, up: true, reason, ttl: None, latency, mac: Some(a.mac) })
    }

    /// One of the host's probes is over without an answer: the host is
    /// down once all are.
    fn one_less(&mut self, ip: IpAddr) -> Option<HostVerdict> {
        let host = key(ip);
        let p = self.pending.get_mut(&host)?;
        p.left = p.left.saturating_sub(1);
        if p.left > 0 {
            return None;
        }
        let why = p.why.unwrap_or(Reason::NoResponse);
        self.pending.remove(&host);
        Some(HostVerdict { ip, up: false, reason: why, ttl: None, latency: None, mac: None })
    }

    /// Verdicts decided since the last call: hosts whose every probe was
    /// given up, and hosts without a path.
    pub fn take_decided(&mut self, out: &mut Vec<HostVerdict>) {
        for v in self.machine.take_silent() {
            if let Some(d) = self.one_less(v.ip) {
                out.push(d);
            }
        }
        out.extend(self.decided.borrow_mut().drain(..));
    }

    /// The hosts asked but not decided (after a stop: some of their probes
    /// never went; a resumed scan asks them again).
    pub fn unfinished(&self) -> impl Iterator<Item = IpAddr> + '_ {
        self.pending.keys().map(|&h| crate::targets::addrs::addr(h))
    }

    /// The ARP/NDP requests sent so far, retries included (among the
    /// machine's probes sent).
    pub fn requests(&self) -> u64 {
        self.requests
    }

    pub fn is_done(&self) -> bool {
        self.machine.is_done() && self.decided.borrow().is_empty()
    }
}

/// The ports of the hosts found up, as the port scan's machine takes them:
/// one pair from each host in turn (so no host gets a burst), each host's
/// ports in a keyed order (in order with `-r`). With a host timeout, a
/// host whose ports have been probed that long gets no more.
pub struct LiveFeed<'a> {
    hosts: VecDeque<Live>,
    ports: Arc<[u16]>,
    stride: usize,
    key: u64,
    sequential: bool,
    host_timeout: Option<Duration>,
    /// Hosts dropped by the host timeout, and how many ports each had left.
    pub timed_out: Vec<(IpAddr, usize)>,
    /// More hosts to take up (all taken as up, `-Pn`), at most `group` at once.
    source: Option<(Box<dyn Iterator<Item = IpAddr> + 'a>, usize)>,
}

struct Live {
    ip: IpAddr,
    start: usize,
    done: usize,
    since: Option<Instant>,
}

impl<'a> LiveFeed<'a> {
    pub fn new(ports: Arc<[u16]>, key: u64, sequential: bool, host_timeout: Option<Duration>) -> LiveFeed<'a> {
        let n = ports.len().max(1);
        // A stride coprime with n walks every port once.
        let mut stride = (key as usize % n) | 1;
        while gcd(stride, n) != 1 {
            stride += 2;
        }
        LiveFeed {
            hosts: VecDeque::new(),
            ports,
            stride: stride % n.max(2),
            key,
            sequential,
            host_timeout,
            timed_out: Vec::new(),
            source: None,
        }
    }

    /// Takes every host of `hosts` as up, `group` of them at a time.
    pub fn with_source(self, hosts: impl Iterator<Item = IpAddr> + 'a, group: usize) -> LiveFeed<'a> {
        LiveFeed { source: Some((Box::new(hosts), group.max(1))), ..self }
    }

    pub fn add(&mut self, ip: IpAddr) {
        if self.ports.is_empty() {
            return;
        }
        let start = if self.sequential { 0 } else { (crate::targets::addrs::key(ip) as u64 ^ self.key) as usize };
        self.hosts.push_back(Live { ip, start: start % self.ports.len(), done: 0, since: None });
    }
}

impl LiveFeed<'_> {
    /// Hosts with ports not yet taken.
    pub fn len(&self) -> usize {
        self.hosts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.hosts.is_empty()
    }

    /// The hosts with ports not yet taken (after a stop: what a resumed
    /// scan must take again).
    pub fn unfinished(&self) -> impl Iterator<Item = IpAddr> + '_ {
        self.hosts.iter().map(|h| h.ip)
    }
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

impl Iterator for LiveFeed<'_> {
    type Item = (IpAddr, u16);

    fn next(&mut self) -> Option<(IpAddr, u16)> {
        loop {
            if let Some((order, group)) = &mut self.source {
                if self.hosts.len() < *group {
                    if let Some(ip) = order.next() {
                        self.add(ip);
                        continue;
                    }
                    self.source = None;
                }
            }
            let mut h = self.hosts.pop_front()?;
            if let Some(limit) = self.host_timeout {
                let now = Instant::now();
                if now.saturating_duration_since(*h.since.get_or_insert(now)) >= limit {
                    self.timed_out.push((h.ip, self.ports.len() - h.done));
                    continue;
                }
            }
            let n = self.ports.len();
            let i = if self.sequential { h.done } else { (h.start + h.done * self.stride) % n };
            h.done += 1;
            let pair = (h.ip, self.ports[i]);
            if h.done < n {
                self.hosts.push_back(h);
            }
            return Some(pair);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// A stop between two of a host's discovery probes leaves it undecided,
    /// never down: it is among the unfinished, which a resumed scan asks
    /// again.
    #[test]
    fn a_stop_between_a_hosts_probes_leaves_it_unfinished() {
        use super::super::frame::Hop;
        use super::super::machine::{Pace, Seen};
        let ip = |s: &str| -> IpAddr { s.parse().unwrap() };
        let hop = Hop { src_mac: [2, 0, 0, 0, 0, 1], dst_mac: [2, 0, 0, 0, 0, 9], src: ip("198.18.0.1") };
        let links = Links::routed_for_tests(ip("198.51.100.7"), ip("198.51.100.7"), hop);
        let addrs = crate::targets::AddrSet::from_ranges(vec![(key(ip("198.51.100.7")), key(ip("198.51.100.7")))]);
        let hosts = crate::targets::TargetSpace::new(&addrs, &Default::default(), vec![0]).unwrap();
        let plan = Arc::new(HostPlan::nmap_default());
        assert!(plan.probes.len() > 1, "nmap's default asks a host several ways");
        let feed = PingFeed::new(hosts.order(3, crate::targets::Shard::WHOLE, 0), &links, plan);
        let pace = Pace { timeout: Duration::from_millis(100), retries: 0, window: 64, ..Pace::quiet() };
        let t0 = Instant::now();
        let mut d = Discovery::new(feed, |f| Machine::new(f, pace, t0, Seen::set()).report_silence());
        let mut due = Vec::new();
        d.machine.poll(t0, 1, &mut due);
        d.sent(&due, t0);
        assert_eq!(due.len(), 1, "one probe of the host's several: {due:?}");
        d.machine.stop();
        let mut decided = Vec::new();
        let mut now = t0;
        while !d.is_done() && now < t0 + Duration::from_secs(2) {
            now += Duration::from_millis(10);
            due.clear();
            d.machine.poll(now, 16, &mut due);
            assert!(due.is_empty(), "nothing more after the stop: {due:?}");
            d.take_decided(&mut decided);
        }
        assert!(decided.is_empty(), "not called down: {decided:?}");
        assert_eq!(d.unfinished().collect::<Vec<_>>(), [ip("198.51.100.7")]);
    }

    /// On-link hosts are asked by ARP/NDP, one request each and no other
    /// probe; a host is up only at the answer to its own request, from the
    /// source asked, with the MAC it gives; the rest are down once their
    /// requests (and their retries) are given up.
    #[test]
    fn on_link_hosts_are_up_only_when_they_answer_this_discoverys_request() {
        use super::super::frame::Hop;
        use super::super::machine::{Pace, Seen};
        for (src, lo, hi, live, other) in [
            ("198.18.0.1", "198.18.0.0", "198.18.0.9", "198.18.0.2", "198.18.0.3"),
            ("2001:2::1", "2001:2::", "2001:2::9", "2001:2::2", "2001:2::3"),
        ] {
            let ip = |s: &str| -> IpAddr { s.parse().unwrap() };
            let hop = Hop { src_mac: [2, 0, 0, 0, 0, 1], dst_mac: [0; 6], src: ip(src) };
            let links = Links::on_link_for_tests(ip(lo), ip(hi), hop);
            let addrs = crate::targets::AddrSet::from_ranges(vec![(key(ip(lo)), key(ip(hi)))]);
            let hosts = crate::targets::TargetSpace::new(&addrs, &Default::default(), vec![0]).unwrap();
            let plan = Arc::new(HostPlan { ping_only: true, ..HostPlan::nmap_default() });
            let feed = PingFeed::new(hosts.order(3, crate::targets::Shard::WHOLE, 0), &links, plan);
            let pace = Pace { timeout: Duration::from_secs(1), retries: 2, window: 1024, ..Pace::quiet() };
            let t0 = Instant::now();
            let mut d = Discovery::new(feed, |f| Machine::new(f, pace, t0, Seen::set()).report_silence().share_rtt());
            let mut due = Vec::new();
            d.machine.poll(t0, 64, &mut due);
            d.sent(&due, t0);
            assert_eq!(due.len(), 9, "one request a host, none to our own address: {due:?}");
            assert!(due.iter().all(|&(h, _)| h != ip(src)));
            assert!(due.iter().all(|&(_, i)| i == neighbour::PROBE), "no ICMP or TCP probe on-link: {due:?}");
            let mac = [2, 0, 0, 0, 0, 2];
            let answer = |from: &str, to: &str| Answer { ip: ip(from), mac, to: ip(to) };
            let t1 = t0 + Duration::from_millis(2);
            assert_eq!(d.on_neighbour(&answer(live, "198.18.0.99"), t1), None, "answers another source");
            assert_eq!(d.on_neighbour(&answer(if lo.contains(':') { "2001:3::2" } else { "10.0.0.2" }, src), t1), None);
            let v = d.on_neighbour(&answer(live, src), t1).expect("its answer makes it up");
            let reason = if lo.contains(':') { Reason::NdResponse } else { Reason::ArpResponse };
            assert_eq!((v.ip, v.up, v.reason, v.mac), (ip(live), true, reason, Some(mac)));
            assert_eq!(v.latency, Some(Duration::from_millis(2)));
            assert_eq!(d.on_neighbour(&answer(live, src), t1), None, "once");
            // The rest: their requests go again (twice), then they are down.
            let mut decided = Vec::new();
            let mut t = t1;
            for _ in 0..40 {
                t += Duration::from_millis(100);
                due.clear();
                d.machine.poll(t, 64, &mut due);
                d.sent(&due, t);
                assert!(due.iter().all(|&(h, i)| i == neighbour::PROBE && h != ip(live)), "{due:?}");
                d.take_decided(&mut decided);
            }
            assert!(d.is_done());
            assert_eq!(d.machine.counts().sent, 1 + 8 * 3, "three tries of each silent host");
            assert_eq!(d.requests(), d.machine.counts().sent, "all of them ARP/NDP requests");
            assert_eq!(decided.len(), 9, "8 silent hosts and our own address");
            assert!(decided.iter().all(|v| !v.up && v.reason == Reason::NoResponse && v.mac.is_none()));
            // A late answer changes nothing.
            assert_eq!(d.on_neighbour(&answer(other, src), t), None);
        }
    }

    #[test]
    fn the_live_feed_gives_every_port_of_every_host_once_in_turns() {
        let ports: Arc<[u16]> = (1..=10u16).collect::<Vec<_>>().into();
        let mut f = LiveFeed::new(ports, 0xfeed, false, None);
        let (a, b): (IpAddr, IpAddr) = ("198.18.0.2".parse().unwrap(), "198.18.0.3".parse().unwrap());
        f.add(a);
        f.add(b);
        let got: Vec<_> = f.by_ref().take(20).collect();
        assert_eq!(got.iter().copied().collect::<HashSet<_>>().len(), 20);
        assert!(got.chunks(2).all(|c| c[0].0 == a && c[1].0 == b), "hosts take turns: {got:?}");
        assert_eq!(f.next(), None, "then nothing, until a host is added");
        f.add(a);
        assert!(f.next().is_some());
        // -r: in order.
        let mut seq = LiveFeed::new(Arc::from(vec![5u16, 7, 9]), 3, true, None);
        seq.add(a);
        assert_eq!(seq.map(|p| p.1).collect::<Vec<_>>(), vec![5, 7, 9]);
    }

    #[test]
    fn hosts_taken_as_up_are_scanned_a_group_at_a_time() {
        let addrs = crate::targets::AddrSet::from_ranges(vec![(
            crate::targets::addrs::key("198.18.2.0".parse().unwrap()),
            crate::targets::addrs::key("198.18.2.9".parse().unwrap()),
        )]);
        let hosts = crate::targets::TargetSpace::new(&addrs, &Default::default(), vec![0]).unwrap();
        let ports: Arc<[u16]> = (1..=4u16).collect::<Vec<_>>().into();
        let f = LiveFeed::new(ports, 7, false, None)
            .with_source(hosts.order(1, crate::targets::Shard::WHOLE, 0).map(|(ip, _)| ip), 3);
        let got: Vec<(IpAddr, u16)> = f.collect();
        assert_eq!(got.len(), 40, "every port of every host");
        // Every window of the stream holds at most 3 hosts with ports left.
        let mut live: Vec<IpAddr> = Vec::new();
        let mut left: std::collections::HashMap<IpAddr, usize> = Default::default();
        for (ip, _) in &got {
            if !live.contains(ip) {
                live.push(*ip);
            }
            *left.entry(*ip).or_insert(4) -= 1;
            if left[ip] == 0 {
                live.retain(|h| h != ip);
            }
            assert!(live.len() <= 3, "{} hosts at once", live.len());
        }
    }

    #[test]
    fn a_host_timeout_drops_the_hosts_ports_that_are_left() {
        let ports: Arc<[u16]> = (1..=100u16).collect::<Vec<_>>().into();
        let mut f = LiveFeed::new(ports, 1, false, Some(Duration::from_millis(30)));
        let a: IpAddr = "198.18.0.2".parse().unwrap();
        f.add(a);
        assert_eq!(f.by_ref().take(10).count(), 10);
        std::thread::sleep(Duration::from_millis(40));
        assert_eq!(f.next(), None);
        assert_eq!(f.timed_out, vec![(a, 90)]);
    }
}
