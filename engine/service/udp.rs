//! Service detection on an open UDP port (`-sU -sV`).
//!
//! The UDP probes of probes/*.yaml, in nmap's order: those that list the
//! port by rarity, then the others up to the intensity. Each goes from a
//! socket of its own, up to [`PROBES_AT_ONCE`] side by side, each answer read into
//! a pooled buffer (a longer datagram is cut at the buffer's end). Answers
//! are judged in probe order with the same rules as TCP: the first hard
//! match decides; a soft match names the service and leaves only the
//! probes that can say more about it. Sockets are not connected: an
//! answer counts if it comes from the target's address and the probed port
//! (any port of the target, for a probe that says its server answers from
//! another port, as TFTP's does).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use futures_util::future::join_all;
use tokio::net::UdpSocket;
use tokio::time::{timeout_at, Instant};

use super::detect::{DetectError, Detection, Detector};
use super::pool::Loan;
use super::probes::{Probe, Transport};
use super::rules::Identity;
use crate::findings::ServiceMethod;

/// Most UDP probes in flight on one port.
const PROBES_AT_ONCE: usize = 6;

/// Longest wait for one UDP answer (a datagram's answer is one round trip
/// away; the probes' `wait_ms` are sized for TCP banners).
const UDP_WAIT: Duration = Duration::from_millis(1000);

/// Sends of one probe that meets silence: datagrams get lost, and busy
/// servers drop some (BIND 9.18 leaves about one query in five unanswered
/// when the same one comes fast from new ports).
const SENDS: u32 = 2;

/// What one probe drew.
enum Answer {
    Data(Loan, usize),
    Nothing,
}

async fn exchange(addr: SocketAddr, probe: &Probe, mut loan: Loan, until: Instant) -> Answer {
    let local: SocketAddr = match addr.ip() {
        IpAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        IpAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    // Unconnected: a TFTP server answers from another port than the one
    // probed, which a connected socket would never hand us.
    let Ok(sock) = UdpSocket::bind(local).await else { return Answer::Nothing };
    let ours = |from: SocketAddr| from.ip() == addr.ip() && (from.port() == addr.port() || probe.answers_from_any_port);
    for _ in 0..SENDS {
        if sock.send_to(&probe.payload, addr).await.is_err() {
            return Answer::Nothing;
        }
        let wait = until.min(Instant::now() + probe.wait.min(UDP_WAIT));
        loop {
            match timeout_at(wait, sock.recv_from(&mut loan)).await {
                Ok(Ok((n, from))) if ours(from) => return Answer::Data(loan, n),
                Ok(Ok(_)) => continue, // someone else's datagram
                Ok(Err(_)) => return Answer::Nothing,
                Err(_) => break,
            }
        }
        if Instant::now() >= until {
            break;
        }
    }
    Answer::Nothing
}

impl Detector {
    /// Detects the service on the UDP port `ip:port`.
    pub async fn detect_udp(&self, ip: IpAddr, port: u16) -> Detection {
        let addr = SocketAddr::new(ip, port);
        let deadline = Instant::now() + self.options().port_timeout;
        let db = self.db();
        let udp = || db.probes().iter().filter(|p| p.transport == Transport::Udp);
        let mut order: Vec<&Probe> = udp().filter(|p| p.ports.contains(&port)).collect();
        order.sort_by_key(|p| p.rarity);
        let mut rest: Vec<&Probe> =
            udp().filter(|p| !p.ports.contains(&port) && p.rarity <= self.options().intensity).collect();
        rest.sort_by_key(|p| p.rarity);
        order.extend(rest);

        let mut out = Detection::default();
        let mut soft: Option<Identity> = None;
        let mut at = 0;
        while at < order.len() {
            if Instant::now() >= deadline {
                let ms = self.options().port_timeout.as_millis();
                out.error = Some(DetectError::Timeout(format!("service detection stopped after {ms} ms")));
                break;
            }
            // The next probes that can still say something, as many as buffers allow.
            let mut batch: Vec<(&Probe, Loan)> = Vec::new();
            while at < order.len() && batch.len() < PROBES_AT_ONCE {
                let p = order[at];
                let says = |s: &str| p.matches.iter().chain(&p.soft_matches).any(|r| r.service() == s);
                if soft.as_ref().is_some_and(|s| !says(&s.service)) {
                    at += 1;
                    continue;
                }
                let loan = if batch.is_empty() { Some(self.pool().get().await) } else { self.pool().try_get() };
                let Some(loan) = loan else { break };
                batch.push((p, loan));
                at += 1;
            }
            out.probes_sent += batch.len() as u32;
            let probes: Vec<&Probe> = batch.iter().map(|(p, _)| *p).collect();
            let answers = join_all(batch.into_iter().map(|(p, loan)| exchange(addr, p, loan, deadline))).await;
            for (probe, answer) in probes.into_iter().zip(answers) {
                let (loan, n) = match answer {
                    Answer::Data(loan, n) => (loan, n),
                    Answer::Nothing => continue,
                };
                out.bytes_read += n as u64;
                let data = &loan[..n];
                if out.banner.is_empty() {
                    out.banner = data[..n.min(super::detect::BANNER_MAX)].to_vec();
                }
                // An answer that is the probe itself: an echo service (RFC 862).
                let id = if !probe.payload.is_empty() && data == &probe.payload[..] {
                    Some(Identity { service: "echo".into(), ..Identity::default() })
                } else {
                    hard(self, probe, data, soft.as_ref().map(|s| s.service.as_str()))
                };
                if let Some(id) = id {
                    out.identity = Some(id);
                    out.method = Some(ServiceMethod::Probed);
                    out.probe = Some(probe.name.clone());
                    return out;
                }
                if soft.is_none() {
                    soft = probe.soft_matches.iter().find_map(|r| r.apply(data));
                    if soft.is_some() {
                        out.probe = Some(probe.name.clone());
                    }
                }
            }
        }
        finish(out, soft)
    }
}

/// The probe's own rules, then those of the probes it names as fallbacks
/// (never the TCP NULL probe's banners); after a soft match only rules for
/// that service decide.
fn hard(det: &Detector, probe: &Probe, data: &[u8], soft: Option<&str>) -> Option<Identity> {
    let named = probe.fallback.iter().filter_map(|n| det.db().get(n)).filter(|f| f.transport == Transport::Udp);
    let rules = probe.matches.iter().chain(named.flat_map(|f| f.matches.iter()));
    rules.filter(|r| soft.is_none_or(|s| r.service() == s)).find_map(|r| r.apply(data))
}

fn finish(mut out: Detection, soft: Option<Identity>) -> Detection {
    if out.identity.is_none() {
        if let Some(s) = soft {
            out.identity = Some(s);
            out.method = Some(ServiceMethod::Soft);
        }
    }
    out
}
