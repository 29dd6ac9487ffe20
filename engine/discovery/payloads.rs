//! What a UDP scan sends to each port: the payload of the port's UDP probe
//! in probes/*.yaml (as nmap-payloads does for nmap), or an empty datagram
//! for a port no probe names.
//!
//! A UDP port answers only what its protocol understands, so an empty
//! datagram mostly meets silence (`open|filtered`) where a DNS query to
//! port 53 draws an answer (`open`). For each port the scan sends the UDP
//! probe of lowest rarity that lists it (the first loaded on a tie). Where
//! the probe says its protocol echoes a transaction id (`txid`), the scan
//! writes a keyed id there and keeps only answers that echo it.

use std::collections::HashMap;

use super::syn::frame::MAX_UDP_PAYLOAD;
use crate::service::probes::{ProbeDb, Transport, TxidSpec};

/// One port's datagram.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Payload {
    /// The probe it comes from.
    pub probe: String,
    pub bytes: Vec<u8>,
    pub txid: Option<TxidSpec>,
    /// The server answers from another port (TFTP).
    pub any_port: bool,
}

impl Payload {
    /// The datagram for a probe whose keyed id is `id`: the payload with
    /// the id's low bytes (big-endian) written where the protocol carries
    /// its transaction id.
    pub fn with_id<'a>(&self, id: u32, scratch: &'a mut [u8; MAX_UDP_PAYLOAD]) -> &'a [u8] {
        let n = self.bytes.len().min(MAX_UDP_PAYLOAD);
        scratch[..n].copy_from_slice(&self.bytes[..n]);
        if let Some(t) = self.txid {
            let be = id.to_be_bytes();
            if t.at + t.len <= n {
                scratch[t.at..t.at + t.len].copy_from_slice(&be[4 - t.len..]);
            }
        }
        &scratch[..n]
    }
}

/// Every port's datagram.
#[derive(Clone, Debug, Default)]
pub struct Payloads {
    by_port: HashMap<u16, Payload>,
    /// Probed ports whose answers come from other ports, in order.
    roaming: Vec<u16>,
}

impl Payloads {
    /// For each port, the UDP probe of lowest rarity that lists it (probes
    /// longer than a raw frame carries are left out).
    pub fn from_db(db: &ProbeDb) -> Payloads {
        let mut by_port: HashMap<u16, (u8, Payload)> = HashMap::new();
        for p in db.probes().iter().filter(|p| p.transport == Transport::Udp && p.payload.len() <= MAX_UDP_PAYLOAD) {
            for &port in &p.ports {
                if by_port.get(&port).is_some_and(|(rarity, _)| *rarity <= p.rarity) {
                    continue;
                }
                let payload = Payload {
                    probe: p.name.clone(),
                    bytes: p.payload.clone(),
                    txid: p.txid,
                    any_port: p.answers_from_any_port,
                };
                by_port.insert(port, (p.rarity, payload));
            }
        }
        let by_port: HashMap<u16, Payload> = by_port.into_iter().map(|(port, (_, p))| (port, p)).collect();
        let mut roaming: Vec<u16> = by_port.iter().filter(|(_, p)| p.any_port).map(|(&port, _)| port).collect();
        roaming.sort_unstable();
        Payloads { by_port, roaming }
    }

    /// The ports whose servers answer from another port: an answer that
    /// matches no probe by its source port may answer a probe to one of these.
    pub fn roaming(&self) -> &[u16] {
        &self.roaming
    }

    /// The datagram for `port`; `None` means an empty one.
    pub fn get(&self, port: u16) -> Option<&Payload> {
        self.by_port.get(&port)
    }

    /// Where an answer from `port` echoes our transaction id: (offset, length).
    pub fn echo(&self, port: u16) -> Option<(usize, usize)> {
        self.get(port).and_then(|p| p.txid).map(|t| (t.reply_at, t.len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn db(yaml: &str) -> ProbeDb {
        let mut db = ProbeDb::default();
        db.add_str(yaml, Path::new("test.yaml")).unwrap();
        db
    }

    #[test]
    fn each_port_gets_its_rarest_udp_probe_and_the_id_is_written_in() {
        let db = db(r#"
probes:
  - name: Common
    protocol: udp
    payload: 'AAAA'
    ports: [53, 161]
    rarity: 3
  - name: Better
    protocol: udp
    payload: '\x00\x00xyz'
    ports: [53]
    rarity: 1
    txid: {at: 0, len: 2, reply_at: 0}
  - name: Tie
    protocol: udp
    payload: 'BBBB'
    ports: [161]
    rarity: 3
  - name: Tcp
    payload: 'GET'
    ports: [80]
"#);
        let p = Payloads::from_db(&db);
        assert_eq!(p.get(53).unwrap().probe, "Better");
        assert_eq!(p.get(161).unwrap().probe, "Common", "a tie goes to the probe loaded first");
        assert!(p.get(80).is_none(), "TCP probes are not UDP payloads");
        assert_eq!(p.echo(53), Some((0, 2)));
        assert_eq!(p.echo(161), None);
        let mut scratch = [0u8; MAX_UDP_PAYLOAD];
        assert_eq!(p.get(53).unwrap().with_id(0x1234_abcd, &mut scratch), b"\xab\xcdxyz");
        assert_eq!(p.get(161).unwrap().with_id(0x1234_abcd, &mut scratch), b"AAAA");
    }

    #[test]
    fn payloads_longer_than_a_frame_carries_are_left_out() {
        let big = "A".repeat(MAX_UDP_PAYLOAD + 1);
        let fits = "B".repeat(MAX_UDP_PAYLOAD);
        let yaml = format!(
            "probes:\n  - name: Big\n    protocol: udp\n    payload: '{big}'\n    ports: [7]\n    rarity: 1\n  - name: Fits\n    protocol: udp\n    payload: '{fits}'\n    ports: [7]\n    rarity: 2\n"
        );
        let p = Payloads::from_db(&db(&yaml));
        assert_eq!(p.get(7).unwrap().probe, "Fits", "the rarer probe that fits, not the one that does not");
        let mut scratch = [0u8; MAX_UDP_PAYLOAD];
        assert_eq!(p.get(7).unwrap().with_id(1, &mut scratch).len(), MAX_UDP_PAYLOAD);
    }

    #[test]
    fn the_shipped_probes_give_the_common_udp_ports_a_payload() {
        let db = ProbeDb::load_dir(&crate::service::probes::default_dir(&crate::places::Places::default())).unwrap();
        let p = Payloads::from_db(&db);
        for port in [53, 123, 161, 137, 69, 11211, 1900, 500] {
            assert!(p.get(port).is_some_and(|p| !p.bytes.is_empty()), "no payload for udp/{port}");
        }
    }
}
