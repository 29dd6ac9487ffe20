//! OS detection and traceroute as stages of the scan: once the port scan
//! has decided the hosts' ports, their OS probes go out (many hosts at
//! once) and an `os` event comes back for each; traceroute sends its
//! probes beside them and a `trace` event comes back for each host.
//!
//! In: [`OsPlan`] (the database, if any, and nmap's options), the scan's
//! [`Ctx`], the hosts seen up ([`HostSeen`]) and the [`Links`] to reach
//! them. Out: one `os` event per host probed, one `trace` event per host
//! traced, and an `error` event for a host that cannot be (IPv6 for -O,
//! this machine's own addresses, no path). What always holds: a host's
//! trouble never ends a stage; a stop ends it with what is done.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::compute;
use super::db::OsDb;
use super::matching::{self, MatchOptions};
use super::run::{self, Settings, Target, Try};
use super::seen::HostSeen;
use super::submit::{self, ScanLine};
use crate::discovery::syn::Links;
use crate::error::ErrorKind;
use crate::findings::{Event, OsEvent, PortUsed, Proto};
use crate::pipeline::Ctx;

/// What `-O` was asked to do.
#[derive(Debug)]
pub struct OsPlan {
    /// nmap-os-db, parsed once; `None` when nmap is not installed and no
    /// `--os-db` was given (fingerprints are still reported).
    pub db: Option<OsDb>,
    /// `--osscan-guess` / `--fuzzy`.
    pub guess: bool,
    /// `--osscan-limit`: only hosts with an open and a closed TCP port.
    pub limit: bool,
    /// `--max-os-tries`.
    pub max_tries: u32,
    /// A UDP scan runs too (nmap then never blames a missing U1 reply on
    /// not having looked for a closed UDP port).
    pub udp_scan: bool,
}

/// nmap's pick of a closed port it never saw: 30000-44780.
fn random_port(salt: u64) -> u16 {
    let mut b = [0u8; 8];
    let _ = getrandom::fill(&mut b);
    30_000 + ((u64::from_le_bytes(b) ^ salt) % 14_781) as u16
}

/// Why a host cannot be fingerprinted, if it cannot.
fn target_for(ip: IpAddr, s: &HostSeen, links: Option<&Links>, plan: &OsPlan) -> Result<Target, String> {
    let IpAddr::V4(v4) = ip else {
        return Err("OS detection of IPv6 hosts is not supported yet".into());
    };
    if plan.limit && (s.open_tcp.is_none() || s.closed_tcp.is_none()) {
        return Err(String::new());
    }
    let links = links.ok_or("OS detection sends raw packets, which need CAP_NET_RAW (run as root)")?;
    if links.loopback {
        return Err("OS detection sends raw packets, which cannot reach this machine's own addresses".into());
    }
    let hop = match (links.on_link(ip), s.mac) {
        (Some(h), Some(mac)) => crate::discovery::syn::Hop { dst_mac: mac, ..h },
        _ => links.hop(ip).map_err(|why| format!("no path for OS probes: {why}"))?,
    };
    Ok(Target {
        ip: v4,
        hop,
        open: s.open_tcp,
        closed: Some(s.closed_tcp.unwrap_or_else(|| random_port(1))),
        closed_udp: s.closed_udp.unwrap_or_else(|| random_port(2)),
        rtt: s.rtt,
        seen: *s,
    })
}

/// What nmap says is wrong with a fingerprint (its "OS fingerprint not
/// ideal because: ..."), if anything, in nmap's order of checks. A port
/// picked at random because the scan found none does not count as found.
fn not_ideal(s: &HostSeen, u1: bool, distance: Option<u8>, udp_scan: bool) -> Option<String> {
    if s.open_tcp.is_none() {
        return Some("Missing an open TCP port so results incomplete".into());
    }
    if s.closed_tcp.is_none() {
        return Some("Missing a closed TCP port so results incomplete".into());
    }
    if let Some(d) = distance.filter(|d| *d > 5) {
        return Some(format!("Host distance ({d} network hops) is greater than five"));
    }
    if !u1 && s.closed_udp.is_none() && !udp_scan {
        return Some("Didn't receive UDP response. Please try again with -sSU".into());
    }
    None
}

/// The `os` event of a host from its tries.
pub fn judge(plan: &OsPlan, ctx: &Ctx, ip: Ipv4Addr, s: &HostSeen, tries: &[Try], now: SystemTime) -> OsEvent {
    let mut ev = OsEvent::hint(ctx.scan_id.clone(), IpAddr::V4(ip), crate::findings::OsHint::default(), ctx.t());
    ev.hint = None;
    ev.guess = plan.guess;
    let Some(best) = run::best_try(tries) else { return ev };
    let p = &best.params;
    if let Some(port) = s.open_tcp {
        ev.ports_used.push(PortUsed { state: "open".into(), proto: Proto::Tcp, port });
    }
    // As nmap's <portused>: a closed TCP port the scan found (not one
    // picked at random), the closed UDP port found or answered on.
    let u1 = best.replies.of.get(&super::probes::Probe::U1).is_some_and(|e| e.reply.is_some());
    if let Some(port) = s.closed_tcp {
        ev.ports_used.push(PortUsed { state: "closed".into(), proto: Proto::Tcp, port });
    }
    if let Some(port) = s.closed_udp.or(u1.then_some(p.closed_udp)) {
        ev.ports_used.push(PortUsed { state: "closed".into(), proto: Proto::Udp, port });
    }
    let fp = compute::fingerprint(p, &best.replies);
    // nmap's distance: 1 for a host on the link (its MAC known), else the
    // hops U1's quoted TTL counts; none without either.
    ev.distance = if s.mac.is_some() { Some(1) } else { compute::distance_icmp(p, &best.replies) };
    (ev.tcp_sequence, ev.ip_id_sequence, ev.tcp_ts_sequence) = compute::sequences(&best.replies);
    ev.uptime = compute::uptime(&best.replies, now);
    ev.not_ideal = not_ideal(s, u1, ev.distance, plan.udp_scan);
    let line = ScanLine {
        version: format!("moonscan-{}", env!("CARGO_PKG_VERSION")),
        open: s.open_tcp,
        closed: s.closed_tcp,
        // nmap's CU: the closed UDP port the scan found, or the one U1 was
        // answered on.
        closed_udp: s.closed_udp.or(u1.then_some(p.closed_udp)),
        // nmap's isipprivate: RFC 1918 and link-local.
        private: match ip.octets() {
            [10, ..] | [192, 168, ..] | [169, 254, ..] => true,
            [172, b, ..] => (16..32).contains(&b),
            _ => false,
        },
        distance: ev.distance,
        // nmap's DC: D for a host on the link (its MAC known), I from U1's
        // quoted TTL, none otherwise.
        dc: if s.mac.is_some() {
            'D'
        } else if compute::distance_icmp(p, &best.replies).is_some() {
            'I'
        } else {
            '-'
        },
        good: ev.not_ideal.is_none(),
        mac: s.mac.map(|m| [m[0], m[1], m[2]]),
        time: now.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs()),
        platform: format!("{}-unknown-linux-gnu", std::env::consts::ARCH),
    };
    ev.fingerprint = Some(submit::submission(&fp, &line));
    if let Some(db) = &plan.db {
        let out = matching::best(db, &fp, &MatchOptions { guess: plan.guess });
        ev.matches = out.matches;
        ev.exact = out.exact;
        ev.too_many = out.too_many;
        ev.classification = out.classes;
    }
    ev
}

/// Starts OS detection beside the scan: each host the scan hands on
/// through `seen`'s stream is fingerprinted at once, and the stage ends
/// once the stream closes ([`super::seen::Seen::finish`]) and every host
/// is done. `max_wait`: the longest wait for a reply; `max_rate`: the
/// scan's `--max-rate`, kept to (with the port scan's own pace while it
/// runs, whose turns the OS probes take).
pub fn start(
    plan: Arc<OsPlan>,
    ctx: &Ctx,
    links: Option<Arc<Links>>,
    seen: Arc<super::seen::Seen>,
    max_wait: Duration,
    max_rate: Option<f64>,
) -> tokio::task::JoinHandle<()> {
    let (tx, rx) = std::sync::mpsc::channel();
    seen.stream_to(tx);
    let ctx = ctx.clone();
    tokio::task::spawn_blocking(move || {
        let settings = Settings {
            max_wait: max_wait.max(Duration::from_millis(300)),
            max_tries: plan.max_tries.max(1),
            max_rate,
            ..Settings::default()
        };
        // Said, not counted among the scan's errors: the host's ports
        // were scanned (as nmap warns of what it cannot do to a host).
        let warn = |ip: IpAddr, why: String| {
            let _ = ctx.events.blocking_send(ctx.error(Some(ip), None, None, ErrorKind::Io, why));
        };
        // Without discovery (-Pn), the port scan timed each host.
        let timed = |ip: IpAddr, s: &HostSeen| {
            let rtt = s.rtt.or_else(|| ctx.latency.as_ref()?.of(ip).and_then(|l| Duration::try_from_secs_f64(l).ok()));
            HostSeen { rtt, ..*s }
        };
        let mut resolve = |ip: IpAddr, s: &HostSeen| match target_for(ip, &timed(ip, s), links.as_deref(), &plan) {
            Ok(t) => Some(t),
            Err(why) if why.is_empty() => None,
            Err(why) => {
                warn(ip, why);
                None
            }
        };
        let Some(ifindex) = links.as_ref().filter(|l| !l.loopback).map(|l| l.ifindex) else {
            // Nothing can be probed: each host still says why.
            for (ip, s) in rx.iter() {
                resolve(ip, &s);
            }
            return;
        };
        let stop = || ctx.stop.is_set();
        let pacer = || seen.pacer();
        // Matching and sending the event on a thread of their own: the
        // probing loop never waits for them (other hosts' SEQ probes keep
        // their 100 ms spacing).
        let (judged, to_judge) = std::sync::mpsc::channel::<(Target, Vec<Try>, SystemTime)>();
        let done = std::thread::scope(|scope| {
            scope.spawn(|| {
                for (t, tries, at) in to_judge {
                    let ev = judge(&plan, &ctx, t.ip, &t.seen, &tries, at);
                    ctx.emit_blocking(Event::Os(Box::new(ev)));
                }
            });
            let done = run::run(&rx, &mut resolve, ifindex, &settings, &pacer, &stop, |t, tries| {
                let _ = judged.send((*t, tries, SystemTime::now()));
            });
            drop(judged);
            done
        });
        if let Err(e) = done {
            ctx.emit_blocking(ctx.error(None, None, None, ErrorKind::Io, format!("OS detection: {e}")));
        }
    })
}

/// The port nmap's traceroute would use for a host: the probe that drew
/// the host's best answer by nmap's `pingprobe_score` (a RST beats an
/// ICMP reply, which beats a SYN-ACK; the first of equals is kept), so a
/// routed host found up by discovery's ACK (a RST) is traced to that
/// port, else to its lowest closed TCP port, else to its lowest open one,
/// else to its closed UDP port. An on-link host is its own first hop.
fn trace_port(s: &HostSeen, ack: Option<u16>) -> Option<(u16, Proto, bool)> {
    const SPOOFED: [u16; 5] = [25, 113, 135, 139, 445];
    let closed = s.closed_tcp.map(|p| (p, Proto::Tcp, false));
    match (ack.filter(|_| s.mac.is_none()), closed) {
        (Some(p), _) => Some((p, Proto::Tcp, false)),
        (None, Some(c)) if !SPOOFED.contains(&c.0) => Some(c),
        // A closed port among the spoofed ones only when nothing else answered.
        (None, c) => s.open_tcp.map(|p| (p, Proto::Tcp, true)).or(c).or(s.closed_udp.map(|p| (p, Proto::Udp, false))),
    }
}

/// Traces the path to every host seen up that answered on a port.
/// `ack`: the port of host discovery's ACK probe, if it sent one.
pub async fn trace(
    ctx: &Ctx,
    links: Option<Arc<Links>>,
    hosts: &[(IpAddr, HostSeen)],
    ack: Option<u16>,
    timeout: Duration,
) {
    use crate::discovery::trace::{self as tr, TraceTarget};
    let targets: Vec<TraceTarget> = hosts
        .iter()
        .filter_map(|(ip, s)| {
            let (port, proto, open) = trace_port(s, ack)?;
            Some(TraceTarget { ip: *ip, port, proto, open, ttl_seen: s.ttl })
        })
        .collect();
    let Some(links) = links.filter(|_| !targets.is_empty()) else { return };
    if links.loopback {
        return;
    }
    let stop = ctx.stop.clone();
    let done = tokio::task::spawn_blocking(move || tr::run(&targets, &links, timeout, &|| stop.is_set())).await;
    match done {
        Ok(Ok(results)) => {
            for r in results.into_iter().filter(|r| !r.hops.is_empty()) {
                let ev = crate::findings::TraceEvent {
                    scan_id: ctx.scan_id.clone(),
                    ip: r.ip,
                    port: r.port,
                    proto: r.proto,
                    hops: r.hops,
                    t: ctx.t(),
                };
                ctx.emit(Event::Trace(Box::new(ev))).await;
            }
        }
        Ok(Err(e)) => ctx.emit(ctx.error(None, None, None, ErrorKind::Io, format!("traceroute: {e}"))).await,
        Err(e) => ctx.emit(ctx.error(None, None, None, ErrorKind::Io, format!("traceroute failed: {e}"))).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(open: Option<u16>, closed: Option<u16>, mac: bool) -> HostSeen {
        HostSeen {
            open_tcp: open,
            closed_tcp: closed,
            mac: mac.then_some([2, 0, 0, 0, 0, 1]),
            up: true,
            ..HostSeen::default()
        }
    }

    #[test]
    fn traceroute_takes_the_port_of_the_best_answer_as_nmap_scores_them() {
        // A routed host found up by discovery's ACK: that port (a RST).
        assert_eq!(trace_port(&host(Some(22), Some(1), false), Some(80)), Some((80, Proto::Tcp, false)));
        // On the link (ARP found it): a closed port's RST beats a SYN-ACK.
        assert_eq!(trace_port(&host(Some(22), Some(1), true), Some(80)), Some((1, Proto::Tcp, false)));
        assert_eq!(trace_port(&host(Some(22), None, true), None), Some((22, Proto::Tcp, true)));
        // A closed port among those often spoofed only when nothing else answered.
        assert_eq!(trace_port(&host(Some(22), Some(25), true), None), Some((22, Proto::Tcp, true)));
        assert_eq!(trace_port(&host(None, Some(25), true), None), Some((25, Proto::Tcp, false)));
        let udp = HostSeen { closed_udp: Some(7), ..host(None, None, true) };
        assert_eq!(trace_port(&udp, None), Some((7, Proto::Udp, false)));
        assert_eq!(trace_port(&host(None, None, true), None), None);
    }

    #[test]
    fn nmaps_reasons_a_fingerprint_is_not_ideal_come_in_nmaps_order() {
        let full = HostSeen { closed_udp: None, ..host(Some(22), Some(1), false) };
        assert_eq!(
            not_ideal(&host(None, Some(1), false), true, Some(1), false).unwrap(),
            "Missing an open TCP port so results incomplete"
        );
        assert_eq!(
            not_ideal(&host(Some(22), None, false), true, Some(1), false).unwrap(),
            "Missing a closed TCP port so results incomplete"
        );
        assert_eq!(
            not_ideal(&full, false, Some(9), false).unwrap(),
            "Host distance (9 network hops) is greater than five"
        );
        assert_eq!(
            not_ideal(&full, false, Some(2), false).unwrap(),
            "Didn't receive UDP response. Please try again with -sSU"
        );
        assert_eq!(not_ideal(&full, false, Some(2), true), None, "a UDP scan ran");
        assert_eq!(not_ideal(&full, true, Some(2), false), None);
    }
}
