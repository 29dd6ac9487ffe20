//! UDP scan over plain sockets: what `-sU` does without raw sockets (and
//! on this machine's own addresses, which raw frames cannot reach).
//!
//! One connected UDP socket per probe: it sends the port's datagram (see
//! [`Payloads`]) and waits. A datagram back means `open`; the kernel turns
//! an ICMP port unreachable into `ECONNREFUSED` (`closed`) and other
//! unreachables into `EHOSTUNREACH`/`ENETUNREACH` (`filtered`); silence
//! after the retries means `open|filtered`. The connected socket is the
//! validation: the kernel hands it only datagrams from that address and
//! port. At most `window` sockets are open at once.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::pacer::Pacer;
use super::payloads::Payloads;
use super::{next_slot, Slot, Timing, Turns};
use crate::error::ErrorKind;
use crate::findings::{PortEvent, PortState, Proto, Reason};
use crate::pipeline::{Found, Stats, Stop};
use crate::targets::ScanOrder;

/// What one probe found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    State(PortState, Reason),
    /// No socket: out of descriptors or buffers (nothing was sent).
    Resource,
}

struct Shared {
    timing: Timing,
    pacer: Pacer,
    turns: Turns,
    window: Arc<Semaphore>,
    payloads: Arc<Payloads>,
    found: Found,
    report_closed: bool,
}

/// Most times a probe waits for a socket (2 ms apart) before giving up.
const RESOURCE_RETRIES: u32 = 500;

fn errno_state(e: &io::Error) -> Option<(PortState, Reason)> {
    match e.raw_os_error() {
        Some(libc::ECONNREFUSED) => Some((PortState::Closed, Reason::PortUnreach)),
        Some(libc::EHOSTUNREACH | libc::EHOSTDOWN) => Some((PortState::Filtered, Reason::HostUnreach)),
        Some(libc::ENETUNREACH) => Some((PortState::Filtered, Reason::NetUnreach)),
        Some(libc::EACCES | libc::EPERM) => Some((PortState::Filtered, Reason::AdminProhibited)),
        _ => None,
    }
}

impl Shared {
    /// Sends `port`'s datagram to `addr` up to 1 + retries times and says
    /// what came back.
    async fn probe(&self, addr: SocketAddr) -> io::Result<Outcome> {
        let sock = match crate::wire::conn::udp_socket(addr.ip()).await {
            Ok(s) => s,
            Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)) => {
                return Ok(Outcome::Resource)
            }
            Err(e) => return Err(e),
        };
        sock.connect(addr).await?;
        let payload = self.payloads.get(addr.port()).map_or(&[][..], |p| &p.bytes[..]);
        // Only whether something came back matters here (detection asks again).
        let mut buf = [0u8; 512];
        for attempt in 0..=self.timing.retries {
            if attempt > 0 {
                self.pacer.acquire().await;
                self.turns.wait(addr.ip()).await;
            }
            Stats::bump(&self.found.ctx.stats.sent);
            if let Err(e) = sock.send(payload).await {
                return errno_state(&e).map(|(s, r)| Outcome::State(s, r)).ok_or(e);
            }
            match tokio::time::timeout(self.timing.timeout, sock.recv(&mut buf)).await {
                Ok(Ok(_)) => return Ok(Outcome::State(PortState::Open, Reason::UdpResponse)),
                Ok(Err(e)) => return errno_state(&e).map(|(s, r)| Outcome::State(s, r)).ok_or(e),
                Err(_) => {}
            }
        }
        Ok(Outcome::State(PortState::OpenFiltered, Reason::NoResponse))
    }

    async fn run_one(self: Arc<Self>, ip: IpAddr, port: u16, _permit: OwnedSemaphorePermit) {
        self.turns.wait(ip).await;
        let mut starved = 0;
        let outcome = loop {
            match self.probe(SocketAddr::new(ip, port)).await {
                Ok(Outcome::Resource) if starved < RESOURCE_RETRIES => {
                    starved += 1;
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                other => break other,
            }
        };
        let ctx = &self.found.ctx;
        let (state, reason) = match outcome {
            Ok(Outcome::State(s, r)) => (s, r),
            Ok(Outcome::Resource) => {
                let message = "udp: out of sockets".to_string();
                return ctx.emit(ctx.error(Some(ip), Some(port), None, ErrorKind::Io, message)).await;
            }
            Err(e) => {
                return ctx.emit(ctx.error(Some(ip), Some(port), None, ErrorKind::Io, format!("udp: {e}"))).await;
            }
        };
        let stats = &ctx.stats;
        Stats::bump(match state {
            PortState::Open => &stats.open,
            PortState::Closed => &stats.closed,
            _ => &stats.filtered,
        });
        if state != PortState::Closed || self.report_closed {
            let (scan_id, t) = (ctx.scan_id.clone(), ctx.t());
            self.found.port(PortEvent { scan_id, ip, port, proto: Proto::Udp, state, reason, ttl: None, t }).await;
        } else {
            self.found.unshown(ip, Proto::Udp, port, state, reason);
        }
    }
}

async fn drive(sh: Arc<Shared>, mut order: ScanOrder, mut stop: Stop) -> bool {
    loop {
        match next_slot(&mut order, &sh.window, &sh.pacer, &mut stop).await {
            Slot::Probe((ip, port), permit) => tokio::spawn(sh.clone().run_one(ip, port, permit)),
            Slot::Done => return false,
            Slot::Stopped => return true,
        };
    }
}

/// Probes every pair of `order` over UDP sockets with `workers` drivers,
/// reporting to `found`. Returns true if the scan's stop cut it short.
pub async fn run(
    order: ScanOrder,
    timing: &Timing,
    workers: usize,
    report_closed: bool,
    payloads: Arc<Payloads>,
    found: Found,
) -> bool {
    let window = timing.window.max(1);
    let stop = found.ctx.stop.clone();
    let shared = Arc::new(Shared {
        timing: timing.clone(),
        pacer: Pacer::fixed(timing.max_rate),
        turns: Turns::new(timing.scan_delay),
        window: Arc::new(Semaphore::new(window)),
        payloads,
        found,
        report_closed,
    });
    let sh = shared.clone();
    super::drive_shares(order, workers, &shared.window, window, |part| drive(sh.clone(), part, stop.clone())).await
}
