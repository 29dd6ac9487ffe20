//! Connect scan: one non-blocking `connect()` per probe.
//!
//! Works without privileges. A completed handshake means open, a refusal
//! means closed, silence means filtered after the last retry. Sockets get
//! `SO_LINGER 0`, so closing an open port's connection sends a RST and leaves
//! no TIME_WAIT behind. Running out of descriptors or local ports is not a
//! result: the probe waits briefly and tries again.

use std::collections::HashSet;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::net::TcpSocket;
use tokio::sync::{mpsc, Semaphore};

use super::{Limiter, Stats, Stop, Timing};
use crate::findings::{ErrorEvent, ErrorKind, Event, PortEvent, PortState};
use crate::targets::ScanOrder;

/// How a single connect attempt ended.
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

async fn attempt(addr: SocketAddr, timeout: Duration) -> Attempt {
    let socket = match addr {
        SocketAddr::V4(_) => TcpSocket::new_v4(),
        SocketAddr::V6(_) => TcpSocket::new_v6(),
    };
    let socket = match socket {
        Ok(s) => s,
        Err(e) => return classify(e),
    };
    if let Err(e) = socket.set_zero_linger() {
        return Attempt::Failed(e);
    }
    match tokio::time::timeout(timeout, socket.connect(addr)).await {
        Err(_) => Attempt::TimedOut,
        Ok(Ok(_stream)) => Attempt::Open,
        Ok(Err(e)) => classify(e),
    }
}

fn classify(e: io::Error) -> Attempt {
    match e.raw_os_error() {
        Some(libc::ECONNREFUSED) => Attempt::Closed,
        Some(libc::ETIMEDOUT) => Attempt::TimedOut,
        Some(libc::EHOSTUNREACH | libc::EHOSTDOWN) => Attempt::HostUnreachable,
        Some(
            libc::EMFILE
            | libc::ENFILE
            | libc::ENOBUFS
            | libc::ENOMEM
            | libc::EADDRNOTAVAIL
            | libc::EAGAIN,
        ) => Attempt::Resource,
        _ => Attempt::Failed(e),
    }
}

/// What every probe of one scan shares.
struct Shared {
    timing: Timing,
    limiter: Limiter,
    events: mpsc::Sender<Event>,
    stats: Arc<Stats>,
    t0: Instant,
    /// Hosts that already had an error reported (one error event per host).
    reported: Mutex<HashSet<IpAddr>>,
}

/// Longest a probe keeps retrying for local resources before giving up.
const RESOURCE_RETRIES: u32 = 500;

async fn probe(sh: &Shared, ip: IpAddr, port: u16) {
    let addr = SocketAddr::new(ip, port);
    let (mut tries, mut starved) = (0u32, 0u32);
    loop {
        let outcome = attempt(addr, sh.timing.timeout).await;
        if !matches!(outcome, Attempt::Resource) {
            Stats::bump(&sh.stats.sent);
        }
        match outcome {
            Attempt::Open => {
                Stats::bump(&sh.stats.open);
                let ev = PortEvent {
                    ip,
                    port,
                    proto: "tcp",
                    state: PortState::Open,
                    reason: "syn-ack",
                    ttl: None,
                    t: sh.t0.elapsed().as_secs_f64(),
                };
                let _ = sh.events.send(Event::Port(ev)).await;
            }
            Attempt::Closed => Stats::bump(&sh.stats.closed),
            Attempt::TimedOut if tries < sh.timing.retries => {
                tries += 1;
                sh.limiter.acquire().await;
                continue;
            }
            Attempt::TimedOut | Attempt::HostUnreachable => Stats::bump(&sh.stats.filtered),
            Attempt::Resource if starved < RESOURCE_RETRIES => {
                starved += 1;
                tokio::time::sleep(Duration::from_millis(2)).await;
                continue;
            }
            Attempt::Resource => {
                let e = io::Error::other("out of sockets or local ports");
                report(sh, ip, port, &e).await;
            }
            Attempt::Failed(e) => report(sh, ip, port, &e).await,
        }
        return;
    }
}

async fn report(sh: &Shared, ip: IpAddr, port: u16, e: &io::Error) {
    Stats::bump(&sh.stats.errors);
    let first = sh
        .reported
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(ip);
    if first {
        let ev = ErrorEvent {
            ip: Some(ip),
            port: Some(port),
            plugin: None,
            kind: ErrorKind::Io,
            message: format!("connect: {e}"),
        };
        let _ = sh.events.send(Event::Error(ev)).await;
    }
}

/// Probes every pair of `order`. Returns true if `stop` cut the scan short.
pub async fn run(
    order: ScanOrder<'_>,
    timing: &Timing,
    t0: Instant,
    events: &mpsc::Sender<Event>,
    stats: &Arc<Stats>,
    stop: &mut Stop,
) -> bool {
    let window = Arc::new(Semaphore::new(timing.window.max(1)));
    let shared = Arc::new(Shared {
        timing: timing.clone(),
        limiter: Limiter::new(timing.max_rate),
        events: events.clone(),
        stats: stats.clone(),
        t0,
        reported: Mutex::new(HashSet::new()),
    });
    let mut interrupted = false;
    for (ip, port) in order {
        let permit = tokio::select! {
            biased;
            _ = stop.wait() => { interrupted = true; break; }
            p = window.clone().acquire_owned() => p.expect("semaphore never closed"),
        };
        tokio::select! {
            biased;
            _ = stop.wait() => { interrupted = true; break; }
            _ = shared.limiter.acquire() => {}
        }
        let sh = shared.clone();
        tokio::spawn(async move {
            probe(&sh, ip, port).await;
            drop(permit);
        });
    }
    // Wait for the probes still out: every permit back means every probe done.
    let _all = window.acquire_many(timing.window.max(1) as u32).await;
    interrupted
}
