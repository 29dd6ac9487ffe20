//! Service detection: what runs on an open port.
//!
//! In: open ports from discovery, as they are found. Out: `service` events
//! (service, product, version, CPE, banner, TLS chain, and on a port no
//! rule identified the probes' replies), `error` events for ports whose
//! detection failed, and, when plugins run (nmap's script scan), the
//! `fingerprint-strings` script result of each port with replies. What always holds: probes and match
//! rules come from the probe database in probes/*.yaml ([`probes`]), rules
//! are compiled once with size and nesting limits ([`rules`]), at most
//! [`DetectOptions::parallelism`] ports are probed at once, each with one
//! buffer from a fixed pool ([`pool`]), and nothing a server sends can make
//! memory grow past those buffers or detection outlast its time budget
//! ([`detect`]). A TCP port detection leaves as `rpc` or `rpcbind` is then
//! named by its RPC program ([`rpc`], nmap's RPC grinding), with another
//! buffer of the pool and within the same time budget.

#[cfg(test)]
mod catalog;
pub mod detect;
pub mod import;
mod plan;
pub mod pool;
pub mod probes;
pub mod rpc;
pub mod rules;
mod udp;

use std::sync::Arc;

use tokio::sync::{mpsc, Mutex};

pub use detect::{DetectError, DetectOptions, Detection, Detector};
pub use probes::{Probe, ProbeDb};
pub use rules::{Identity, Rule};

use crate::error::ErrorKind;
use crate::findings::{service_fp, Event, Proto, Service, ServiceMethod, Tunnel};
use crate::pipeline::{Ctx, OpenPort};

/// Runs detection on every port that arrives on `ports` until it closes,
/// `parallelism` ports at a time, and sends one `service` event for each
/// (plus an `error` event when detection stopped short), and the service to
/// `next` (the plugins) when there is one. Ports already found are detected
/// even after the scan is stopped: an interrupted scan's resume file no
/// longer holds them.
pub async fn run_stage(
    detector: Detector,
    ports: mpsc::Receiver<OpenPort>,
    next: Option<mpsc::Sender<Arc<Service>>>,
    ctx: Ctx,
) {
    let ports = Arc::new(Mutex::new(ports));
    let rpc = Arc::new(rpc::Shared::new(detector.options().nmap_dirs.clone()));
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..detector.options().parallelism.max(1) {
        let (det, ports, next, ctx) = (detector.clone(), ports.clone(), next.clone(), ctx.clone());
        let rpc = rpc.clone();
        workers.spawn(async move {
            loop {
                let next_port = ports.lock().await.recv().await;
                let Some(open) = next_port else { break };
                let started = tokio::time::Instant::now();
                let mut d = match open.proto {
                    Proto::Tcp => det.detect_named(open.ip, open.port, open.name.as_deref()).await,
                    Proto::Udp => det.detect_udp(open.ip, open.port).await,
                };
                if open.proto == Proto::Tcp && grinds(&d, open.port) {
                    let until = started + det.options().port_timeout;
                    grind(&det, &rpc, open.ip, open.port, until, &mut d).await;
                }
                let (error, service) = to_service(&ctx, open, d);
                if let Some(e) = error {
                    ctx.emit(e).await;
                }
                let service = Arc::new(service);
                ctx.emit(Event::Service(Box::new((*service).clone()))).await;
                // nmap's fingerprint-strings, a result of its script scan:
                // here, where the replies are, when the user's scripts run.
                if next.is_some() && det.options().fingerprint_strings {
                    let now =
                        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
                    let intensity = det.options().intensity;
                    if let Some(ev) = service_fp::strings_event(&service, intensity, now as i64) {
                        ctx.emit(Event::Script(Box::new(ev))).await;
                    }
                }
                if let Some(tx) = &next {
                    let _ = tx.send(service).await;
                }
            }
        });
    }
    while workers.join_next().await.is_some() {}
}

/// Whether detection left a TCP port for the RPC grinder: it answers ONC
/// RPC (`rpc`, a soft match) or is `rpcbind` by a soft match or by the
/// port table alone; never one that is TLS or ran out of time.
fn grinds(d: &Detection, port: u16) -> bool {
    if d.tunnel || d.tls.is_some() || matches!(d.error, Some(DetectError::Timeout(_))) {
        return false;
    }
    match (&d.identity, d.method) {
        (Some(id), Some(ServiceMethod::Soft)) => id.service == "rpc" || id.service == "rpcbind",
        (None, _) => crate::ports::service_name(port, "tcp") == Some("rpcbind"),
        _ => false,
    }
}

/// Grinds a port (see [`rpc`]) by `until` and, when a program answered,
/// names the port after it, as nmap does (`rpcbind 2-4 (RPC #100000)`).
/// A portmapper's list is kept for the host's other ports, whose grinding
/// tries the programs it lists there first.
async fn grind(
    det: &Detector,
    shared: &rpc::Shared,
    ip: std::net::IpAddr,
    port: u16,
    until: tokio::time::Instant,
    d: &mut Detection,
) {
    let addr = std::net::SocketAddr::new(ip, port);
    let connect =
        || async move { crate::wire::conn::tcp(addr, until).await.map_err(|e| std::io::Error::other(e.to_string())) };
    let mut buf = det.pool().get().await;
    let listed = shared.listed_at(ip, port);
    let g = rpc::grind(connect, &mut buf, &listed, shared.programs(), until).await;
    drop(buf);
    if let Some(list) = &g.portmap {
        shared.keep(ip, list);
    }
    // Grinding that found nothing (or ran out of the port's time) leaves
    // the port as detection named it, with no error: detection ended.
    if let Some(p) = g.program {
        d.identity = Some(p.identity());
        d.method = Some(ServiceMethod::Probed);
        d.probe = Some(rpc::PROBE.to_string());
        // Named now: no fingerprint of an unrecognised service.
        d.replies.clear();
    }
}

/// What one detection found, and the error event if it stopped short.
pub fn to_service(ctx: &Ctx, open: OpenPort, d: Detection) -> (Option<Event>, Service) {
    let error = d.error.as_ref().map(|e| {
        let (kind, message) = match e {
            DetectError::Timeout(m) => (ErrorKind::Timeout, m.clone()),
            DetectError::Io(m) => (ErrorKind::Io, m.clone()),
        };
        ctx.error(Some(open.ip), Some(open.port), None, kind, message)
    });
    let mut s = Service::bare(ctx.scan_id.clone(), open.ip, open.port, open.proto);
    s.targetname = open.name.as_deref().map(str::to_string);
    if let Some(id) = d.identity {
        s.id = id;
        s.method = d.method.unwrap_or(ServiceMethod::Probed);
    }
    // A TLS session means TLS, whatever the service inside turned out to be.
    s.tunnel = match &d.tls {
        Some(t) if t.starttls.is_some() => Some(Tunnel::Starttls),
        _ => (d.tunnel || d.tls.is_some()).then_some(Tunnel::Ssl),
    };
    s.probe = d.probe;
    s.banner = d.banner;
    s.tls = d.tls.map(Box::new);
    // Bounded where they are made; bounded again where they leave detection.
    s.replies = d.replies;
    s.replies.truncate(detect::MAX_REPLIES);
    for r in &mut s.replies {
        r.data.truncate(crate::findings::ProbeReply::MAX);
    }
    s.t = ctx.t();
    (error, s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::ProbeReply;

    #[test]
    fn a_service_takes_detections_replies_within_their_bounds() {
        let ctx = Ctx::detached("5c");
        let open = OpenPort { ip: "198.18.0.5".parse().unwrap(), port: 47001, proto: Proto::Tcp, name: None };
        let reply = |i: usize| ProbeReply { probe: format!("P{i}"), data: vec![0xff; ProbeReply::MAX + 10] };
        let d = Detection { replies: (0..detect::MAX_REPLIES + 4).map(reply).collect(), ..Detection::default() };
        let (_, s) = to_service(&ctx, open, d);
        assert_eq!(s.replies.len(), detect::MAX_REPLIES);
        assert!(s.replies.iter().all(|r| r.data.len() == ProbeReply::MAX));
        assert_eq!(s.replies[0].probe, "P0");
        assert_eq!(s.method, ServiceMethod::Table);
    }
}
