//! nmap's subject fingerprint text: the `OS:SCAN(...)SEQ(...)...` block
//! nmap prints under "TCP/IP fingerprint:" and keeps in its XML
//! `<osfingerprint fingerprint=...>`, and the reading of such a block back.
//!
//! In: a [`Fingerprint`] and the [`ScanLine`] facts about the scan (nmap's
//! version, ports, distance, MAC prefix, time, platform); or a block of
//! text. Out: [`submission`], the block as nmap 7.93 writes it;
//! [`parse_subject`], the tests of a block. What always holds: the text is
//! nmap's `mergeFPs` with wrapping: the SCAN test and every test run
//! together, cut into lines of `OS:` and 72 characters, each line ending
//! in a newline (the last one too); `parse_subject` reads back what
//! `submission` writes, and nmap's own blocks, wrapped or not.

use super::{Fingerprint, Test};

/// What nmap's SCAN pseudo-test says about the scan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScanLine {
    /// nmap's version (`V=`), e.g. `7.93`.
    pub version: String,
    /// The open TCP port used (`OT=`, empty when none).
    pub open: Option<u16>,
    /// The closed TCP port used (`CT=`).
    pub closed: Option<u16>,
    /// The closed UDP port used (`CU=`).
    pub closed_udp: Option<u16>,
    /// The target's address is private (`PV=Y`).
    pub private: bool,
    /// Hops (`DS=`, left out when unknown).
    pub distance: Option<u8>,
    /// How the distance was found (`DC=`): `L` localhost, `D` direct, `I`
    /// from U1's reply, `T` traceroute; any other character leaves `DC`
    /// out, as nmap does when it has no distance.
    pub dc: char,
    /// The fingerprint is good enough to submit (`G=Y`).
    pub good: bool,
    /// The first three bytes of the target's MAC address (`M=`), when on
    /// the local link.
    pub mac: Option<[u8; 3]>,
    /// The Unix time of the scan: `TM=` in hex and `D=` (month/day, in UTC;
    /// nmap takes the local time zone's).
    pub time: u64,
    /// nmap's platform string (`P=`), e.g. `x86_64-pc-linux-gnu`.
    pub platform: String,
}

/// nmap's line width: `OS:` and 72 characters.
const WRAP: usize = 72;

fn scan_test(s: &ScanLine) -> String {
    let (month, day) = time::OffsetDateTime::from_unix_timestamp(i64::try_from(s.time).unwrap_or(0))
        .map(|t| (u8::from(t.month()), t.day()))
        .unwrap_or((0, 0));
    let port = |p: Option<u16>| p.map(|p| p.to_string()).unwrap_or_default();
    let mut out = format!(
        "SCAN(V={}%E=4%D={}/{}%OT={}%CT={}%CU={}%PV={}",
        s.version,
        month,
        day,
        port(s.open),
        port(s.closed),
        port(s.closed_udp),
        if s.private { 'Y' } else { 'N' }
    );
    if let Some(d) = s.distance {
        out.push_str(&format!("%DS={d}"));
    }
    if matches!(s.dc, 'L' | 'D' | 'I' | 'T') {
        out.push_str(&format!("%DC={}", s.dc));
    }
    out.push_str(&format!("%G={}", if s.good { 'Y' } else { 'N' }));
    if let Some(m) = s.mac {
        out.push_str(&format!("%M={}", crate::text::hex_upper_sep(&m[..3], "")));
    }
    out.push_str(&format!("%TM={:X}%P={})", s.time, s.platform));
    out
}

/// One test as nmap writes it: `T1(R=Y%DF=Y%T=40%...)`.
pub fn test_text(t: &Test) -> String {
    let body: Vec<String> = t.attrs.iter().map(|(a, v)| format!("{a}={v}")).collect();
    format!("{}({})", t.name, body.join("%"))
}

/// The fingerprint as nmap submits it: `OS:`-prefixed lines of at most 75
/// characters, each ending with a newline.
pub fn submission(fp: &Fingerprint, scan: &ScanLine) -> String {
    let mut flat = scan_test(scan);
    for t in &fp.tests {
        flat.push_str(&test_text(t));
    }
    let chars: Vec<char> = flat.chars().collect();
    let mut out = String::with_capacity(flat.len() + flat.len() / WRAP * 4 + 4);
    for line in chars.chunks(WRAP) {
        out.push_str("OS:");
        out.extend(line);
        out.push('\n');
    }
    out
}

/// The tests of a subject fingerprint block: nmap's wrapped `OS:` lines
/// (other lines around them ignored) or its unwrapped one-test-a-line
/// form. The SCAN pseudo-test is not a test and is skipped. `None` when no
/// test is found or one is malformed.
pub fn parse_subject(text: &str) -> Option<Fingerprint> {
    let wrapped = text.lines().any(|l| l.trim_start().starts_with("OS:"));
    let flat: String = if wrapped {
        text.lines().filter_map(|l| l.trim().strip_prefix("OS:")).collect()
    } else {
        text.lines().map(str::trim).collect()
    };
    let mut rest = flat.as_str();
    let mut tests = Vec::new();
    while !rest.is_empty() {
        let open = rest.find('(')?;
        let close = open + rest[open..].find(')')?;
        let name = &rest[..open];
        let body = &rest[open + 1..close];
        rest = &rest[close + 1..];
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric()) {
            return None;
        }
        if name == "SCAN" {
            continue;
        }
        let mut attrs = Vec::new();
        if !body.is_empty() {
            for av in body.split('%') {
                let (a, v) = av.split_once('=')?;
                attrs.push((a.to_string(), v.to_string()));
            }
        }
        tests.push(Test { name: name.to_string(), attrs });
    }
    (!tests.is_empty()).then_some(Fingerprint { tests })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A subject fingerprint in nmap 7.93's format (a Linux host one hop
    /// away), written out by hand as nmap wraps it.
    const NMAP_BLOCK: &str = "\
OS:SCAN(V=7.93%E=4%D=11/28%OT=22%CT=1%CU=40000%PV=Y%DS=1%DC=D%G=Y%M=080027%
OS:TM=6929580C%P=x86_64-pc-linux-gnu)SEQ(SP=105%GCD=1%ISR=10B%TI=Z%CI=Z%II=
OS:I%TS=A)OPS(O1=M5B4ST11NW7%O2=M5B4ST11NW7%O3=M5B4NNT11NW7%O4=M5B4ST11NW7%
OS:O5=M5B4ST11NW7%O6=M5B4ST11)WIN(W1=FE88%W2=FE88%W3=FE88%W4=FE88%W5=FE88%W
OS:6=FE88)ECN(R=Y%DF=Y%T=40%W=FAF0%O=M5B4NNSNW7%CC=Y%Q=)T1(R=Y%DF=Y%T=40%S=
OS:O%A=S+%F=AS%RD=0%Q=)T2(R=N)T3(R=N)T4(R=Y%DF=Y%T=40%W=0%S=A%A=Z%F=R%O=%RD
OS:=0%Q=)T5(R=Y%DF=Y%T=40%W=0%S=Z%A=S+%F=AR%O=%RD=0%Q=)T6(R=Y%DF=Y%T=40%W=0
OS:%S=A%A=Z%F=R%O=%RD=0%Q=)T7(R=Y%DF=Y%T=40%W=0%S=Z%A=S+%F=AR%O=%RD=0%Q=)U1
OS:(R=Y%DF=N%T=40%IPL=164%UN=0%RIPL=G%RID=G%RIPCK=G%RUCK=G%RUD=G)IE(R=Y%DFI
OS:=N%T=40%CD=S)
";

    fn scan() -> ScanLine {
        ScanLine {
            version: "7.93".into(),
            open: Some(22),
            closed: Some(1),
            closed_udp: Some(40000),
            private: true,
            distance: Some(1),
            dc: 'D',
            good: true,
            mac: Some([0x08, 0x00, 0x27]),
            time: 0x6929_580C,
            platform: "x86_64-pc-linux-gnu".into(),
        }
    }

    #[test]
    fn wraps_as_nmap_does() {
        let fp = parse_subject(NMAP_BLOCK).expect("parses");
        assert_eq!(fp.tests.len(), 13);
        assert_eq!(fp.get("T2", "R"), Some("N"));
        assert_eq!(fp.get("T4", "O"), Some(""));
        assert_eq!(fp.get("IE", "CD"), Some("S"));
        assert_eq!(submission(&fp, &scan()), NMAP_BLOCK);
        for line in NMAP_BLOCK.lines() {
            assert!(line.len() <= 75);
        }
    }

    #[test]
    fn scan_line_leaves_out_what_is_unknown() {
        let s = ScanLine { open: None, closed_udp: None, distance: None, dc: ' ', mac: None, good: false, ..scan() };
        let fp = Fingerprint::default();
        let text = submission(&fp, &s);
        assert_eq!(text, "OS:SCAN(V=7.93%E=4%D=11/28%OT=%CT=1%CU=%PV=Y%G=N%TM=6929580C%P=x86_64-pc-li\nOS:nux-gnu)\n");
        assert_eq!(parse_subject(&text), None, "only SCAN: no tests");
    }

    #[test]
    fn reads_unwrapped_and_surrounded_blocks() {
        let plain = "SCAN(V=7.93%E=4)\nSEQ(SP=1%GCD=1)\nIE(R=N)\n";
        let fp = parse_subject(plain).unwrap();
        assert_eq!(fp.tests.len(), 2);
        assert_eq!(fp.get("SEQ", "GCD"), Some("1"));
        let around = format!("TCP/IP fingerprint:\n{NMAP_BLOCK}\nNetwork Distance: 1 hop\n");
        assert_eq!(parse_subject(&around), parse_subject(NMAP_BLOCK));
        assert_eq!(parse_subject(""), None);
        assert_eq!(parse_subject("OS:SEQ(SP"), None);
        assert_eq!(parse_subject("OS:SEQ(SP)"), None);
        assert_eq!(parse_subject("garbage"), None);
    }
}
