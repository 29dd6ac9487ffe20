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

use crate::findings::{ErrorEvent, ErrorKind, Event, PortEvent, PortState, Proto, ScanId, Service};

/// Ports waiting between two stages (each a few dozen bytes).
pub const STAGE_QUEUE: usize = 1024;

/// An open port found by discovery, on its way to detection or plugins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenPort {
    pub ip: IpAddr,
    pub port: u16,
    pub proto: Proto,
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
}

impl Ctx {
    /// A context whose events go nowhere (for running a stage's pieces on
    /// their own, as `moonscan plugins test` does).
    pub fn detached(scan_id: &str) -> Ctx {
        let (events, _) = mpsc::channel(1);
        let (_, stop) = stop_signal();
        Ctx { scan_id: scan_id.into(), t0: Instant::now(), events, stats: Arc::default(), stop }
    }

    /// Seconds since the scan started.
    pub fn t(&self) -> f64 {
        self.t0.elapsed().as_secs_f64()
    }

    /// Sends an event to the outputs, counting errors and findings.
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
        match ev {
            Event::Error(_) => Stats::bump(&self.stats.errors),
            Event::Finding(_) => Stats::bump(&self.stats.findings),
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
    pub async fn port(&self, ev: PortEvent) {
        let open = (ev.state == PortState::Open).then_some(OpenPort { ip: ev.ip, port: ev.port, proto: ev.proto });
        self.ctx.emit(Event::Port(ev)).await;
        match (&self.next, open) {
            (Some(Next::Detection(tx)), Some(open)) => drop(tx.send(open).await),
            (Some(Next::Plugins(tx)), Some(open)) => drop(tx.send(self.bare(open)).await),
            _ => {}
        }
    }

    /// As [`Found::port`], from a thread outside the runtime.
    pub fn port_blocking(&self, ev: PortEvent) {
        let open = (ev.state == PortState::Open).then_some(OpenPort { ip: ev.ip, port: ev.port, proto: ev.proto });
        self.ctx.emit_blocking(Event::Port(ev));
        match (&self.next, open) {
            (Some(Next::Detection(tx)), Some(open)) => drop(tx.blocking_send(open)),
            (Some(Next::Plugins(tx)), Some(open)) => drop(tx.blocking_send(self.bare(open))),
            _ => {}
        }
    }

    fn bare(&self, p: OpenPort) -> Arc<Service> {
        Arc::new(Service::bare(self.ctx.scan_id.clone(), p.ip, p.port, p.proto))
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
    /// Host discovery's verdicts.
    pub hosts_up: AtomicU64,
    pub hosts_down: AtomicU64,
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
