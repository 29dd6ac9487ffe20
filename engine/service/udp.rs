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

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use futures_util::future::join_all;
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
    // Unconnected: a TFTP server answers from another port than the one
    // probed, which a connected socket would never hand us.
    let Ok(sock) = crate::wire::conn::udp_socket(addr.ip()).await else { return Answer::Nothing };
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
                    out.banner = data[..n.min(super::plan::BANNER_MAX)].to_vec();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::{DetectOptions, ProbeDb};
    use tokio::net::UdpSocket;

    /// Twelve UDP probes (listing port 9 only), each waiting up to 1 s.
    fn detector(opts: DetectOptions) -> Detector {
        let mut yaml = String::from("probes:\n");
        for i in 0..12 {
            yaml += &format!(
                "  - name: U{i}\n    protocol: udp\n    payload: 'ask{i}'\n    ports: [9]\n    wait_ms: 1000\n    matches:\n      - service: svc{i}\n        pattern: '^answer{i}$'\n"
            );
        }
        let mut db = ProbeDb::default();
        db.add_str(&yaml, std::path::Path::new("t.yaml")).unwrap();
        Detector::new(db, opts).unwrap()
    }

    /// A UDP server on loopback that answers each datagram with `answer(datagram)`.
    async fn server(answer: fn(&[u8]) -> Vec<u8>) -> u16 {
        let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let port = sock.local_addr().unwrap().port();
        tokio::spawn(async move {
            let mut buf = [0u8; 2048];
            while let Ok((n, from)) = sock.recv_from(&mut buf).await {
                let _ = sock.send_to(&answer(&buf[..n]), from).await;
            }
        });
        port
    }

    #[tokio::test]
    async fn answers_are_judged_in_probe_order_and_cut_at_the_buffer() {
        // Answers "answerN" to "askN" for N >= 5, a 3000-byte datagram otherwise.
        let port = server(|d| match std::str::from_utf8(d).ok().and_then(|s| s.strip_prefix("ask")) {
            Some(n) if n.parse::<u32>().unwrap_or(0) >= 5 => format!("answer{n}").into_bytes(),
            _ => vec![b'x'; 3000],
        })
        .await;
        let det = detector(DetectOptions { buffer_size: 256, ..Default::default() });
        // No probe lists the server's port: all 12 go, by rarity (5, within the intensity 7).
        let d = det.detect_udp("127.0.0.1".parse().unwrap(), port).await;
        let id = d.identity.expect("a probe's answer matched");
        assert_eq!(id.service, "svc5", "the first probe in order whose answer matches wins");
        assert_eq!(d.probe.as_deref(), Some("U5"));
        // Five 3000-byte answers came before it, each cut at the 256-byte buffer.
        assert!(d.bytes_read <= 12 * 256, "read {} bytes", d.bytes_read);
    }

    #[tokio::test]
    async fn a_silent_port_ends_within_the_port_budget() {
        let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap(); // never answers
        let port = sock.local_addr().unwrap().port();
        let det = detector(DetectOptions { port_timeout: Duration::from_millis(1500), ..Default::default() });
        let t = std::time::Instant::now();
        let d = det.detect_udp("127.0.0.1".parse().unwrap(), port).await;
        let took = t.elapsed();
        assert!(d.identity.is_none());
        // 12 probes, 6 at a time, each sent twice 1 s apart, would take 4 s unbounded.
        assert!(took < Duration::from_millis(1900), "took {took:?}");
        assert!(matches!(d.error, Some(DetectError::Timeout(_))), "{:?}", d.error);
        drop(sock);
    }
}
