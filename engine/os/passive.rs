//! A passive guess at a host's OS family from one SYN-ACK of the port
//! scan, as p0f does: initial TTL, window, MSS and the order of TCP options.
//!
//! In: the SYN-ACK's TTL and TCP header fields ([`read_syn_ack`] takes
//! them from the header's bytes). Out: an [`OsHint`] with the family and
//! the evidence it was judged from. What always holds: a hint is a guess
//! from a small table of well-known stack habits (written here from public
//! knowledge of those stacks, not taken from p0f's database); when no row
//! fits, the family is `unknown`, never a near miss; the header reader
//! never panics on hostile bytes.
//!
//! Option letters: `M` MSS, `N` NOP, `W` window scale, `S` SACK permitted,
//! `T` timestamp, `E` end of list, `?k` an unknown kind `k`.

use crate::findings::OsHint;

/// The fields of a SYN-ACK a hint is judged from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SynAck {
    pub window: u16,
    pub mss: Option<u16>,
    /// Option order, comma-separated (`M,S,T,N,W`).
    pub options: String,
    pub wscale: Option<u8>,
}

/// Reads a TCP header (from its first byte) for [`hint`]; `None` when it
/// is shorter than it says. Options are read by their lengths up to the
/// end of list or the first malformed one.
pub fn read_syn_ack(tcp: &[u8]) -> Option<SynAck> {
    if tcp.len() < 20 {
        return None;
    }
    let off = usize::from(tcp[12] >> 4) * 4;
    if off < 20 || tcp.len() < off {
        return None;
    }
    let opts = &tcp[20..off];
    let mut names = Vec::new();
    let (mut mss, mut wscale) = (None, None);
    let mut i = 0;
    while let Some(&kind) = opts.get(i) {
        match kind {
            0 => {
                names.push("E".to_string());
                break;
            }
            1 => {
                names.push("N".to_string());
                i += 1;
                continue;
            }
            _ => {}
        }
        let Some(&len) = opts.get(i + 1) else { break };
        let len = usize::from(len);
        let Some(body) = opts.get(i + 2..i + len.max(2)) else { break };
        if len < 2 {
            break;
        }
        match kind {
            2 if body.len() == 2 => {
                mss = Some(u16::from_be_bytes([body[0], body[1]]));
                names.push("M".into());
            }
            3 if body.len() == 1 => {
                wscale = Some(body[0]);
                names.push("W".into());
            }
            4 => names.push("S".into()),
            8 => names.push("T".into()),
            k => names.push(format!("?{k}")),
        }
        i += len;
    }
    Some(SynAck { window: u16::from_be_bytes([tcp[14], tcp[15]]), mss, options: names.join(","), wscale })
}

/// The initial TTL a received TTL most likely started from.
fn initial_ttl(ttl: u8) -> u8 {
    match ttl {
        0..=32 => 32,
        33..=64 => 64,
        65..=128 => 128,
        _ => 255,
    }
}

/// One row of the table: an initial TTL and an option order, with an
/// optional window check.
struct Row {
    family: &'static str,
    ttl: u8,
    /// The option order, or a prefix of it when it ends in `*`.
    options: &'static str,
    window: fn(u16, Option<u16>) -> bool,
}

fn any(_: u16, _: Option<u16>) -> bool {
    true
}

/// Windows sends 8192, 64240 or 65535 (or a multiple of its MSS).
fn windows_window(w: u16, mss: Option<u16>) -> bool {
    matches!(w, 8192 | 16384 | 64240 | 65535) || mss.is_some_and(|m| m > 0 && w.is_multiple_of(m))
}

/// The table, first fit wins.
const TABLE: &[Row] = &[
    // Linux: MSS, SACK, timestamps, NOP, window scale (and without timestamps).
    Row { family: "Linux", ttl: 64, options: "M,S,T,N,W", window: any },
    Row { family: "Linux", ttl: 64, options: "M,N,N,S,N,W", window: any },
    Row { family: "Linux", ttl: 64, options: "M,N,N,T,N,W", window: any },
    Row { family: "Linux", ttl: 64, options: "M,N,W", window: any },
    // macOS: MSS, NOP, window scale, NOP, NOP, timestamps, SACK, end.
    Row { family: "macOS", ttl: 64, options: "M,N,W,N,N,T,S*", window: any },
    // FreeBSD: MSS, NOP, window scale, SACK, timestamps.
    Row { family: "FreeBSD", ttl: 64, options: "M,N,W,S,T", window: any },
    Row { family: "FreeBSD", ttl: 64, options: "M,N,W,S,N,N,T", window: any },
    // Solaris: NOP, NOP, timestamps first, then MSS (TTL 64 or 255).
    Row { family: "Solaris", ttl: 64, options: "N,N,T,M*", window: any },
    Row { family: "Solaris", ttl: 255, options: "N,N,T,M*", window: any },
    // Windows: MSS, NOP, window scale, SACK (timestamps when enabled).
    Row { family: "Windows", ttl: 128, options: "M,N,W,S,T", window: windows_window },
    Row { family: "Windows", ttl: 128, options: "M,N,W,N,N,S", window: windows_window },
    Row { family: "Windows", ttl: 128, options: "M,N,W,N,N,T,N,N,S", window: windows_window },
    Row { family: "Windows", ttl: 128, options: "M,N,N,S", window: windows_window },
    Row { family: "Windows", ttl: 128, options: "M", window: windows_window },
    // Routers, switches and printers: TTL 255 and MSS alone (or nothing).
    Row { family: "network device", ttl: 255, options: "M", window: any },
    Row { family: "network device", ttl: 255, options: "", window: any },
];

fn options_fit(want: &str, got: &str) -> bool {
    match want.strip_suffix('*') {
        Some(prefix) => got.starts_with(prefix),
        None => want == got,
    }
}

/// The family a SYN-ACK suggests, with its evidence
/// (`ttl=64 win=65160 mss=1460 opts=M,S,T,N,W7`: the window scale follows
/// its `W`; `mss=` is left out when there was none).
pub fn hint(ttl: u8, window: u16, mss: Option<u16>, options: &str, wscale: Option<u8>) -> OsHint {
    let init = initial_ttl(ttl);
    let family = TABLE
        .iter()
        .find(|r| r.ttl == init && options_fit(r.options, options) && (r.window)(window, mss))
        .map_or("unknown", |r| r.family);
    let opts: Vec<String> = options
        .split(',')
        .filter(|o| !o.is_empty())
        .map(|o| match (o, wscale) {
            ("W", Some(s)) => format!("W{s}"),
            _ => o.to_string(),
        })
        .collect();
    let mut evidence = format!("ttl={ttl} win={window}");
    if let Some(m) = mss {
        evidence.push_str(&format!(" mss={m}"));
    }
    evidence.push_str(&format!(" opts={}", opts.join(",")));
    OsHint { family: family.to_string(), evidence }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(window: u16, opts: &[u8]) -> Vec<u8> {
        let mut t = vec![0u8; 20];
        t[12] = (((20 + opts.len()) / 4) as u8) << 4;
        t[13] = 0x12;
        t[14..16].copy_from_slice(&window.to_be_bytes());
        t.extend_from_slice(opts);
        t
    }

    #[test]
    fn reads_a_linux_syn_ack() {
        let opts = [2, 4, 5, 0xB4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 7];
        let s = read_syn_ack(&header(65160, &opts)).unwrap();
        assert_eq!(s, SynAck { window: 65160, mss: Some(1460), options: "M,S,T,N,W".into(), wscale: Some(7) });
        let h = hint(64, s.window, s.mss, &s.options, s.wscale);
        assert_eq!(h.family, "Linux");
        assert_eq!(h.evidence, "ttl=64 win=65160 mss=1460 opts=M,S,T,N,W7");
        // Two hops away: TTL 62 still starts from 64.
        assert_eq!(hint(62, 28960, Some(1460), "M,S,T,N,W", Some(7)).family, "Linux");
    }

    #[test]
    fn families() {
        assert_eq!(hint(128, 64240, Some(1460), "M,N,W,S,T", Some(8)).family, "Windows");
        assert_eq!(hint(127, 8192, Some(1460), "M,N,W,N,N,S", Some(8)).family, "Windows");
        assert_eq!(hint(128, 1234, Some(1460), "M,N,W,N,N,S", Some(8)).family, "unknown", "odd window");
        assert_eq!(hint(64, 65535, Some(1460), "M,N,W,S,T", Some(6)).family, "FreeBSD");
        assert_eq!(hint(64, 65535, Some(1460), "M,N,W,N,N,T,S,E", Some(6)).family, "macOS");
        assert_eq!(hint(255, 49232, Some(1460), "N,N,T,M,N,W,N,N,S", Some(0)).family, "Solaris");
        assert_eq!(hint(254, 4128, Some(536), "M", None).family, "network device");
        assert_eq!(hint(255, 4128, None, "", None).evidence, "ttl=255 win=4128 opts=");
        assert_eq!(hint(64, 100, None, "T,T,T", None).family, "unknown");
        assert_eq!(hint(30, 100, Some(1460), "M,S,T,N,W", Some(7)).family, "unknown", "TTL 32 start");
    }

    #[test]
    fn hostile_headers() {
        assert_eq!(read_syn_ack(&[0; 19]), None);
        let mut h = header(1, &[]);
        h[12] = 0xF0;
        assert_eq!(read_syn_ack(&h), None);
        // Zero length, length past the end, unknown kinds.
        assert_eq!(read_syn_ack(&header(1, &[2, 0, 0, 0])).unwrap().options, "");
        assert_eq!(read_syn_ack(&header(1, &[1, 2, 9, 0])).unwrap().options, "N");
        assert_eq!(read_syn_ack(&header(1, &[30, 4, 0, 0])).unwrap().options, "?30");
        assert_eq!(read_syn_ack(&header(1, &[2, 3, 0, 0])).unwrap().options, "?2,E");
        for b in 0..=255u8 {
            let _ = read_syn_ack(&header(1, &[b, b, b, b, 1, b, 3, b]));
        }
    }
}
