//! Service detection: what runs on an open port.
//!
//! In: open ports from discovery, as they are found. Out: `service` events
//! (service, product, version, CPE, banner, TLS chain) and `error` events
//! for ports whose detection failed. What always holds: probes and match
//! rules come from the probe database in probes/*.yaml ([`probes`]), rules
//! are compiled once with size and nesting limits ([`rules`]), at most
//! [`DetectOptions::parallelism`] ports are probed at once, each with one
//! buffer from a fixed pool ([`pool`]), and nothing a server sends can make
//! memory grow past those buffers or detection outlast its time budget
//! ([`detect`]).

#[cfg(test)]
mod catalog;
pub mod dangerously;
pub mod detect;
pub mod import;
pub mod pool;
pub mod probes;
pub mod rules;
pub mod tls;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::{mpsc, Mutex};

pub use detect::{DetectError, DetectOptions, Detection, Detector};
pub use probes::{Probe, ProbeDb};
pub use rules::{Identity, Rule};

use crate::discovery::Stats;
use crate::findings::{ErrorEvent, Event, ServiceEvent, ServiceMethod};

/// Runs detection on every port that arrives on `ports` until it closes,
/// `parallelism` ports at a time, and sends one `service` event for each
/// (plus an `error` event when detection stopped short). Ports already found
/// are detected even after the scan is stopped: an interrupted scan's
/// resume file no longer holds them.
pub async fn run_stage(
    detector: Detector,
    ports: mpsc::UnboundedReceiver<(IpAddr, u16)>,
    events: mpsc::Sender<Event>,
    plugins: Option<mpsc::Sender<crate::plugins::PortInfo>>,
    t0: Instant,
    stats: Arc<Stats>,
) {
    let ports = Arc::new(Mutex::new(ports));
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..detector.options().parallelism.max(1) {
        let (det, ports, events, stats, plugins) =
            (detector.clone(), ports.clone(), events.clone(), stats.clone(), plugins.clone());
        workers.spawn(async move {
            loop {
                let next = ports.lock().await.recv().await;
                let Some((ip, port)) = next else { break };
                let d = det.detect(ip, port).await;
                let info = plugins.as_ref().map(|_| port_info(ip, port, &d));
                for ev in to_events(ip, port, d, t0) {
                    if matches!(ev, Event::Error(_)) {
                        Stats::bump(&stats.errors);
                    }
                    let _ = events.send(ev).await;
                }
                if let (Some(tx), Some(info)) = (&plugins, info) {
                    let _ = tx.send(info).await;
                }
            }
        });
    }
    while workers.join_next().await.is_some() {}
}

/// What plugins are told about a port detection has looked at.
pub fn port_info(ip: IpAddr, port: u16, d: &Detection) -> crate::plugins::PortInfo {
    let mut info = crate::plugins::PortInfo::bare(ip, port);
    if let Some(id) = &d.identity {
        info.service = Some(id.service.clone());
        info.product = id.product.clone();
        info.version = id.version.clone();
    }
    info.tunnel = d.tunnel || d.tls.is_some();
    info.banner = d.banner.clone();
    info.tls = d.tls.clone();
    info
}

/// The events one detection gives.
pub fn to_events(ip: IpAddr, port: u16, d: Detection, t0: Instant) -> Vec<Event> {
    let mut out = Vec::with_capacity(2);
    if let Some(e) = &d.error {
        let (kind, message) = match e {
            DetectError::Timeout(m) => (crate::findings::ErrorKind::Timeout, m.clone()),
            DetectError::Io(m) => (crate::findings::ErrorKind::Io, m.clone()),
        };
        out.push(Event::Error(ErrorEvent { ip: Some(ip), port: Some(port), plugin: None, kind, message }));
    }
    let (id, method) = match d.identity {
        Some(id) => (id, d.method.unwrap_or(ServiceMethod::Probed)),
        None => {
            let service = crate::targets::ports::service_name(port, "tcp").unwrap_or("unknown");
            (Identity { service: service.to_string(), ..Default::default() }, ServiceMethod::Table)
        }
    };
    out.push(Event::Service(Box::new(ServiceEvent {
        ip,
        port,
        proto: "tcp",
        service: id.service,
        method,
        tunnel: d.tunnel.then_some("ssl"),
        product: id.product,
        version: id.version,
        info: id.info,
        os: id.os,
        hostname: id.hostname,
        device: id.device,
        cpe: id.cpe,
        probe: d.probe,
        banner: detect::printable(&d.banner),
        tls: d.tls.map(Box::new),
        t: t0.elapsed().as_secs_f64(),
    })));
    out
}
