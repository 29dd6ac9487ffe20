//! Raw scans (SYN, nmap's other TCP probes, UDP): stateless, streaming.
//!
//! In: a scan order, the resolved [`Links`] of its targets, a [`Timing`](crate::discovery::Timing) and
//! a key (and for UDP, each port's [`Payloads`]). Out: `port` events the
//! moment a SYN-ACK, a UDP answer (or, when asked, a RST or an ICMP port
//! unreachable) comes back, and counters in [`Stats`].
//!
//! Two threads: this one runs the [`Machine`] (which probe to send when),
//! builds frames from a [`Template`] and sends them in batches; a receiver
//! thread takes frames in batches, parses them and keeps only replies whose
//! ack matches the probe's keyed [`Cookie`] (and, with host discovery, ARP
//! replies and neighbour advertisements, which each sender thread checks
//! against the requests its discovery sent on-link). The kernel answers
//! SYN-ACKs to our half-open probes with a RST itself (it has no socket for
//! them), which is what we want: the target's half-open connection goes
//! away, and the result was already taken from the SYN-ACK.

pub mod cookie;
pub mod frame;
pub mod hosts;
pub mod lanes;
pub mod links;
pub mod machine;
pub mod neighbour;
pub mod reply;

use std::io;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use cookie::Cookie;
pub use frame::{Hop, Template};
pub use links::{LinkOptions, Links};
pub use machine::{Counts, Machine, Pace, Seen, Verdict};
pub use reply::Reply;

use crate::discovery::control::Class;
use crate::discovery::pacer::Pacer;
use crate::discovery::PaceTold;
use hosts::{Discovery, HostVerdict, LiveFeed, PingFeed};
use pnet_packet::tcp::TcpFlags;

use super::payloads::Payloads;
use super::ping::{self, HostPlan, PingCookie, PingProbe};
use crate::findings::{Event, HostState, PortEvent, PortState, Proto, ScanType};
use crate::pipeline::{Found, Stats};
use crate::raw::packet::{Checksum, PacketSocket, BATCH, FRAME};
use crate::targets::addrs::key;
use crate::targets::{ScanOrder, TargetSpace};

/// Socket buffers: room for a burst of replies while the thread is busy.
const SOCKET_BUFFER: usize = 64 << 20;

/// Which worker's probe a UDP answer (parsed from `frame`) answers, and the
/// answer as that probe's: from the port probed, or (TFTP) from another
/// port of the target, answering a probe to one of the ports whose servers
/// do that. Where the port's protocol echoes our transaction id, the
/// answer must carry it.
pub fn accept_udp(cookie: Cookie, payloads: &Payloads, r: Reply, frame: &[u8]) -> Option<(usize, Reply)> {
    let probed = std::iter::once(r.sport).chain(payloads.roaming().iter().copied().filter(|&p| p != r.sport));
    for port in probed {
        let mut a = Reply { sport: port, ..r };
        if let Some((at, len)) = payloads.echo(port) {
            if !a.echo(frame, at, len) {
                continue;
            }
        }
        if let Some((w, attempt)) = cookie.accepts_try(&a) {
            return Some((w, Reply { attempt, ..a }));
        }
    }
    None
}

/// Options of a SYN scan beyond timing.
#[derive(Clone, Copy, Debug)]
pub struct SynOptions {
    pub pace: Pace,
    /// Report closed ports (RST) as events too, not only count them.
    pub report_closed: bool,
    /// Key of the probe cookies.
    pub key: (u64, u64),
    /// Sending threads, each with its own share of the targets (one per core).
    pub workers: usize,
    /// Which raw scan: SYN, or one of nmap's other TCP probes.
    pub kind: ScanType,
    /// The rates the scan keeps to (its congestion control's).
    pub limits: crate::discovery::Limits,
}

/// The TCP flags of a scan type's probes.
pub fn probe_flags(kind: ScanType) -> u8 {
    use pnet_packet::tcp::TcpFlags;
    match kind {
        ScanType::Syn | ScanType::Connect => TcpFlags::SYN,
        ScanType::Ack | ScanType::Window => TcpFlags::ACK,
        ScanType::Fin => TcpFlags::FIN,
        ScanType::Null => 0,
        ScanType::Xmas => TcpFlags::FIN | TcpFlags::PSH | TcpFlags::URG,
        ScanType::Maimon => TcpFlags::FIN | TcpFlags::ACK,
        ScanType::Udp => 0,
    }
}

/// Whether a scan type reports a port in this state without being asked
/// for closed ones: what says something in that scan.
fn reports(kind: ScanType, state: PortState) -> bool {
    match kind {
        ScanType::Syn | ScanType::Connect => state == PortState::Open,
        ScanType::Ack => matches!(state, PortState::Unfiltered | PortState::Filtered),
        ScanType::Window => matches!(state, PortState::Open | PortState::Filtered),
        ScanType::Fin | ScanType::Null | ScanType::Xmas | ScanType::Maimon => {
            matches!(state, PortState::OpenFiltered | PortState::Filtered)
        }
        ScanType::Udp => matches!(state, PortState::Open | PortState::OpenFiltered | PortState::Filtered),
    }
}

/// Host discovery ahead of a raw scan's ports.
#[derive(Clone, Debug)]
pub struct HostScan {
    /// The discovery probes; `None` takes every host as up (`-Pn`, used
    /// with a host timeout, which needs hosts scanned a group at a time).
    pub plan: Option<Arc<HostPlan>>,
    /// Every target with its ports: what the port scan of the hosts found covers.
    pub ports: TargetSpace,
    /// Neither report nor count hosts (the second protocol of `-sS -sU`,
    /// whose hosts the first reports).
    pub quiet: bool,
    /// Most time spent on one host's ports (`--host-timeout`).
    pub host_timeout: Option<Duration>,
}

/// Hosts scanned at once when every host is taken as up with a host
/// timeout (nmap's host group).
const HOST_GROUP: usize = 256;

/// Fewer hosts than this go to one sender thread.
const FEW_HOSTS: u64 = 1024;

/// Runs the raw scan of `order`, reporting to `found`; a UDP scan sends
/// each port its datagram from `payloads`. With `hosts`, `order` walks the
/// hosts (each address once) and their ports are scanned as they are found
/// up. Returns whether the scan's stop cut it short.
pub fn run(
    order: ScanOrder,
    links: &Links,
    opts: SynOptions,
    payloads: &Payloads,
    found: &Found,
    hosts: Option<&HostScan>,
) -> io::Result<bool> {
    // Slow scans gain nothing from more senders; fast ones share the scan's pace.
    // A scan delay is per host, and one sender sees all of a host's probes.
    let slow = opts.pace.max_rate.is_some_and(|r| r < 1000.0) || opts.pace.scan_delay.is_some();
    // Senders split the hosts when the order walks hosts: with few hosts,
    // one sender would hold them all and the others' share of the rate
    // would go unused.
    let few_hosts = hosts.is_some() && order.remaining() < FEW_HOSTS;
    // UDP: one sender sees all of a host's ports, as its lanes must (a
    // host's ICMP limit is one, syn::lanes).
    let udp = opts.kind == ScanType::Udp;
    let workers = if slow || few_hosts || udp { 1 } else { opts.workers.clamp(1, 16) };
    let cookie = Cookie::new(opts.key.0, opts.key.1, workers as u16).for_scan(opts.kind);
    let plan = hosts.and_then(|h| h.plan.clone());
    let ping = plan.as_ref().map(|p| PingCookie::new(opts.key.0, opts.key.1, workers as u16, &p.probes));
    let sock = PacketSocket::open(links.ifindex)?;
    sock.tune(SOCKET_BUFFER)?;
    // Bounded: when the senders lag, replies wait in the socket buffer, not in our heap.
    let (outs, ins): (Vec<_>, Vec<_>) = (0..workers).map(|_| std_mpsc::sync_channel::<Vec<Tagged>>(64)).unzip();
    let quit = AtomicBool::new(false);
    let pace = Pace {
        window: opts.pace.window.div_ceil(workers),
        max_rate: opts.pace.max_rate.map(|r| r / workers as f64),
        ..opts.pace
    };
    // One pace for the whole scan: every sender takes its turns from it
    // (a finished sender's share goes to the others).
    let pacer = Pacer::new(opts.limits, pace.timeout, Instant::now());
    // OS detection's probes, going out beside the TCP pass, share its pace.
    if let Some(seen) = found.ctx.os_seen.as_ref().filter(|_| !udp) {
        seen.set_pacer(pacer.clone());
    }
    let hints = found.ctx.hints.as_deref();
    std::thread::scope(|s| {
        let receiver = s.spawn(|| receive(&sock, cookie, ping.as_ref(), payloads, &outs, &quit, hints));
        let drivers: Vec<_> = order
            .split(workers as u64)
            .into_iter()
            .zip(ins)
            .enumerate()
            .map(|(w, (part, replies))| {
                let shared = Senders {
                    links,
                    opts: SynOptions { pace, ..opts },
                    pacer: pacer.clone(),
                    cookie,
                    ping: ping.as_ref(),
                    tx: &sock,
                    found,
                    payloads,
                    hosts,
                };
                s.spawn(move || drive(&shared, w, part, &replies))
            })
            .collect();
        let mut result = Ok(false);
        for d in drivers {
            match d.join() {
                Ok(Ok(cut)) => {
                    if let Ok(any) = &mut result {
                        *any |= cut;
                    }
                }
                Ok(Err(e)) => result = Err(e),
                Err(_) => result = Err(io::Error::other("a sender thread panicked")),
            }
        }
        quit.store(true, Ordering::Relaxed);
        found.ctx.stats.rate.store(0, Ordering::Relaxed);
        match receiver.join() {
            Ok(Ok(())) => result,
            Ok(Err(e)) => Err(e),
            Err(_) => Err(io::Error::other("the receiver thread panicked")),
        }
    })
}

/// A validated reply, as the receiver hands it to a sender thread.
#[derive(Clone, Copy, Debug)]
enum Tagged {
    /// An answer to a port probe.
    Port(Reply),
    /// An answer to a discovery probe (its `sport` the probe's index).
    Ping(Reply),
    /// An ARP reply or neighbour advertisement (each sender thread keeps
    /// those that answer its own requests).
    Neighbour(neighbour::Answer),
}

/// The receiver thread: frames in, validated replies out to the worker whose
/// probe they answer, until `quit`.
fn receive(
    sock: &PacketSocket,
    cookie: Cookie,
    ping: Option<&PingCookie>,
    payloads: &Payloads,
    outs: &[std_mpsc::SyncSender<Vec<Tagged>>],
    quit: &AtomicBool,
    hints: Option<&crate::os::hints::Hints>,
) -> io::Result<()> {
    let mut bufs = vec![[0u8; FRAME]; BATCH];
    let mut lens = [0usize; BATCH];
    let mut sums = [Checksum::Unchecked; BATCH];
    let mut per: Vec<Vec<Tagged>> = vec![Vec::new(); outs.len()];
    while !quit.load(Ordering::Relaxed) {
        let n = sock.recv_batch(&mut bufs, &mut lens, &mut sums, Duration::from_millis(5))?;
        for i in 0..n {
            let f = &bufs[i][..lens[i]];
            let Some(r) = reply::parse(f, sums[i]) else {
                // Only discovery asks on-link hosts; which thread asked is its own to know.
                if let Some(a) = ping.and_then(|_| neighbour::parse(f, sums[i])) {
                    per.iter_mut().for_each(|batch| batch.push(Tagged::Neighbour(a)));
                }
                continue;
            };
            // The port scan's replies first (most replies), then discovery's.
            let port = if r.proto == Proto::Tcp || r.icmp.is_some() {
                cookie.accepts_try(&r).map(|(w, attempt)| (w, Reply { attempt, ..r }))
            } else {
                accept_udp(cookie, payloads, r, f)
            };
            if let Some((w, a)) = port {
                // The passive OS hint reads the host's first SYN-ACK.
                if let Some(h) = hints.filter(|_| a.is_syn_ack()) {
                    h.saw(a.src, f);
                }
                per[w].push(Tagged::Port(a));
            } else if let Some((w, a)) = ping.and_then(|p| p.accepts(&r)) {
                per[w].push(Tagged::Ping(a));
            }
        }
        for (w, batch) in per.iter_mut().enumerate() {
            if !batch.is_empty() {
                // A worker that has finished no longer listens; its replies are late duplicates.
                let _ = outs[w].send(std::mem::take(batch));
            }
        }
    }
    Ok(())
}

/// What every sender thread shares: the paths to the targets, the pacing,
/// the probe cookies, the socket, and where open ports go.
struct Senders<'a> {
    links: &'a Links,
    opts: SynOptions,
    /// The scan's one pace.
    pacer: Pacer,
    cookie: Cookie,
    ping: Option<&'a PingCookie>,
    tx: &'a PacketSocket,
    found: &'a Found,
    payloads: &'a Payloads,
    hosts: Option<&'a HostScan>,
}

/// The port scan's pairs: the scan order itself, or the ports of the
/// hosts discovery finds.
enum Targets<'a> {
    Order(Box<dyn Iterator<Item = (IpAddr, u16)> + 'a>),
    Live(Box<LiveFeed<'a>>),
}

impl Iterator for Targets<'_> {
    type Item = (IpAddr, u16);

    fn next(&mut self) -> Option<(IpAddr, u16)> {
        match self {
            Targets::Order(o) => o.next(),
            Targets::Live(f) => f.next(),
        }
    }
}

/// One sender thread: probes `order` (its share of the scan) and reads the
/// replies the receiver thread hands it.
fn drive(
    shared: &Senders,
    worker: usize,
    order: ScanOrder,
    replies: &std_mpsc::Receiver<Vec<Tagged>>,
) -> io::Result<bool> {
    // Targets without a usable path are counted as filtered, never sent.
    let unreachable = std::rc::Rc::new(std::cell::Cell::new(0u64));
    let count = unreachable.clone();
    let reachable = move |&(ip, _): &(IpAddr, u16)| {
        let ok = shared.links.hop(ip).is_ok();
        if !ok {
            count.set(count.get() + 1);
        }
        ok
    };
    let mut w = Worker::new(shared, worker, &order);
    let (mut m, mut disc) = machines(shared, order, reachable);
    let mut frames = Frames::new(shared.opts.kind);
    let mut due: Vec<(IpAddr, u16)> = Vec::with_capacity(BATCH);
    let mut pings: Vec<(IpAddr, u16)> = Vec::with_capacity(BATCH);
    let mut decided = Vec::new();
    let mut published = Published::default();
    let mut closed = disc.is_none();
    loop {
        while let Ok(batch) = replies.try_recv() {
            w.take(&mut m, &mut disc, batch);
        }
        if !w.stopped && shared.found.ctx.stop.is_set() {
            w.stopped = true;
            m.stop();
            if let Some(d) = &mut disc {
                d.machine.stop();
            }
        }
        let now = Instant::now();
        due.clear();
        pings.clear();
        if let Some(d) = &mut disc {
            w.discover(&mut m, d, now, &mut pings, &mut decided);
            if !closed && d.is_done() {
                closed = true;
                m.close();
            }
        }
        m.poll(now, BATCH - pings.len(), &mut due);
        for v in m.take_silent() {
            w.tell(v);
        }
        w.host_timeouts(&mut m);
        if !due.is_empty() || !pings.is_empty() {
            let n = frames.pings(&w, &pings, 0);
            let n = frames.ports(&w, &m, &due, n);
            send_all(shared.tx, &frames.bufs[..n], &frames.lens[..n])?;
            w.tally(&m, &disc, &mut published, unreachable.get(), now);
            continue;
        }
        w.tally(&m, &disc, &mut published, unreachable.get(), now);
        if m.is_done() && disc.as_ref().is_none_or(Discovery::is_done) {
            if w.stopped {
                w.redo_unfinished(&mut m, &disc);
            }
            break;
        }
        match replies.recv_timeout(next_wait(&mut m, &disc, now)) {
            Ok(batch) => w.take(&mut m, &mut disc, batch),
            Err(std_mpsc::RecvTimeoutError::Timeout) => {}
            Err(std_mpsc::RecvTimeoutError::Disconnected) => return Err(io::Error::other("receiver stopped")),
        }
    }
    Ok(w.stopped)
}

/// A sender thread's port scan machine over `order`'s pairs (those
/// `reachable`) or over the ports of the hosts found up, and with host
/// discovery, the discovery's machine.
fn machines<'a>(
    shared: &'a Senders<'a>,
    order: ScanOrder,
    reachable: impl FnMut(&(IpAddr, u16)) -> bool + 'a,
) -> (Machine<Targets<'a>>, Option<Discovery<'a>>) {
    let pace = shared.opts.pace;
    let t0 = Instant::now();
    let mut disc: Option<Discovery> = None;
    // The one owner of the rate: both machines (and the other senders) take their turns from it.
    let pacer = &shared.pacer;
    let m = match shared.hosts {
        None => {
            let seen = Seen::for_space(order.space());
            Machine::new(Targets::Order(Box::new(order.filter(reachable))), pace, t0, seen)
                .paced_by(pacer.clone(), Class::Port)
        }
        Some(h) => {
            let sequential = h.ports.is_sequential();
            let feed = LiveFeed::new(h.ports.ports().into(), shared.opts.key.0, sequential, h.host_timeout);
            let seen = Seen::for_space(&h.ports);
            match &h.plan {
                None => {
                    let hosts = order.filter(reachable).map(|(ip, _)| ip);
                    Machine::new(Targets::Live(Box::new(feed.with_source(hosts, HOST_GROUP))), pace, t0, seen)
                        .paced_by(pacer.clone(), Class::Port)
                }
                Some(plan) => {
                    let pings = PingFeed::new(order, shared.links, plan.clone());
                    disc = Some(Discovery::new(pings, |f| {
                        Machine::new(f, pace, t0, Seen::set())
                            .paced_by(pacer.clone(), Class::Ping)
                            .report_silence()
                            .share_rtt()
                            .quick_probe(neighbour::PROBE, neighbour::FIRST_WAIT)
                    }));
                    Machine::new(Targets::Live(Box::new(feed)), pace, t0, seen)
                        .paced_by(pacer.clone(), Class::Port)
                        .open_ended()
                }
            }
        }
    };
    (m.for_scan(shared.opts.kind).report_silence(), disc)
}

/// What one sender thread keeps beside its machines: how it reports
/// verdicts, the MACs its discovery learned, whether the scan's stop came.
struct Worker<'a> {
    shared: &'a Senders<'a>,
    /// Its index among the senders (its probes' cookies carry it).
    index: usize,
    udp: bool,
    proto: Proto,
    plan: Option<Arc<HostPlan>>,
    /// Neither report nor count hosts.
    quiet: bool,
    /// Where a stop's unfinished hosts go (an order that walks hosts).
    progress: Option<Arc<crate::targets::Progress>>,
    /// MACs of the on-link hosts this thread's discovery found up.
    learned: std::collections::HashMap<u128, [u8; 6]>,
    /// The scan's stop came: the probes still out are given up.
    stopped: bool,
}

impl<'a> Worker<'a> {
    fn new(shared: &'a Senders<'a>, index: usize, order: &ScanOrder) -> Worker<'a> {
        let udp = shared.opts.kind == ScanType::Udp;
        Worker {
            shared,
            index,
            udp,
            proto: if udp { Proto::Udp } else { Proto::Tcp },
            plan: shared.hosts.and_then(|h| h.plan.clone()),
            quiet: shared.hosts.is_none_or(|h| h.quiet),
            progress: order.progress().filter(|_| shared.hosts.is_some_and(|h| h.plan.is_some())),
            learned: Default::default(),
            stopped: false,
        }
    }

    /// The way to `ip`: its route, or for an on-link host discovery found
    /// up, the MAC it answered from.
    fn path(&self, ip: IpAddr) -> Option<Hop> {
        let hop = self.shared.links.hop(ip).ok();
        hop.or_else(|| Some(Hop { dst_mac: *self.learned.get(&key(ip))?, ..self.shared.links.on_link(ip)? }))
    }

    /// A port decided: its event (or its count among the ports not shown),
    /// and its host's progress towards OS detection.
    fn tell(&self, v: Verdict) {
        let shared = self.shared;
        // The host itself answered (a router's ICMP error filters a port
        // but says nothing of the host): -Pn reports it up.
        let from_host = matches!(v.state, PortState::Open | PortState::Closed | PortState::Unfiltered);
        if let Some(hosts) = shared.found.ctx.latency.as_ref().filter(|_| from_host) {
            hosts.answered(v.ip, v.rtt);
        }
        if reports(shared.opts.kind, v.state) || shared.opts.report_closed {
            // Waits while the next stage is full: no probe goes out
            // meanwhile, so a slow stage slows the scan.
            shared.found.port_blocking(PortEvent {
                scan_id: shared.found.ctx.scan_id.clone(),
                ip: v.ip,
                port: v.port,
                proto: self.proto,
                state: v.state,
                reason: v.reason,
                ttl: v.ttl,
                t: shared.found.ctx.t(),
            });
        } else if v.reason != crate::findings::Reason::NoResponse {
            shared.found.unshown(v.ip, self.proto, v.port, v.state, v.reason);
        }
        // Once its events are out: a host whose every TCP port is decided
        // goes on to OS detection while the scan goes on.
        if let Some(seen) = shared.found.ctx.os_seen.as_ref().filter(|_| !self.udp) {
            seen.decided(v.ip);
        }
    }

    /// A host decided: reported, counted, and if up its ports go to the port scan.
    fn host(&mut self, m: &mut Machine<Targets>, v: HostVerdict) {
        // A stop gives up the probes still out: their silence says
        // nothing, and a resumed scan asks the host again.
        if !v.up && self.stopped {
            if let Some(p) = &self.progress {
                p.redo(v.ip);
            }
            return;
        }
        if !self.quiet {
            let stats = &self.shared.found.ctx.stats;
            Stats::bump(if v.up { &stats.hosts_up } else { &stats.hosts_down });
            if v.up || self.plan.as_ref().is_some_and(|p| p.report_down) {
                let ctx = &self.shared.found.ctx;
                let state = if v.up { HostState::Up } else { HostState::Down };
                let mut ev = ping::host_event(ctx, v.ip, state, v.reason, v.ttl);
                ev.latency = v.latency.map(|d| d.as_secs_f64());
                ev.mac = v.mac.map(ping::mac_text);
                ctx.emit_blocking(Event::Host(ev));
            }
        }
        if let Some(mac) = v.mac.filter(|_| v.up) {
            self.learned.insert(key(v.ip), mac);
        }
        if v.up && !self.plan.as_ref().is_some_and(|p| p.ping_only) {
            if let Targets::Live(f) = m.feed() {
                f.add(v.ip);
            }
        }
    }

    /// A batch of replies from the receiver thread, each to its machine.
    fn take(&mut self, m: &mut Machine<Targets>, disc: &mut Option<Discovery>, batch: Vec<Tagged>) {
        let now = Instant::now();
        for t in &batch {
            match t {
                Tagged::Port(r) => {
                    if let Some(v) = m.on_reply_at(r, now) {
                        self.tell(v);
                    }
                }
                Tagged::Ping(r) => {
                    if let Some(v) = disc.as_mut().and_then(|d| d.on_reply(r, now)) {
                        self.host(m, v);
                    }
                }
                Tagged::Neighbour(a) => {
                    if let Some(v) = disc.as_mut().and_then(|d| d.on_neighbour(a, now)) {
                        self.host(m, v);
                    }
                }
            }
        }
    }

    /// Discovery's turn: its probes due into `pings` (they go first, under
    /// the same pace), and the hosts it decided.
    fn discover(
        &mut self,
        m: &mut Machine<Targets>,
        d: &mut Discovery,
        now: Instant,
        pings: &mut Vec<(IpAddr, u16)>,
        decided: &mut Vec<HostVerdict>,
    ) {
        // Discovery waits while the port scan has MAX_LIVE hosts to go
        // (nmap's host groups): what is held, and what a stop leaves
        // to redo, stays bounded.
        let room = if live_full(m) { 0 } else { BATCH };
        d.machine.poll(now, room, pings);
        d.sent(pings, now);
        d.take_decided(decided);
        for v in decided.drain(..) {
            self.host(m, v);
        }
    }

    /// The hosts the host timeout gave up: an error each, with the ports left.
    fn host_timeouts(&self, m: &mut Machine<Targets>) {
        if let Targets::Live(f) = m.source() {
            for (ip, left) in std::mem::take(&mut f.timed_out) {
                let ctx = &self.shared.found.ctx;
                let message = format!("host timeout: {left} port(s) left unscanned");
                ctx.emit_blocking(ctx.error(Some(ip), None, None, crate::error::ErrorKind::Timeout, message));
            }
        }
    }

    /// The counters and the pace published, the timing events emitted.
    fn tally(
        &self,
        m: &Machine<Targets>,
        disc: &Option<Discovery>,
        published: &mut Published,
        unreachable: u64,
        now: Instant,
    ) {
        let ctx = &self.shared.found.ctx;
        publish(&ctx.stats, published, counts(m, disc), unreachable);
        pace_report(ctx, &self.shared.pacer, self.index == 0, &mut published.pace, now);
    }

    /// After a stop: hosts found up with ports the stop left unprobed, and
    /// hosts asked but undecided (a stop between two of their probes), go
    /// to the progress to be done again.
    fn redo_unfinished(&self, m: &mut Machine<Targets>, disc: &Option<Discovery>) {
        if let (Some(p), Targets::Live(f)) = (&self.progress, m.source()) {
            f.unfinished().for_each(|ip| p.redo(ip));
            disc.iter().flat_map(|d| d.unfinished()).for_each(|ip| p.redo(ip));
        }
    }
}

/// A sender's batch of frames, built in place from its templates.
struct Frames {
    /// The scan's own probes (IPv4, IPv6).
    probes: [Template; 2],
    /// Discovery's TCP SYN and ACK pings.
    syn: [Template; 2],
    ack: [Template; 2],
    /// Room for a UDP payload carrying its transaction id.
    scratch: [u8; frame::MAX_UDP_PAYLOAD],
    bufs: Vec<Vec<u8>>,
    lens: [usize; BATCH],
}

impl Frames {
    fn new(kind: ScanType) -> Frames {
        let flags = probe_flags(kind);
        let longest = if kind == ScanType::Udp { frame::MAX_UDP_PROBE } else { frame::MAX_PROBE };
        Frames {
            probes: [Template::with_flags(false, flags), Template::with_flags(true, flags)],
            syn: [Template::new(false), Template::new(true)],
            ack: [Template::with_flags(false, TcpFlags::ACK), Template::with_flags(true, TcpFlags::ACK)],
            scratch: [0u8; frame::MAX_UDP_PAYLOAD],
            bufs: vec![vec![0u8; longest.max(frame::MAX_PING).max(neighbour::MAX_REQUEST)]; BATCH],
            lens: [0usize; BATCH],
        }
    }

    /// Discovery's probes `pings` (ARP/NDP requests for on-link hosts)
    /// into the frames from `n` on; returns the frames now filled.
    fn pings(&mut self, w: &Worker, pings: &[(IpAddr, u16)], mut n: usize) -> usize {
        let shared = w.shared;
        if let (Some(pc), Some(plan)) = (shared.ping, w.plan.as_deref()) {
            for &(ip, idx) in pings {
                if idx == neighbour::PROBE {
                    let Some(hop) = shared.links.on_link(ip) else { continue };
                    self.lens[n] = neighbour::fill_request(&mut self.bufs[n], &hop, ip);
                    n += usize::from(self.lens[n] > 0);
                    continue;
                }
                // Only reachable hosts are pinged (PingFeed).
                let Ok(hop) = shared.links.hop(ip) else { continue };
                let (seq, sport) = pc.probe(hop.src, ip, idx, w.index);
                let v6 = usize::from(ip.is_ipv6());
                let f = &mut self.bufs[n];
                self.lens[n] = match plan.probes[usize::from(idx)] {
                    PingProbe::Icmp(p) => frame::fill_icmp(f, &hop, ip, p, sport, seq as u16).unwrap_or(0),
                    PingProbe::Syn(port) => self.syn[v6].fill(f, &hop, ip, sport, port, seq, seq as u16),
                    PingProbe::Ack(port) => self.ack[v6].fill(f, &hop, ip, sport, port, seq, seq as u16),
                    PingProbe::Udp(port) => frame::fill_udp(f, &hop, ip, sport, port, seq as u16, &[]),
                };
                n += usize::from(self.lens[n] > 0);
            }
        }
        n
    }

    /// The port probes `due` into the frames from `n` on; returns the
    /// frames now filled.
    fn ports(&mut self, w: &Worker, m: &Machine<Targets>, due: &[(IpAddr, u16)], mut n: usize) -> usize {
        for &(ip, port) in due {
            // A target without a path (taken as up with -Pn) is never sent to.
            let Some(hop) = w.path(ip) else { continue };
            let (seq, sport) = w.shared.cookie.probe_try(hop.src, ip, port, w.index, m.attempt(ip, port));
            self.lens[n] = if w.udp {
                let body = w.shared.payloads.get(port).map_or(&[][..], |p| p.with_id(seq, &mut self.scratch));
                frame::fill_udp(&mut self.bufs[n], &hop, ip, sport, port, seq as u16, body)
            } else {
                self.probes[usize::from(ip.is_ipv6())].fill(&mut self.bufs[n], &hop, ip, sport, port, seq, seq as u16)
            };
            n += 1;
        }
        n
    }
}

/// How long a sender may wait for replies: until its next wakeup
/// (discovery's too, unless the port scan is full), 5 ms at most.
fn next_wait(m: &mut Machine<Targets>, disc: &Option<Discovery>, now: Instant) -> Duration {
    let mut wake = m.next_wakeup(now);
    if let Some(d) = disc.as_ref().filter(|_| !live_full(m)) {
        let w = d.machine.next_wakeup(now);
        wake = match (wake, w) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
    let wait = wake.map_or(Duration::from_millis(5), |t| t.saturating_duration_since(now));
    wait.min(Duration::from_millis(5))
}

/// Most hosts found up waiting in one sender's port scan before its
/// discovery waits for them (8,192 made the lab's default /16 sweep a
/// fifth slower).
const MAX_LIVE: usize = 65_536;

fn live_full(m: &mut Machine<Targets>) -> bool {
    matches!(m.source(), Targets::Live(f) if f.len() >= MAX_LIVE)
}

/// The port scan's counts, with discovery's IP probes counted as sent
/// (its ARP/NDP requests are not: the link's business, as a gateway's are).
fn counts(m: &Machine<Targets>, disc: &Option<Discovery>) -> Counts {
    let mut c = m.counts();
    if let Some(d) = disc {
        c.sent += d.machine.counts().sent - d.requests();
    }
    c
}

/// Sends every frame, waiting briefly whenever the kernel's queue is full.
pub(super) fn send_all(tx: &PacketSocket, frames: &[Vec<u8>], lens: &[usize]) -> io::Result<()> {
    let views: Vec<&[u8]> = frames.iter().zip(lens).map(|(f, &n)| &f[..n]).collect();
    let mut sent = 0;
    let mut stalls = 0u32;
    while sent < views.len() {
        let n = tx.send_batch(&views[sent..])?;
        if n == 0 {
            stalls += 1;
            if stalls > 20_000 {
                return Err(io::Error::other("the interface accepts no more frames"));
            }
            std::thread::sleep(Duration::from_micros(50));
        }
        sent += n;
    }
    Ok(())
}

/// What one worker has added to the shared counters so far.
#[derive(Default)]
struct Published {
    counts: Counts,
    unreachable: u64,
    pace: PaceTold,
}

/// Publishes the scan's pace and emits its `timing` events (the periodic
/// one from the first sender alone).
fn pace_report(ctx: &crate::pipeline::Ctx, pacer: &Pacer, periodic: bool, last: &mut PaceTold, now: Instant) {
    for e in super::pace_events(ctx, pacer, periodic, last, now) {
        ctx.emit_blocking(e);
    }
}

/// Adds what changed since the last call to the shared counters (a late
/// answer moves a port from filtered to open, so a delta may be negative:
/// wrapping arithmetic adds it correctly).
fn publish(stats: &Stats, last: &mut Published, now: Counts, unreachable: u64) {
    let add = |c: &std::sync::atomic::AtomicU64, new: u64, old: u64| {
        if new != old {
            c.fetch_add(new.wrapping_sub(old), Ordering::Relaxed);
        }
    };
    add(&stats.sent, now.sent, last.counts.sent);
    add(&stats.open, now.open, last.counts.open);
    add(&stats.closed, now.closed, last.counts.closed);
    add(&stats.filtered, now.filtered + unreachable, last.counts.filtered + last.unreachable);
    last.counts = now;
    last.unreachable = unreachable;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::ProbeDb;

    fn payloads() -> Payloads {
        let yaml = r#"
probes:
  - name: Dns
    protocol: udp
    payload: '\x00\x00query'
    ports: [53]
    txid: {at: 0, len: 2, reply_at: 0}
  - name: Tftp
    protocol: udp
    payload: '\x00\x01nothing\x00octet\x00'
    ports: [69]
    answers_from_any_port: true
"#;
        let mut db = ProbeDb::default();
        db.add_str(yaml, std::path::Path::new("t.yaml")).unwrap();
        Payloads::from_db(&db)
    }

    /// The answer frame `from:sport -> to:dport` carrying `payload`.
    fn answer(from: &str, sport: u16, to: &str, dport: u16, payload: &[u8]) -> Vec<u8> {
        let hop = Hop { src_mac: [2, 0, 0, 0, 0, 2], dst_mac: [2, 0, 0, 0, 0, 1], src: from.parse().unwrap() };
        let mut f = vec![0u8; frame::MAX_UDP_PROBE];
        let n = frame::fill_udp(&mut f, &hop, to.parse().unwrap(), sport, dport, 1, payload);
        f.truncate(n);
        f
    }

    #[test]
    fn udp_answers_are_taken_by_port_and_echoed_id_and_tftp_from_any_port() {
        let (p, cookie) = (payloads(), Cookie::new(9, 10, 1).for_scan(ScanType::Udp));
        let (src, dst) = ("198.18.0.1", "198.18.0.2");
        let take = |f: &[u8]| {
            let r = reply::parse(f, crate::raw::packet::Checksum::Unchecked).unwrap();
            accept_udp(cookie, &p, r, f).map(|(w, a)| (w, a.sport))
        };
        let (seq, sport) = cookie.probe(src.parse().unwrap(), dst.parse().unwrap(), 53, 0);
        let id = (seq as u16).to_be_bytes();
        assert_eq!(take(&answer(dst, 53, src, sport, &[id[0], id[1], b'a'])), Some((0, 53)));
        assert_eq!(take(&answer(dst, 53, src, sport, &[id[0], id[1] ^ 1, b'a'])), None, "another id");
        assert_eq!(take(&answer(dst, 53, src, sport, &[id[0]])), None, "too short to echo it");
        // TFTP answers from a port of its own, to the probe's source port.
        let (_, tsport) = cookie.probe(src.parse().unwrap(), dst.parse().unwrap(), 69, 0);
        assert_eq!(take(&answer(dst, 40_000, src, tsport, b"\x00\x05\x00\x01no")), Some((0, 69)));
        assert_eq!(take(&answer(dst, 40_000, src, tsport ^ 1, b"\x00\x05")), None, "not our port");
        assert_eq!(take(&answer("198.18.0.9", 40_000, src, tsport, b"\x00\x05")), None, "another host");
    }
}
