//! Probe cookies: the keyed hash that makes raw scans stateless.
//!
//! A probe's sequence number (TCP), IP id and source port come from a keyed
//! SipHash of its addresses and destination port, so a reply is ours only
//! if it comes back to that port and carries the cookie where its kind of
//! reply carries it (a SYN-ACK's ack, a RST's sequence, the probe an ICMP
//! error quotes, a UDP answer's echoed transaction id). Nothing is stored
//! per probe to check it.

use std::hash::Hasher;
use std::net::IpAddr;

use siphasher::sip::SipHasher13;

use super::reply::Reply;
use crate::findings::{Proto, Reason, ScanType};
use crate::targets::addrs::key;

/// Source ports of probes: above Linux's ephemeral range, so no local socket
/// is ever confused with a probe.
pub const SPORT_BASE: u16 = 61_000;
const SPORT_SPAN: u32 = 4_500;
/// Tries a probe's source port tells apart (a later one says "the last").
pub const TRIES: u8 = 8;

/// The keyed hash behind probe sequence numbers and source ports. The
/// source port also carries which of `workers` senders sent the probe, so
/// replies go back to the machine that waits for them.
#[derive(Clone, Copy, Debug)]
pub struct Cookie {
    k0: u64,
    k1: u64,
    workers: u16,
    kind: ScanType,
}

impl Cookie {
    /// The cookie of a SYN scan.
    pub fn new(k0: u64, k1: u64, workers: u16) -> Cookie {
        Cookie { k0, k1, workers: workers.clamp(1, 64), kind: ScanType::Syn }
    }

    /// The same for another raw scan type, whose replies carry the cookie
    /// elsewhere.
    pub fn for_scan(self, kind: ScanType) -> Cookie {
        Cookie { kind, ..self }
    }

    fn hash(&self, src: IpAddr, dst: IpAddr, dport: u16) -> u64 {
        let mut h = SipHasher13::new_with_keys(self.k0, self.k1);
        h.write_u128(key(src));
        h.write_u128(key(dst));
        h.write_u16(dport);
        h.finish()
    }

    /// The sequence number and source port of worker `worker`'s probe from
    /// `src` to `dst:dport`.
    pub fn probe(&self, src: IpAddr, dst: IpAddr, dport: u16, worker: usize) -> (u32, u16) {
        self.probe_try(src, dst, dport, worker, 0)
    }

    /// The same for its try `attempt` (0 the first): the try moves the
    /// source port (by one slot a try, as nmap numbers its tries), so an
    /// answer tells which try it answers, and an answer to a later try
    /// proves the earlier ones lost.
    pub fn probe_try(&self, src: IpAddr, dst: IpAddr, dport: u16, worker: usize, attempt: u8) -> (u32, u16) {
        let v = self.hash(src, dst, dport);
        let n = u32::from(self.workers);
        let slots = SPORT_SPAN / n;
        let slot = ((v >> 32) as u32 % slots + u32::from(attempt.min(TRIES - 1))) % slots;
        (v as u32, SPORT_BASE + (slot * n + worker as u32 % n) as u16)
    }

    /// Which worker sent a probe from source port `sport` (at least [`SPORT_BASE`]).
    pub fn worker_of(&self, sport: u16) -> usize {
        usize::from(sport.saturating_sub(SPORT_BASE) % self.workers)
    }

    /// Which worker's probe `r` answers, if it answers one of ours: the
    /// right source port, and the cookie where the reply carries it. A
    /// SYN's SYN-ACK or RST acknowledges sequence + 1; a RST to a probe
    /// with ACK set takes its sequence from our acknowledgement (RFC 793
    /// 3.4), one to a probe without acknowledges our sequence plus the FIN
    /// it carried; an ICMP error quotes our sequence itself.
    ///
    /// A UDP answer is ours if it comes back to the probe's keyed source
    /// port and, where its protocol echoes one, carries the keyed
    /// transaction id the probe did (the receiver reads it into `seq`); an
    /// ICMP error quoting a UDP probe, if it quotes the probe's IP id.
    pub fn accepts(&self, r: &Reply) -> Option<usize> {
        self.accepts_try(r).map(|(w, _)| w)
    }

    /// [`Cookie::accepts`], and which try of the probe `r` answers.
    pub fn accepts_try(&self, r: &Reply) -> Option<(usize, u8)> {
        let udp = self.kind == ScanType::Udp;
        if r.icmp.is_some_and(Reason::is_pong) || r.dport < SPORT_BASE || (r.proto == Proto::Udp) != udp {
            return None;
        }
        let worker = usize::from((r.dport - SPORT_BASE) % self.workers);
        let n = u32::from(self.workers);
        let slots = SPORT_SPAN / n;
        let v = self.hash(r.dst, r.src, r.sport);
        let slot = u32::from(r.dport - SPORT_BASE) / n;
        let attempt = (slot + slots - (v >> 32) as u32 % slots) % slots;
        if attempt >= u32::from(TRIES) {
            return None;
        }
        let (seq, sport) = self.probe_try(r.dst, r.src, r.sport, worker, attempt as u8);
        let ours = match (r.icmp, self.kind) {
            (Some(_), ScanType::Udp) => r.seq == u32::from(seq as u16),
            (None, ScanType::Udp) => r.seq == seq & r.mask,
            (Some(_), _) => r.seq == seq,
            (None, ScanType::Syn | ScanType::Connect) => (r.is_syn_ack() || r.is_rst()) && r.ack == seq.wrapping_add(1),
            (None, ScanType::Ack | ScanType::Window | ScanType::Maimon) => r.is_rst() && r.seq == seq,
            (None, ScanType::Fin | ScanType::Xmas) => r.is_rst() && r.ack == seq.wrapping_add(1),
            (None, ScanType::Null) => r.is_rst() && r.ack == seq,
        };
        (r.dport == sport && ours).then_some((worker, attempt as u8))
    }
}

#[cfg(test)]
#[path = "cookie_tests.rs"]
pub(crate) mod tests;
