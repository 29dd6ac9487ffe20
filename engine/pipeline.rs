//! What the stages of one scan share, and the typed values that pass
//! between them.
//!
//! In: the scan's id, clock, event channel, counters and stop signal. Out:
//! [`Ctx`], handed to every stage as one value, and [`Found`], where
//! discovery puts each port it decides. What always holds: every channel
//! between stages is bounded, so a slow stage slows the one before it
//! (discovery waits to report an open port until detection can take it)
//! and no queue grows with the scan; each open port goes to the next stage
//! as an [`OpenPort`], never re-derived from the events meant for outputs.

use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::{mpsc, watch};

use crate::error::ErrorKind;
use crate::findings::{ErrorEvent, Event, ExtraportsEvent, PortEvent, PortState, Proto, Reason, ScanId, Service};

/// Ports waiting between two stages (each a few dozen bytes).
pub const STAGE_QUEUE: usize = 1024;

/// An open port found by discovery, on its way to detection or plugins:
/// one for each target at its address (two names of one address are two
/// targets, each detected under its own name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenPort {
    pub ip: IpAddr,
    pub port: u16,
    pub proto: Proto,
    /// The name of the target, when it was given by name.
    pub name: Option<Arc<str>>,
}

/// What every stage of one scan shares.
#[derive(Clone, Debug)]
pub struct Ctx {
    pub scan_id: ScanId,
    /// When the scan started; events carry seconds since then.
    pub t0: Instant,
    pub events: mpsc::Sender<Event>,
    pub stats: Arc<Stats>,
    pub stop: Stop,
    /// Ports decided but not reported, counted per host.
    pub unshown: Arc<Unshown>,
    /// Without host discovery (`-Pn`): the hosts that answered the port
    /// scan, with their round trips (none with discovery, whose pings time
    /// each host).
    pub latency: Option<Arc<Latency>>,
    /// The targets at each address the user gave by name
    /// ([`crate::findings::ScanSettings::targets_by_address`]): what
    /// detection and plugins name each by (SNI, `Host:`).
    pub names: Arc<std::collections::HashMap<IpAddr, Vec<Option<Arc<str>>>>>,
    /// Reverse DNS, told of each host the scan reports (none with `-n`).
    pub rdns: Option<Arc<crate::rdns::tap::Tap>>,
    /// OS detection's record of each host's ports (with `-O`).
    pub os_seen: Option<Arc<crate::os::seen::Seen>>,
    /// The first SYN-ACK of each host, for the passive OS hint (raw scans).
    pub hints: Option<Arc<crate::os::hints::Hints>>,
}

impl Ctx {
    /// The targets at `ip`: its names (and `None` for the address itself
    /// when it was given as an address too), or one without a name.
    pub fn targets_at(&self, ip: IpAddr) -> &[Option<Arc<str>>] {
        const UNNAMED: &[Option<Arc<str>>] = &[None];
        self.names.get(&ip).map_or(UNNAMED, Vec::as_slice)
    }

    /// A context whose events go nowhere (for running a stage's pieces on
    /// their own, as `moonscan plugins test` does).
    pub fn detached(scan_id: &str) -> Ctx {
        let (events, _) = mpsc::channel(1);
        let (_, stop) = stop_signal();
        Ctx {
            scan_id: scan_id.into(),
            t0: Instant::now(),
            events,
            stats: Arc::default(),
            stop,
            unshown: Arc::default(),
            latency: None,
            names: Arc::default(),
            rdns: None,
            os_seen: None,
            hints: None,
        }
    }

    /// Seconds since the scan started.
    pub fn t(&self) -> f64 {
        self.t0.elapsed().as_secs_f64()
    }

    /// Sends an event to the outputs, counting errors, findings and script
    /// results (and telling reverse DNS of a host to name).
    pub async fn emit(&self, ev: Event) {
        self.count(&ev);
        let _ = self.events.send(ev).await;
    }

    /// As [`Ctx::emit`], from a thread outside the runtime.
    pub fn emit_blocking(&self, ev: Event) {
        self.count(&ev);
        let _ = self.events.blocking_send(ev);
    }

    fn count(&self, ev: &Event) {
        if let Some(rdns) = &self.rdns {
            rdns.saw(ev);
        }
        if let Some(seen) = &self.os_seen {
            seen.saw(ev);
        }
        match ev {
            Event::Error(_) => Stats::bump(&self.stats.errors),
            Event::Finding(_) => Stats::bump(&self.stats.findings),
            Event::Script(_) => Stats::bump(&self.stats.scripts),
            _ => {}
        }
    }

    /// An error event of this scan.
    pub fn error(
        &self,
        ip: Option<IpAddr>,
        port: Option<u16>,
        plugin: Option<String>,
        kind: ErrorKind,
        message: String,
    ) -> Event {
        Event::Error(ErrorEvent { scan_id: self.scan_id.clone(), ip, port, plugin, kind, message })
    }
}

/// The stage after discovery: service detection, or (without it) the
/// plugins, which then see what the port number suggests.
#[derive(Clone, Debug)]
pub enum Next {
    Detection(mpsc::Sender<OpenPort>),
    Plugins(mpsc::Sender<Arc<Service>>),
}

/// Where discovery reports the ports it decides: a `port` event for the
/// outputs and, for an open port, the value the next stage takes (when
/// there is one). Sending waits while the next stage is full.
#[derive(Clone, Debug)]
pub struct Found {
    pub ctx: Ctx,
    pub next: Option<Next>,
}

impl Found {
    /// Counts a port decided but not reported (see [`Unshown`]).
    pub fn unshown(&self, ip: IpAddr, proto: Proto, port: u16, state: PortState, reason: Reason) {
        self.ctx.unshown.add(ip, proto, port, state, reason);
        if let Some(seen) = &self.ctx.os_seen {
            seen.port(ip, proto, port, state, None);
        }
    }

    pub async fn port(&self, ev: PortEvent) {
        let open = ev.state == PortState::Open;
        let (ip, port, proto) = (ev.ip, ev.port, ev.proto);
        self.ctx.emit(Event::Port(ev)).await;
        if !open {
            return;
        }
        for name in self.ctx.targets_at(ip) {
            let open = OpenPort { ip, port, proto, name: name.clone() };
            match &self.next {
                Some(Next::Detection(tx)) => drop(tx.send(open).await),
                Some(Next::Plugins(tx)) => drop(tx.send(bare(&self.ctx, open)).await),
                None => {}
            }
        }
    }

    /// As [`Found::port`], from a thread outside the runtime.
    pub fn port_blocking(&self, ev: PortEvent) {
        let open = ev.state == PortState::Open;
        let (ip, port, proto) = (ev.ip, ev.port, ev.proto);
        self.ctx.emit_blocking(Event::Port(ev));
        if !open {
            return;
        }
        for name in self.ctx.targets_at(ip) {
            let open = OpenPort { ip, port, proto, name: name.clone() };
            match &self.next {
                Some(Next::Detection(tx)) => drop(tx.blocking_send(open)),
                Some(Next::Plugins(tx)) => drop(tx.blocking_send(bare(&self.ctx, open))),
                None => {}
            }
        }
    }
}

/// What the plugins see of an open port without service detection.
fn bare(ctx: &Ctx, p: OpenPort) -> Arc<Service> {
    let mut s = Service::bare(ctx.scan_id.clone(), p.ip, p.port, p.proto);
    s.targetname = p.name.map(|n| n.to_string());
    Arc::new(s)
}

/// The ports a scan decided but did not report one by one, counted per
/// (host, protocol, state, reason), for nmap's "Not shown" line and its
/// `<extraports>`. Silence is not counted (a report takes the scanned ports
/// left over as filtered), so only hosts that answered take room: about
/// 100 bytes each (and the numbers of up to [`Unshown::LISTED`] ports of a
/// kind: at most about 250 bytes), and at most [`Unshown::MAX_HOSTS`] hosts
/// (about 65 MB at worst); past them new hosts are not counted, the scan's
/// end says so, and reports give no leftover count. A state other than
/// filtered with at most [`Unshown::LISTED`] ports on a host names them,
/// as nmap's port table lists such states (filtered ones are not: the
/// host's silent ports, never counted here, are filtered too).
#[derive(Debug)]
pub struct Unshown {
    counts: std::sync::Mutex<std::collections::HashMap<(IpAddr, Proto), Vec<Tally>>>,
    max_hosts: usize,
    capped: std::sync::atomic::AtomicBool,
}

/// How many ports of one host and protocol were in one state, for one
/// reason, and which (while they are few).
type Tally = (PortState, Reason, u32, Vec<u16>);

impl Default for Unshown {
    fn default() -> Self {
        Unshown::with_max_hosts(Unshown::MAX_HOSTS)
    }
}

impl Unshown {
    /// Most (host, protocol) pairs counted.
    pub const MAX_HOSTS: usize = 1 << 18;
    /// A state with at most this many ports on a host is listed port by
    /// port (nmap's rule for its port table without -v).
    pub const LISTED: usize = 25;

    pub fn with_max_hosts(max_hosts: usize) -> Self {
        Unshown { counts: Default::default(), max_hosts, capped: Default::default() }
    }

    /// Whether some host went uncounted (past the cap).
    pub fn capped(&self) -> bool {
        self.capped.load(Ordering::Relaxed)
    }

    /// Counts one port.
    pub fn add(&self, ip: IpAddr, proto: Proto, port: u16, state: PortState, reason: Reason) {
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        let full = counts.len() >= self.max_hosts;
        let kinds = match counts.get_mut(&(ip, proto)) {
            Some(k) => k,
            None if full => {
                self.capped.store(true, Ordering::Relaxed);
                return;
            }
            None => counts.entry((ip, proto)).or_default(),
        };
        match kinds.iter_mut().find(|(s, r, _, _)| *s == state && *r == reason) {
            Some((_, _, n, ports)) => {
                *n = n.saturating_add(1);
                if *n as usize <= Self::LISTED {
                    ports.push(port);
                } else if !ports.is_empty() {
                    *ports = Vec::new();
                }
            }
            None => kinds.push((state, reason, 1, vec![port])),
        }
    }

    /// The counts as events, in address order; the tally is emptied.
    /// A host's state with at most [`Unshown::LISTED`] ports (over both
    /// protocols and every reason) names its ports.
    pub fn take(&self, scan_id: &ScanId) -> Vec<ExtraportsEvent> {
        let counts = std::mem::take(&mut *self.counts.lock().unwrap_or_else(|e| e.into_inner()));
        let mut totals: std::collections::HashMap<(IpAddr, PortState), u64> = Default::default();
        for ((ip, _), kinds) in &counts {
            for k in kinds {
                *totals.entry((*ip, k.0)).or_default() += u64::from(k.2);
            }
        }
        let mut out: Vec<ExtraportsEvent> = Vec::new();
        for ((ip, proto), kinds) in counts {
            for (state, reason, count, mut ports) in kinds {
                let listed = state != PortState::Filtered
                    && totals[&(ip, state)] <= Self::LISTED as u64
                    && ports.len() == count as usize;
                if listed {
                    ports.sort_unstable();
                } else {
                    ports = Vec::new();
                }
                out.push(ExtraportsEvent { scan_id: scan_id.clone(), ip, proto, state, reason, count, ports });
            }
        }
        out.sort_by(|a, b| {
            (a.ip, a.proto as u8, a.state as u8, a.reason.as_str()).cmp(&(
                b.ip,
                b.proto as u8,
                b.state as u8,
                b.reason.as_str(),
            ))
        });
        out
    }
}

/// The hosts that answered the port scan and each one's smoothed round
/// trip over the answers that time it (nmap's srtt: the first sample, then
/// an eighth of each new one's difference; an answer to a retried probe
/// times nothing), for the `host` event and "Host is up (0.00021s
/// latency)" of hosts no ping timed (`-Pn`). At most
/// [`Latency::MAX_HOSTS`] hosts are kept (see [`Latency::capped`]).
#[derive(Debug)]
pub struct Latency {
    srtt: std::sync::Mutex<std::collections::HashMap<IpAddr, Option<f64>>>,
    max_hosts: usize,
    capped: std::sync::atomic::AtomicBool,
}

impl Default for Latency {
    fn default() -> Self {
        Latency::with_max_hosts(Latency::MAX_HOSTS)
    }
}

impl Latency {
    /// Most hosts kept (as many as [`Unshown::MAX_HOSTS`]).
    pub const MAX_HOSTS: usize = Unshown::MAX_HOSTS;

    pub fn with_max_hosts(max_hosts: usize) -> Self {
        Latency { srtt: Default::default(), max_hosts, capped: Default::default() }
    }

    /// An answer from `ip`, with its round trip when the probe went out once.
    pub fn answered(&self, ip: IpAddr, rtt: Option<std::time::Duration>) {
        let rtt = rtt.map(|d| d.as_secs_f64());
        let mut srtt = self.srtt.lock().unwrap_or_else(|e| e.into_inner());
        let full = srtt.len() >= self.max_hosts;
        match srtt.get_mut(&ip) {
            Some(Some(s)) => *s += rtt.map_or(0.0, |r| (r - *s) / 8.0),
            Some(none) => *none = rtt,
            None if full => self.capped.store(true, Ordering::Relaxed),
            None => {
                srtt.insert(ip, rtt);
            }
        }
    }

    /// Whether some host went unrecorded (past the cap).
    pub fn capped(&self) -> bool {
        self.capped.load(Ordering::Relaxed)
    }

    /// The smoothed round trip of `ip` in seconds, if an answer timed it.
    pub fn of(&self, ip: IpAddr) -> Option<f64> {
        self.srtt.lock().unwrap_or_else(|e| e.into_inner()).get(&ip).copied().flatten()
    }

    /// Every host that answered, with its smoothed round trip in seconds
    /// (none when no answer timed it); the table is emptied.
    pub fn take(&self) -> std::collections::HashMap<IpAddr, Option<f64>> {
        std::mem::take(&mut *self.srtt.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// Live counters of a scan, readable from another thread (for a progress line).
#[derive(Debug, Default)]
pub struct Stats {
    pub planned: AtomicU64,
    pub sent: AtomicU64,
    pub open: AtomicU64,
    pub closed: AtomicU64,
    pub filtered: AtomicU64,
    pub errors: AtomicU64,
    pub findings: AtomicU64,
    /// Script results (`script` events).
    pub scripts: AtomicU64,
    /// Host discovery's verdicts.
    pub hosts_up: AtomicU64,
    pub hosts_down: AtomicU64,
    /// The raw scans' pace: probes/s over every sender, the estimated loss
    /// (parts per million of tries) and round trip (µs, 0 before one).
    pub rate: AtomicU64,
    pub loss_ppm: AtomicU64,
    pub rtt_us: AtomicU64,
    /// Slowdowns so far, and why the first.
    pub slowdowns: AtomicU64,
    pub slowed: std::sync::Mutex<Option<String>>,
}

impl Stats {
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }

    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// The sending half of a stop signal (held by whoever handles Ctrl-C).
#[derive(Debug)]
pub struct StopHandle(watch::Sender<bool>);

/// The receiving half: the scan stops sending new probes once it is set.
#[derive(Clone, Debug)]
pub struct Stop(watch::Receiver<bool>);

/// A new stop signal, not yet set.
pub fn stop_signal() -> (StopHandle, Stop) {
    let (tx, rx) = watch::channel(false);
    (StopHandle(tx), Stop(rx))
}

impl StopHandle {
    pub fn stop(&self) {
        self.0.send_replace(true);
    }
}

impl Stop {
    pub fn is_set(&self) -> bool {
        *self.0.borrow()
    }

    /// Resolves once the signal is set; never, if the handle is gone unset.
    pub async fn wait(&mut self) {
        if self.0.wait_for(|&v| v).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_that_answered_keep_a_smoothed_round_trip_up_to_the_cap() {
        use std::time::Duration;
        let hosts = Latency::with_max_hosts(2);
        let (a, b, c): (IpAddr, IpAddr, IpAddr) =
            ("198.18.0.2".parse().unwrap(), "198.18.0.3".parse().unwrap(), "198.18.0.4".parse().unwrap());
        // A retried probe's answer times nothing, but the host answered.
        hosts.answered(a, None);
        hosts.answered(a, Some(Duration::from_millis(80)));
        hosts.answered(a, Some(Duration::from_millis(160)));
        hosts.answered(b, None);
        assert!(!hosts.capped());
        hosts.answered(c, Some(Duration::from_millis(1)));
        assert!(hosts.capped(), "a third host is past the cap of 2");
        let taken = hosts.take();
        assert_eq!(taken.len(), 2);
        assert!((taken[&a].unwrap() - 0.09).abs() < 1e-9, "80 ms, then an eighth of the way to 160: {taken:?}");
        assert_eq!(taken[&b], None);
        assert!(hosts.take().is_empty(), "taken once");
    }

    #[test]
    fn ports_not_shown_are_counted_per_host_up_to_the_cap() {
        let tally = Unshown::with_max_hosts(2);
        let (a, b, c): (IpAddr, IpAddr, IpAddr) =
            ("198.18.0.3".parse().unwrap(), "198.18.0.2".parse().unwrap(), "198.18.0.4".parse().unwrap());
        // 30 closed ports on a: counted, not listed (more than 25).
        for port in 0..30 {
            tally.add(a, Proto::Tcp, port, PortState::Closed, Reason::Reset);
        }
        tally.add(a, Proto::Tcp, 99, PortState::Filtered, Reason::HostUnreach);
        tally.add(b, Proto::Tcp, 7, PortState::Closed, Reason::Reset);
        // A third host is past the cap: not counted; the two first still are.
        tally.add(c, Proto::Tcp, 7, PortState::Closed, Reason::Reset);
        tally.add(b, Proto::Tcp, 9, PortState::Closed, Reason::Reset);
        let evs = tally.take(&"5c".into());
        let got: Vec<String> = evs
            .iter()
            .map(|x| format!("{} {} {} x{} {:?}", x.ip, x.proto.as_str(), x.state.as_str(), x.count, x.ports))
            .collect();
        assert_eq!(
            got,
            ["198.18.0.2 tcp closed x2 [7, 9]", "198.18.0.3 tcp closed x30 []", "198.18.0.3 tcp filtered x1 []",]
        );
        assert!(tally.take(&"5c".into()).is_empty(), "taken once");
        assert!(tally.capped(), "the host past the cap is known to be missing");
    }

    /// nmap's rule is per host and state over both protocols: 20 closed
    /// TCP and 10 closed UDP ports are 30, counted, not listed.
    #[test]
    fn a_state_is_listed_only_while_few_over_both_protocols() {
        let tally = Unshown::default();
        let ip: IpAddr = "198.18.0.2".parse().unwrap();
        for port in 0..20 {
            tally.add(ip, Proto::Tcp, port, PortState::Closed, Reason::Reset);
        }
        for port in 0..10 {
            tally.add(ip, Proto::Udp, port, PortState::Closed, Reason::PortUnreach);
        }
        let evs = tally.take(&"5c".into());
        assert_eq!(evs.len(), 2, "{evs:?}");
        assert!(evs.iter().all(|x| x.ports.is_empty()), "counted, not listed: {evs:?}");
        // 25 are listed, 26 are not.
        for (n, listed) in [(25u16, true), (26, false)] {
            for port in 0..n {
                tally.add(ip, Proto::Tcp, port, PortState::Closed, Reason::Reset);
            }
            let evs = tally.take(&"5c".into());
            assert_eq!(evs[0].count, u32::from(n));
            assert_eq!(evs[0].ports.len(), if listed { usize::from(n) } else { 0 }, "{n} closed ports");
        }
    }
}
