//! What the port scan tells OS detection about each host, as it goes.
//!
//! In: the scan's `host` and `port` events, the closed ports it counts
//! without reporting them, and each port the raw TCP pass decides. Out:
//! for each host that answered, the ports nmap would send OS probes to
//! (the lowest open TCP port, the lowest closed TCP port, the lowest
//! closed UDP port), its MAC when on-link, and the TTL of a reply; and,
//! when streaming ([`Seen::stream`]), each host handed on the moment its
//! last TCP port is decided, while the scan goes on with other hosts
//! (the rest when the scan ends, [`Seen::finish`]). What always holds: at
//! most [`Seen::MAX_HOSTS`] hosts are kept (a few dozen bytes each); past
//! them new hosts are left out and [`Seen::capped`] says so; a host is
//! handed on once.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Mutex;

use crate::discovery::pacer::Pacer;
use crate::findings::{Event, HostState, PortState, Proto};

/// What the scan saw of one host.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostSeen {
    /// Discovery (or the port scan) found it up.
    pub up: bool,
    pub mac: Option<[u8; 6]>,
    pub open_tcp: Option<u16>,
    pub closed_tcp: Option<u16>,
    pub closed_udp: Option<u16>,
    /// The TTL of a reply from the host itself.
    pub ttl: Option<u8>,
    /// Its round trip, when discovery timed it.
    pub rtt: Option<std::time::Duration>,
    /// Its TCP ports the raw pass has decided.
    pub decided: u32,
    /// Handed on already.
    pub streamed: bool,
}

/// Where finished hosts go.
pub type Handoff = Sender<(IpAddr, HostSeen)>;

/// The hosts seen so far.
#[derive(Debug)]
pub struct Seen {
    hosts: Mutex<HashMap<IpAddr, HostSeen>>,
    max_hosts: usize,
    capped: AtomicBool,
    /// Streaming: each host's TCP ports, and where a finished host goes.
    ready: Mutex<Option<(u32, Handoff)>>,
    /// The raw TCP pass's pace, for probes that share it.
    pacer: Mutex<Option<Pacer>>,
    /// Each host's TCP ports in the raw pass (0: none, no streaming).
    per_host: std::sync::atomic::AtomicUsize,
}

impl Default for Seen {
    fn default() -> Self {
        Seen::with_max_hosts(Seen::MAX_HOSTS)
    }
}

fn lowest(slot: &mut Option<u16>, port: u16) {
    *slot = Some(slot.map_or(port, |p| p.min(port)));
}

/// A MAC address as events write it (`02:00:5e:10:00:01`).
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = s.split(':');
    for b in &mut mac {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

impl Seen {
    /// Most hosts kept.
    pub const MAX_HOSTS: usize = 1 << 18;

    pub fn with_max_hosts(max_hosts: usize) -> Self {
        Seen {
            hosts: Mutex::default(),
            max_hosts,
            capped: AtomicBool::new(false),
            ready: Mutex::default(),
            pacer: Mutex::default(),
            per_host: Default::default(),
        }
    }

    /// Hands each host on to `to` once the raw TCP pass has decided its
    /// `ports` ports (when it is up).
    pub fn stream(&self, ports: usize, to: Handoff) {
        let ports = u32::try_from(ports).unwrap_or(u32::MAX);
        *self.ready.lock().unwrap_or_else(|e| e.into_inner()) = Some((ports, to));
    }

    /// Hands hosts on to `to`, each once the TCP ports told by
    /// [`Seen::ports_per_host`] are decided (none before: then all at the end).
    pub fn stream_to(&self, to: Handoff) {
        self.stream(self.per_host.load(Ordering::Relaxed), to);
    }

    /// How many TCP ports the raw pass decides for each host.
    pub fn ports_per_host(&self, ports: usize) {
        self.per_host.store(ports, Ordering::Relaxed);
    }

    /// The raw TCP pass's pace (set by the pass).
    pub fn set_pacer(&self, pacer: Pacer) {
        *self.pacer.lock().unwrap_or_else(|e| e.into_inner()) = Some(pacer);
    }

    /// The raw TCP pass's pace, once it has one.
    pub fn pacer(&self) -> Option<Pacer> {
        self.pacer.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// One of `ip`'s TCP ports decided by the raw pass (after its events).
    /// A host not seen answering is not recorded (a silent port of a dead
    /// host must not take a place).
    pub fn decided(&self, ip: IpAddr) {
        let ready = self.ready.lock().unwrap_or_else(|e| e.into_inner());
        let Some((ports, to)) = ready.as_ref() else { return };
        let mut hosts = self.hosts.lock().unwrap_or_else(|e| e.into_inner());
        let Some(s) = hosts.get_mut(&ip) else { return };
        s.decided = s.decided.saturating_add(1);
        if *ports > 0 && s.decided >= *ports && s.up && !s.streamed {
            s.streamed = true;
            let _ = to.send((ip, *s));
        }
    }

    /// The scan was cut short: the stream closes, no more host is handed on.
    pub fn close(&self) {
        self.ready.lock().unwrap_or_else(|e| e.into_inner()).take();
    }

    /// The scan is over: every host up not handed on yet goes now, the
    /// stream closes, and every host up is returned, in address order.
    pub fn finish(&self) -> Vec<(IpAddr, HostSeen)> {
        let all = self.take();
        if let Some((_, to)) = self.ready.lock().unwrap_or_else(|e| e.into_inner()).take() {
            for (ip, s) in all.iter().filter(|(_, s)| !s.streamed) {
                let _ = to.send((*ip, *s));
            }
        }
        all
    }

    /// Whether some host was left out (past the cap).
    pub fn capped(&self) -> bool {
        self.capped.load(Ordering::Relaxed)
    }

    fn with(&self, ip: IpAddr, f: impl FnOnce(&mut HostSeen)) {
        let mut hosts = self.hosts.lock().unwrap_or_else(|e| e.into_inner());
        let full = hosts.len() >= self.max_hosts;
        match hosts.get_mut(&ip) {
            Some(h) => f(h),
            None if full => self.capped.store(true, Ordering::Relaxed),
            None => f(hosts.entry(ip).or_default()),
        }
    }

    /// Takes in a `host` or `port` event.
    pub fn saw(&self, ev: &Event) {
        match ev {
            Event::Host(h) if h.state == HostState::Up => self.with(h.ip, |s| {
                s.up = true;
                s.mac = s.mac.or_else(|| h.mac.as_deref().and_then(parse_mac));
                s.ttl = s.ttl.or(h.ttl);
                s.rtt = s.rtt.or_else(|| h.latency.and_then(|l| std::time::Duration::try_from_secs_f64(l).ok()));
            }),
            Event::Port(p) => self.port(p.ip, p.proto, p.port, p.state, p.ttl),
            _ => {}
        }
    }

    /// A port decided (reported or only counted).
    pub fn port(&self, ip: IpAddr, proto: Proto, port: u16, state: PortState, ttl: Option<u8>) {
        if !matches!(state, PortState::Open | PortState::Closed) {
            return;
        }
        self.with(ip, |s| {
            s.up = true;
            s.ttl = s.ttl.or(ttl);
            let slot = match (proto, state) {
                (Proto::Tcp, PortState::Open) => &mut s.open_tcp,
                (Proto::Tcp, _) => &mut s.closed_tcp,
                (Proto::Udp, PortState::Closed) => &mut s.closed_udp,
                (Proto::Udp, _) => return,
            };
            lowest(slot, port);
        });
    }

    /// The addresses recorded (tests).
    #[cfg(test)]
    fn take_peek(&self) -> Vec<IpAddr> {
        self.hosts.lock().unwrap_or_else(|e| e.into_inner()).keys().copied().collect()
    }

    /// The hosts seen up, in address order; the record is emptied.
    pub fn take(&self) -> Vec<(IpAddr, HostSeen)> {
        let hosts = std::mem::take(&mut *self.hosts.lock().unwrap_or_else(|e| e.into_inner()));
        let mut up: Vec<_> = hosts.into_iter().filter(|(_, s)| s.up).collect();
        up.sort_by_key(|(ip, _)| *ip);
        up
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::{HostEvent, PortEvent, Reason};

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn port(ip: IpAddr, port: u16, proto: Proto, state: PortState) -> Event {
        let reason = Reason::SynAck;
        Event::Port(PortEvent { scan_id: "s".into(), ip, port, proto, state, reason, ttl: Some(64), t: 0.0 })
    }

    #[test]
    fn the_lowest_open_and_closed_ports_are_kept_per_protocol() {
        let s = Seen::default();
        let a = ip("198.18.0.2");
        for (p, proto, st) in [
            (443, Proto::Tcp, PortState::Open),
            (22, Proto::Tcp, PortState::Open),
            (80, Proto::Tcp, PortState::Closed),
            (1, Proto::Tcp, PortState::Closed),
            (53, Proto::Udp, PortState::Open),
            (7, Proto::Udp, PortState::Closed),
            (9, Proto::Tcp, PortState::Filtered),
        ] {
            s.saw(&port(a, p, proto, st));
        }
        let got = s.take();
        assert_eq!(got.len(), 1);
        let h = got[0].1;
        assert_eq!((h.open_tcp, h.closed_tcp, h.closed_udp, h.ttl), (Some(22), Some(1), Some(7), Some(64)));
        assert!(s.take().is_empty(), "taken once");
    }

    #[test]
    fn a_host_event_gives_its_mac_and_only_up_hosts_are_taken() {
        let s = Seen::default();
        let mut h = HostEvent {
            scan_id: "s".into(),
            ip: ip("198.18.0.3"),
            state: HostState::Up,
            reason: Reason::ArpResponse,
            ttl: None,
            latency: None,
            mac: Some("02:00:5e:10:00:01".into()),
            t: 0.0,
        };
        s.saw(&Event::Host(h.clone()));
        h.ip = ip("198.18.0.4");
        h.state = HostState::Down;
        s.saw(&Event::Host(h));
        let got = s.take();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].1.mac, Some([2, 0, 0x5e, 0x10, 0, 1]));
        assert_eq!(parse_mac("02:00:5e:10:00"), None);
        assert_eq!(parse_mac("02:00:5e:10:00:01:02"), None);
    }

    #[test]
    fn a_host_is_handed_on_once_when_its_last_port_is_decided_and_the_rest_at_the_end() {
        let s = Seen::default();
        let (tx, rx) = std::sync::mpsc::channel();
        s.stream(2, tx);
        let (a, b, quiet) = (ip("198.18.0.2"), ip("198.18.0.3"), ip("198.18.0.4"));
        s.saw(&port(a, 22, Proto::Tcp, PortState::Open));
        s.decided(a);
        assert!(rx.try_recv().is_err(), "one port of two");
        s.port(a, Proto::Tcp, 1, PortState::Closed, None);
        s.decided(a);
        let (got, seen) = rx.try_recv().unwrap();
        assert_eq!((got, seen.open_tcp, seen.closed_tcp), (a, Some(22), Some(1)));
        s.decided(a);
        s.saw(&port(b, 80, Proto::Tcp, PortState::Open));
        s.decided(quiet);
        s.decided(quiet);
        assert!(rx.try_recv().is_err(), "once; a host never seen up is not handed on");
        assert!(!s.take_peek().contains(&quiet), "nor recorded");
        let all = s.finish();
        assert_eq!(all.iter().map(|(ip, _)| *ip).collect::<Vec<_>>(), [a, b]);
        assert_eq!(rx.try_iter().map(|(ip, _)| ip).collect::<Vec<_>>(), [b], "the rest at the end");
        assert!(rx.recv().is_err(), "then the stream closes");
    }

    #[test]
    fn a_stream_closed_early_hands_on_no_more() {
        let s = Seen::default();
        let (tx, rx) = std::sync::mpsc::channel();
        s.stream(1, tx);
        s.saw(&port(ip("198.18.0.2"), 22, Proto::Tcp, PortState::Open));
        s.close();
        s.decided(ip("198.18.0.2"));
        assert!(rx.recv().is_err(), "closed, nothing sent");
    }

    #[test]
    fn past_the_cap_new_hosts_are_left_out_and_it_says_so() {
        let s = Seen::with_max_hosts(2);
        for last in 1..=3u8 {
            s.saw(&port(IpAddr::from([198, 18, 0, last]), 22, Proto::Tcp, PortState::Open));
        }
        s.saw(&port(ip("198.18.0.1"), 21, Proto::Tcp, PortState::Open));
        assert!(s.capped());
        let got = s.take();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].1.open_tcp, Some(21), "a kept host is still told");
    }
}
