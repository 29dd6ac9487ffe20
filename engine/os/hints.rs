//! The passive OS hint: what the port scan's SYN-ACKs say of each host's
//! stack, at no cost in probes.
//!
//! In: each SYN-ACK frame the raw port scan accepts. Out: per host, the
//! first one's TTL, window, MSS, window scale and option order
//! ([`SynAck`]), which [`super::passive::hint`] turns into an OS-family
//! guess. What always holds: at most [`Hints::MAX_HOSTS`] hosts are kept
//! (a few dozen bytes each), one SYN-ACK each; a frame that does not parse
//! is ignored.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;

use pnet_packet::ethernet::{EtherTypes, EthernetPacket};
use pnet_packet::ipv4::Ipv4Packet;
use pnet_packet::ipv6::Ipv6Packet;
use pnet_packet::tcp::TcpPacket;
use pnet_packet::Packet;

/// What one SYN-ACK showed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SynAck {
    pub ttl: u8,
    pub window: u16,
    pub mss: Option<u16>,
    pub wscale: Option<u8>,
    /// The options in order, one letter each as nmap writes them (M, W, S,
    /// T, N, E for end of list), comma-separated: `M,S,T,N,W`.
    pub order: String,
}

/// The TCP options of a segment in order, with MSS and window scale.
pub fn options(raw: &[u8]) -> (Option<u16>, Option<u8>, String) {
    let (mut mss, mut ws, mut order) = (None, None, Vec::new());
    let mut i = 0;
    while i < raw.len() && order.len() < 16 {
        let kind = raw[i];
        match kind {
            0 => {
                order.push("E");
                break;
            }
            1 => {
                order.push("N");
                i += 1;
                continue;
            }
            _ => {}
        }
        let Some(&len) = raw.get(i + 1) else { break };
        let len = usize::from(len);
        if len < 2 || i + len > raw.len() {
            break;
        }
        let body = &raw[i + 2..i + len];
        order.push(match kind {
            2 => {
                mss = body.get(..2).map(|b| u16::from_be_bytes([b[0], b[1]]));
                "M"
            }
            3 => {
                ws = body.first().copied();
                "W"
            }
            4 => "S",
            8 => "T",
            _ => "?",
        });
        i += len;
    }
    (mss, ws, order.join(","))
}

/// The SYN-ACK in an Ethernet frame, if it is one.
pub fn syn_ack(frame: &[u8]) -> Option<SynAck> {
    let eth = EthernetPacket::new(frame)?;
    let (ttl, tcp) = match eth.get_ethertype() {
        EtherTypes::Ipv4 => {
            let ip = Ipv4Packet::new(eth.payload())?;
            let hl = usize::from(ip.get_header_length()) * 4;
            (ip.get_ttl(), eth.payload().get(hl..)?.to_vec())
        }
        EtherTypes::Ipv6 => {
            let ip = Ipv6Packet::new(eth.payload())?;
            (ip.get_hop_limit(), ip.payload().to_vec())
        }
        _ => return None,
    };
    let seg = TcpPacket::new(&tcp)?;
    let off = usize::from(seg.get_data_offset()) * 4;
    if seg.get_flags() & 0x12 != 0x12 || off < 20 || off > tcp.len() {
        return None;
    }
    let (mss, wscale, order) = options(&tcp[20..off]);
    Some(SynAck { ttl, window: seg.get_window(), mss, wscale, order })
}

/// The first SYN-ACK of each host.
#[derive(Debug)]
pub struct Hints {
    hosts: Mutex<HashMap<IpAddr, SynAck>>,
    max_hosts: usize,
}

impl Default for Hints {
    fn default() -> Self {
        Hints::with_max_hosts(Hints::MAX_HOSTS)
    }
}

impl Hints {
    /// Most hosts kept.
    pub const MAX_HOSTS: usize = 1 << 18;

    pub fn with_max_hosts(max_hosts: usize) -> Self {
        Hints { hosts: Mutex::default(), max_hosts }
    }

    /// A SYN-ACK from `ip` (only its host's first is kept).
    pub fn saw(&self, ip: IpAddr, frame: &[u8]) {
        let mut hosts = self.hosts.lock().unwrap_or_else(|e| e.into_inner());
        if hosts.contains_key(&ip) || hosts.len() >= self.max_hosts {
            return;
        }
        if let Some(s) = syn_ack(frame) {
            hosts.insert(ip, s);
        }
    }

    /// Every host's SYN-ACK, in address order; the record is emptied.
    pub fn take(&self) -> Vec<(IpAddr, SynAck)> {
        let hosts = std::mem::take(&mut *self.hosts.lock().unwrap_or_else(|e| e.into_inner()));
        let mut v: Vec<_> = hosts.into_iter().collect();
        v.sort_by_key(|(ip, _)| *ip);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An Ethernet + IPv4 + TCP frame with these flags, window and options.
    fn frame(flags: u8, window: u16, opts: &[u8], ttl: u8) -> Vec<u8> {
        let mut f = vec![0u8; 14];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        let tcp_len = 20 + opts.len();
        let mut ip = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, ttl, 6, 0, 0, 198, 18, 0, 2, 198, 18, 0, 1];
        ip[2..4].copy_from_slice(&((20 + tcp_len) as u16).to_be_bytes());
        f.extend(ip);
        let mut tcp = vec![0u8; 20];
        tcp[12] = ((tcp_len / 4) as u8) << 4;
        tcp[13] = flags;
        tcp[14..16].copy_from_slice(&window.to_be_bytes());
        f.extend(tcp);
        f.extend(opts);
        f
    }

    const LINUX: [u8; 20] = [2, 4, 5, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 7];

    #[test]
    fn a_syn_acks_fields_and_option_order_are_read() {
        let s = syn_ack(&frame(0x12, 65_160, &LINUX, 63)).unwrap();
        assert_eq!(s, SynAck { ttl: 63, window: 65_160, mss: Some(1460), wscale: Some(7), order: "M,S,T,N,W".into() });
        assert!(syn_ack(&frame(0x14, 0, &[], 64)).is_none(), "a RST is no SYN-ACK");
    }

    #[test]
    fn hostile_options_end_the_list_without_a_panic() {
        for opts in [&[2u8, 0, 0, 0][..], &[2, 9, 5, 0], &[3], &[8, 200, 1, 1], &[1, 1, 1, 0]] {
            let mut padded = opts.to_vec();
            padded.resize(opts.len().div_ceil(4) * 4, 0);
            let _ = syn_ack(&frame(0x12, 1, &padded, 64));
        }
        assert_eq!(options(&[1, 1, 0, 2, 4, 5, 0xb4]), (None, None, "N,N,E".into()));
        assert_eq!(options(&[2, 4, 5]).2, "", "a cut option is left out");
        for cut in 0..20 {
            let _ = syn_ack(&frame(0x12, 1, &LINUX, 64)[..34 + cut]);
        }
    }

    #[test]
    fn one_syn_ack_a_host_and_at_most_max_hosts() {
        let h = Hints::with_max_hosts(2);
        let f = frame(0x12, 100, &LINUX, 64);
        for last in 1..=3u8 {
            h.saw(IpAddr::from([198, 18, 0, last]), &f);
        }
        h.saw(IpAddr::from([198, 18, 0, 1]), &frame(0x12, 999, &[], 64));
        let got = h.take();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].1.window, 100, "the first is kept");
        assert!(h.take().is_empty());
    }
}
