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

use std::collections::HashSet;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use socket2::{Domain, Protocol, SockRef, Socket, Type};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::{next_slot, Limiter, Slot, Stats, Stop, Timing, Turns};
use crate::findings::{ErrorKind, PortEvent, PortState, Proto, Reason};
use crate::pipeline::Found;
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

/// An open port: close it with a RST rather than a FIN.
fn opened(sock: &Socket) -> Attempt {
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
        Ok(()) => opened_ref(&sock),
        Err(e) if e.raw_os_error() == Some(libc::EISCONN) => opened_ref(&sock),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EALREADY | libc::EINPROGRESS)) => Attempt::TimedOut,
        Err(e) => classify(e),
    }
}

fn opened_ref(sock: &SockRef<'_>) -> Attempt {
    let _ = sock.set_linger(Some(Duration::ZERO));
    Attempt::Open
}

async fn attempt(addr: SocketAddr, timeout: Duration) -> Attempt {
    match start(addr) {
        Started::Done(a) => a,
        Started::Waiting(sock) => wait(sock, addr, timeout).await,
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
    limiter: Limiter,
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

/// What to do after an attempt.
enum Next {
    Finished,
    Retry,
    RetryLater,
}

impl Shared {
    /// Records an attempt's outcome; says whether the probe is finished.
    async fn settle(&self, ip: IpAddr, port: u16, outcome: Attempt, tries: &mut u32, starved: &mut u32) -> Next {
        if !matches!(outcome, Attempt::Resource) {
            Stats::bump(&self.stats.sent);
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
                    self.found.unshown(ip, Proto::Tcp, PortState::Closed, Reason::ConnRefused);
                }
            }
            Attempt::TimedOut if *tries < self.timing.retries => {
                *tries += 1;
                return Next::Retry;
            }
            Attempt::TimedOut => Stats::bump(&self.stats.filtered),
            Attempt::HostUnreachable => {
                Stats::bump(&self.stats.filtered);
                self.found.unshown(ip, Proto::Tcp, PortState::Filtered, Reason::HostUnreach);
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
        let first = start(SocketAddr::new(ip, port));
        self.follow(ip, port, first, permit).await;
    }

    /// Finishes a probe whose first attempt was `first`, retrying as needed.
    async fn follow(self: Arc<Self>, ip: IpAddr, port: u16, first: Started, _permit: OwnedSemaphorePermit) {
        let addr = SocketAddr::new(ip, port);
        let (mut tries, mut starved) = (0, 0);
        let mut outcome = match first {
            Started::Done(a) => a,
            Started::Waiting(sock) => wait(sock, addr, self.timing.timeout).await,
        };
        loop {
            match self.settle(ip, port, outcome, &mut tries, &mut starved).await {
                Next::Finished => return,
                Next::Retry => {
                    self.limiter.acquire().await;
                    self.turns.wait(ip).await;
                }
                Next::RetryLater => tokio::time::sleep(Duration::from_millis(2)).await,
            }
            outcome = attempt(addr, self.timing.timeout).await;
        }
    }
}

/// One worker's share of the scan. Returns true if `stop` cut it short.
async fn drive(sh: Arc<Shared>, mut order: ScanOrder, mut stop: Stop) -> bool {
    for n in 0u64.. {
        let ((ip, port), permit) = match next_slot(&mut order, &sh.window, &sh.limiter, &mut stop).await {
            Slot::Probe(pair, permit) => (pair, permit),
            Slot::Done => return false,
            Slot::Stopped => return true,
        };
        if sh.timing.scan_delay.is_some() {
            tokio::spawn(sh.clone().paced(ip, port, permit));
            continue;
        }
        match start(SocketAddr::new(ip, port)) {
            Started::Done(Attempt::Closed) if !sh.report_closed => {
                Stats::bump(&sh.stats.sent);
                Stats::bump(&sh.stats.closed);
                sh.found.unshown(ip, Proto::Tcp, PortState::Closed, Reason::ConnRefused);
            }
            first => {
                tokio::spawn(sh.clone().follow(ip, port, first, permit));
            }
        }
        // Let the reactor and the waiting probes run now and then.
        if n % 64 == 63 {
            tokio::task::yield_now().await;
        }
    }
    false
}

/// Probes every pair of `order` with `workers` drivers, reporting to
/// `found`. Returns true if the scan's stop cut it short.
pub async fn run(order: ScanOrder, timing: &Timing, workers: usize, report_closed: bool, found: Found) -> bool {
    let window = timing.window.max(1);
    let (stats, stop) = (found.ctx.stats.clone(), found.ctx.stop.clone());
    let shared = Arc::new(Shared {
        timing: timing.clone(),
        limiter: Limiter::new(timing.max_rate),
        window: Arc::new(Semaphore::new(window)),
        found,
        stats,
        report_closed,
        reported: Mutex::new(HashSet::new()),
        turns: Turns::new(timing.scan_delay),
    });
    let sh = shared.clone();
    super::drive_shares(order, workers, &shared.window, window, |part| drive(sh.clone(), part, stop.clone())).await
}
