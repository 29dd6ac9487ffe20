//! Connect scan: one non-blocking `connect()` per probe.
//!
//! Works without privileges. A completed handshake means open, a refusal
//! means closed, silence means filtered after the last retry.
//!
//! The fast path asks the socket twice: the first `connect()` starts the
//! handshake, the second reports where it stands (0: open, `ECONNREFUSED`:
//! closed, `EALREADY`: still waiting). On a fast link the answer is usually
//! there already, so most probes finish inline in five system calls without
//! touching the reactor; only probes still waiting are handed to tokio.
//! Open sockets get `SO_LINGER 0` before they close, so they end with a RST
//! and leave no TIME_WAIT. Running out of descriptors or local ports is not a
//! result: the probe waits briefly and tries again.
//!
//! The pace is the scan's [`Pacer`], as for the raw scans: every attempt
//! that sends a SYN and every answer (a handshake, a refusal, an ICMP
//! error) is told to its controller, which finds the rate the path
//! carries from the share of first attempts answered. A connect carries
//! no try number, but an answer after a timed-out attempt proves the
//! earlier ones lost, and an answer that took longer than the kernel's
//! first SYN retransmission (1 s) most likely answers the kernel's second
//! SYN. A port whose last attempt timed out while the path was congested
//! is tried again (at most [`CONGESTED_TRIES`] more times) before it is
//! called filtered.

use std::collections::HashSet;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, SockRef, Socket, Type};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::control::{Answer, Class, CONGESTED_TRIES};
use super::pacer::Pacer;
use super::{next_slot, PaceTold, Slot, Timing, Turns};
use crate::error::ErrorKind;
use crate::findings::{PortEvent, PortState, Proto, Reason};
use crate::pipeline::{Found, Stats, Stop};
use crate::targets::ScanOrder;

/// How a connect attempt stands.
#[derive(Debug)]
enum Attempt {
    Open,
    Closed,
    TimedOut,
    HostUnreachable,
    /// Out of descriptors, buffers or local ports: no packet went out.
    Resource,
    Failed(io::Error),
}

/// Either an answer already, or a socket still in its handshake.
enum Started {
    Done(Attempt),
    Waiting(Socket),
}

fn start(addr: SocketAddr) -> Started {
    let sock = match Socket::new(Domain::for_address(addr), Type::STREAM.nonblocking().cloexec(), Some(Protocol::TCP)) {
        Ok(s) => s,
        Err(e) => return Started::Done(classify(e)),
    };
    let addr = addr.into();
    match sock.connect(&addr) {
        Ok(()) => return Started::Done(opened(&sock)),
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        Err(e) => return Started::Done(classify(e)),
    }
    // Ask again: on a fast path the handshake (or its refusal) is already done.
    match sock.connect(&addr) {
        Ok(()) => Started::Done(opened(&sock)),
        Err(e) => match e.raw_os_error() {
            Some(libc::EISCONN) => Started::Done(opened(&sock)),
            Some(libc::EALREADY | libc::EINPROGRESS) => Started::Waiting(sock),
            _ => Started::Done(classify(e)),
        },
    }
}

/// An open port: close it with a RST rather than a FIN. A handshake with
/// itself is no port: on a loopback target, a connect whose kernel-chosen
/// source port is the port probed meets its own SYN (TCP's simultaneous
/// open), with nothing listening.
fn opened(sock: &Socket) -> Attempt {
    if sock.local_addr().ok().and_then(|a| a.as_socket()) == sock.peer_addr().ok().and_then(|a| a.as_socket()) {
        return Attempt::Closed;
    }
    let _ = sock.set_linger(Some(Duration::ZERO));
    Attempt::Open
}

/// Waits for a socket's handshake to end, up to `timeout`.
async fn wait(sock: Socket, addr: SocketAddr, timeout: Duration) -> Attempt {
    let stream = match tokio::net::TcpStream::from_std(std::net::TcpStream::from(sock)) {
        Ok(s) => s,
        Err(e) => return classify(e),
    };
    if tokio::time::timeout(timeout, stream.writable()).await.is_err() {
        return Attempt::TimedOut;
    }
    let sock = SockRef::from(&stream);
    match sock.connect(&addr.into()) {
        Ok(()) => opened(&sock),
        Err(e) if e.raw_os_error() == Some(libc::EISCONN) => opened(&sock),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EALREADY | libc::EINPROGRESS)) => Attempt::TimedOut,
        Err(e) => classify(e),
    }
}

fn classify(e: io::Error) -> Attempt {
    match e.raw_os_error() {
        Some(libc::ECONNREFUSED) => Attempt::Closed,
        Some(libc::ETIMEDOUT) => Attempt::TimedOut,
        Some(libc::EHOSTUNREACH | libc::EHOSTDOWN) => Attempt::HostUnreachable,
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM | libc::EADDRNOTAVAIL | libc::EAGAIN) => {
            Attempt::Resource
        }
        _ => Attempt::Failed(e),
    }
}

/// What every probe of one scan shares.
struct Shared {
    timing: Timing,
    /// The scan's pace (shared with the scan's other batches).
    pacer: Pacer,
    window: Arc<Semaphore>,
    found: Found,
    stats: Arc<Stats>,
    report_closed: bool,
    /// Hosts that already had an error reported (one error event per host).
    reported: Mutex<HashSet<IpAddr>>,
    /// With a scan delay: when each host may next be probed.
    turns: Turns,
}

/// Most times a probe retries for local resources (2 ms apart) before giving up.
const RESOURCE_RETRIES: u32 = 500;

/// Linux's first SYN retransmission: a handshake that took longer most
/// likely answers the kernel's second SYN (the first was lost).
const KERNEL_SYN_RTO: Duration = Duration::from_secs(1);

/// How often a connect scan publishes its pace.
const REPORT_EVERY: Duration = Duration::from_millis(250);

/// What to do after an attempt.
enum Next {
    Finished,
    Retry,
    RetryLater,
}

impl Shared {
    /// Extra tries a silent port gets now: more on a path seen losing.
    fn retries(&self) -> u32 {
        self.pacer.lock().retries(self.timing.retries, self.timing.max_retries)
    }

    /// Starts an attempt (`tries` before it) and tells the pacer of its
    /// SYN; gives when it went out.
    fn launch(&self, addr: SocketAddr, tries: u32) -> (Started, Instant) {
        let sent = Instant::now();
        let started = start(addr);
        // No SYN went out when the kernel refused at once (no descriptor,
        // no route, not permitted).
        if !matches!(started, Started::Done(Attempt::Resource | Attempt::Failed(_))) {
            self.pacer.lock().on_send(Class::Port, tries == 0, sent);
        }
        (started, sent)
    }

    /// Tells the pacer of an answer to the attempt sent at `sent` after
    /// `tries` timed-out ones.
    fn answered(&self, ip: IpAddr, sent: Instant, tries: u32, from_host: bool) {
        let now = Instant::now();
        let took = now.saturating_duration_since(sent);
        // Past the kernel's first retransmission: the kernel's second SYN.
        let resent = u32::from(took >= KERNEL_SYN_RTO);
        let first = tries == 0 && resent == 0;
        // The host itself answered (not a router's unreachable): -Pn reports it up.
        if let Some(hosts) = self.found.ctx.latency.as_ref().filter(|_| from_host) {
            hosts.answered(ip, first.then_some(took));
        }
        let answer = Answer { class: Class::Port, sent, first, lost: tries + resent, rtt: first.then_some(took) };
        self.pacer.lock().on_answer(answer, now);
    }

    /// Records an attempt's outcome (the attempt sent at `sent`, after
    /// `tries` timed-out ones); says whether the probe is finished.
    async fn settle(
        &self,
        (ip, port): (IpAddr, u16),
        outcome: Attempt,
        sent: Instant,
        tries: &mut u32,
        starved: &mut u32,
    ) -> Next {
        if !matches!(outcome, Attempt::Resource) {
            Stats::bump(&self.stats.sent);
        }
        if matches!(outcome, Attempt::Open | Attempt::Closed | Attempt::HostUnreachable) {
            self.answered(ip, sent, *tries, !matches!(outcome, Attempt::HostUnreachable));
        }
        match outcome {
            Attempt::Open => {
                Stats::bump(&self.stats.open);
                self.port_event(ip, port, PortState::Open, Reason::SynAck).await;
            }
            Attempt::Closed => {
                Stats::bump(&self.stats.closed);
                if self.report_closed {
                    self.port_event(ip, port, PortState::Closed, Reason::ConnRefused).await;
                } else {
                    self.found.unshown(ip, Proto::Tcp, port, PortState::Closed, Reason::ConnRefused);
                }
            }
            Attempt::TimedOut if *tries < self.retries() => {
                *tries += 1;
                return Next::Retry;
            }
            // Silence after a try sent into congestion says nothing of the port.
            Attempt::TimedOut
                if *tries < self.retries() + CONGESTED_TRIES
                    && !self.found.ctx.stop.is_set()
                    && self.pacer.congested_at(sent, self.timing.timeout).await =>
            {
                *tries += 1;
                return Next::Retry;
            }
            Attempt::TimedOut => Stats::bump(&self.stats.filtered),
            Attempt::HostUnreachable => {
                Stats::bump(&self.stats.filtered);
                self.found.unshown(ip, Proto::Tcp, port, PortState::Filtered, Reason::HostUnreach);
            }
            Attempt::Resource if *starved < RESOURCE_RETRIES => {
                *starved += 1;
                return Next::RetryLater;
            }
            Attempt::Resource => self.report(ip, port, &io::Error::other("out of sockets or local ports")).await,
            Attempt::Failed(e) => self.report(ip, port, &e).await,
        }
        Next::Finished
    }

    async fn port_event(&self, ip: IpAddr, port: u16, state: PortState, reason: Reason) {
        let ctx = &self.found.ctx;
        let (scan_id, t) = (ctx.scan_id.clone(), ctx.t());
        self.found.port(PortEvent { scan_id, ip, port, proto: Proto::Tcp, state, reason, ttl: None, t }).await;
    }

    async fn report(&self, ip: IpAddr, port: u16, e: &io::Error) {
        let first = self.reported.lock().unwrap_or_else(|p| p.into_inner()).insert(ip);
        let ctx = &self.found.ctx;
        if first {
            ctx.emit(ctx.error(Some(ip), Some(port), None, ErrorKind::Io, format!("connect: {e}"))).await;
        } else {
            Stats::bump(&self.stats.errors);
        }
    }

    /// A probe under a scan delay: its first attempt when its host's turn comes.
    async fn paced(self: Arc<Self>, ip: IpAddr, port: u16, permit: OwnedSemaphorePermit) {
        self.turns.wait(ip).await;
        let (first, sent) = self.launch(SocketAddr::new(ip, port), 0);
        self.follow(ip, port, first, sent, permit).await;
    }

    /// Finishes a probe whose first attempt was `started` (sent at
    /// `sent`), retrying as needed.
    async fn follow(
        self: Arc<Self>,
        ip: IpAddr,
        port: u16,
        mut started: Started,
        mut sent: Instant,
        _permit: OwnedSemaphorePermit,
    ) {
        let addr = SocketAddr::new(ip, port);
        let (mut tries, mut starved) = (0, 0);
        loop {
            let outcome = match started {
                Started::Done(a) => a,
                Started::Waiting(sock) => wait(sock, addr, self.timing.timeout).await,
            };
            match self.settle((ip, port), outcome, sent, &mut tries, &mut starved).await {
                Next::Finished => return,
                Next::Retry => {
                    self.pacer.acquire().await;
                    self.turns.wait(ip).await;
                }
                Next::RetryLater => tokio::time::sleep(Duration::from_millis(2)).await,
            }
            (started, sent) = self.launch(addr, tries);
        }
    }
}

/// One worker's share of the scan. Returns true if `stop` cut it short.
async fn drive(sh: Arc<Shared>, mut order: ScanOrder, mut stop: Stop) -> bool {
    for n in 0u64.. {
        let ((ip, port), permit) = match next_slot(&mut order, &sh.window, &sh.pacer, &mut stop).await {
            Slot::Probe(pair, permit) => (pair, permit),
            Slot::Done => return false,
            Slot::Stopped => return true,
        };
        if sh.timing.scan_delay.is_some() {
            tokio::spawn(sh.clone().paced(ip, port, permit));
            continue;
        }
        match sh.launch(SocketAddr::new(ip, port), 0) {
            (Started::Done(Attempt::Closed), sent) if !sh.report_closed => {
                sh.answered(ip, sent, 0, true);
                Stats::bump(&sh.stats.sent);
                Stats::bump(&sh.stats.closed);
                sh.found.unshown(ip, Proto::Tcp, port, PortState::Closed, Reason::ConnRefused);
            }
            (first, sent) => {
                tokio::spawn(sh.clone().follow(ip, port, first, sent, permit));
            }
        }
        // Let the reactor and the waiting probes run now and then.
        if n % 64 == 63 {
            tokio::task::yield_now().await;
        }
    }
    false
}

/// Probes every pair of `order` with `workers` drivers at `pacer`'s pace,
/// reporting to `found` (the pace in `timing` events and the counters).
/// Returns true if the scan's stop cut it short.
pub async fn run(
    order: ScanOrder,
    timing: &Timing,
    pacer: &Pacer,
    workers: usize,
    report_closed: bool,
    found: Found,
) -> bool {
    let window = timing.window.max(1);
    let (stats, stop) = (found.ctx.stats.clone(), found.ctx.stop.clone());
    let ctx = found.ctx.clone();
    let shared = Arc::new(Shared {
        timing: timing.clone(),
        pacer: pacer.clone(),
        window: Arc::new(Semaphore::new(window)),
        found,
        stats,
        report_closed,
        reported: Mutex::new(HashSet::new()),
        turns: Turns::new(timing.scan_delay),
    });
    let sh = shared.clone();
    let scan =
        super::drive_shares(order, workers, &shared.window, window, |part| drive(sh.clone(), part, stop.clone()));
    tokio::pin!(scan);
    let mut told = PaceTold::default();
    let interrupted = loop {
        tokio::select! {
            cut = &mut scan => break cut,
            () = tokio::time::sleep(REPORT_EVERY) => {}
        }
        for e in super::pace_events(&ctx, pacer, true, &mut told, Instant::now()) {
            ctx.emit(e).await;
        }
    };
    for e in super::pace_events(&ctx, pacer, false, &mut told, Instant::now()) {
        ctx.emit(e).await;
    }
    ctx.stats.rate.store(0, std::sync::atomic::Ordering::Relaxed);
    interrupted
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A socket bound to a loopback port and connected to that same port
    /// completes a handshake with itself: that is no open port.
    #[test]
    fn a_handshake_with_itself_is_not_an_open_port() {
        let sock = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)).unwrap();
        sock.bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into()).unwrap();
        let me = sock.local_addr().unwrap();
        sock.connect(&me).expect("a simultaneous open with itself");
        assert!(matches!(opened(&sock), Attempt::Closed));
        // A real peer is open.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let peer = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)).unwrap();
        peer.connect(&listener.local_addr().unwrap().into()).unwrap();
        assert!(matches!(opened(&peer), Attempt::Open));
    }
}
