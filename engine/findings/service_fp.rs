//! nmap's two views of a port no rule identified, made from what each probe
//! got back ([`ProbeReply`]): the service fingerprint (`SF-Port...`, which
//! nmap asks users to submit) and the `fingerprint-strings` script result
//! (the readable strings of each reply, under the probes that got them).
//!
//! In: a [`Service`]'s replies, and for the fingerprint's first line the
//! scanner's version, its platform, the version intensity and the time.
//! Out: the fingerprint as `-oN` prints it (wrapped at 74 columns, `SF:`
//! continuing each line, closed by `;`) or as `-oX`'s `servicefp` holds it
//! (the same text unwrapped); the `fingerprint-strings` text and table.
//! What always holds: both are nmap's own algorithms (service_scan.cc's
//! `addToServiceFingerprint`, fingerprint-strings.nse over lpeg-utility's
//! `parse_fp`), so the same bytes give the same text as nmap 7.93, with
//! nmap's limits (900 bytes of each reply, no probe added past 2,200
//! characters); the fingerprint is printable ASCII alone (every other byte
//! is `\xHH`), and the strings hold no byte outside `0x20..=0x7e` but the
//! line breaks between them. No I/O, no clock: the time is passed in.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::{ProbeReply, Proto, ScriptEvent, Service, Tunnel};

/// Bytes of one reply the fingerprint holds (nmap's, without `-d`).
pub const REPLY_USED: usize = 900;
/// A fingerprint longer than this takes no further probe (nmap's, without `-d`).
pub const FULL: usize = 2200;
/// Characters on one line of the fingerprint (nmap's `servicewrap`).
const WRAP: usize = 74;
/// The script id nmap's strings come under.
pub const STRINGS_ID: &str = "fingerprint-strings";
/// Printable ASCII a run needs to count as a string (the script's default `n`).
const MIN_STRING: usize = 4;

/// What the fingerprint's first line says besides the port.
#[derive(Clone, Debug)]
pub struct Header<'a> {
    /// `V=`: the scanner's name and version.
    pub version: &'a str,
    /// `I=`: the version intensity (0-9).
    pub intensity: u8,
    /// `D=`: the month and day the port was detected (nmap's local time;
    /// moonscan's UTC, as all its times).
    pub date: (u8, u8),
    /// `Time=`: seconds since 1970 when the port was detected (hexadecimal).
    pub unix_secs: i64,
    /// `P=`: the platform the scanner was built for.
    pub platform: &'a str,
}

impl Header<'static> {
    /// moonscan's own: `V=moonscan-VERSION`, `P=` the Rust target it was
    /// built for (nmap's fingerprints say nmap's version and platform; one
    /// from moonscan says so, since its probes are not nmap's).
    pub fn moonscan(intensity: u8, unix_secs: i64) -> Header<'static> {
        let (_, t) = crate::text::utc(unix_secs);
        Header {
            version: concat!("moonscan-", env!("CARGO_PKG_VERSION")),
            intensity,
            date: (u8::from(t.month()), t.day()),
            unix_secs,
            platform: env!("MOONSCAN_TARGET"),
        }
    }
}

/// A service fingerprint: nmap's text and the replies it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fingerprint {
    /// As `-oN` prints it: lines of 74 characters, each after the first
    /// starting `SF:`, ending with `;`.
    pub wrapped: String,
    /// Each probe the fingerprint holds, with its reply escaped as in the
    /// fingerprint (`\x20`, `\.`...), at most [`REPLY_USED`] bytes of it.
    pub probes: Vec<(String, String)>,
}

impl Fingerprint {
    /// As `-oX`'s `servicefp` holds it: the same text on one line.
    pub fn unwrapped(&self) -> String {
        unwrap(&self.wrapped)
    }
}

/// A wrapped fingerprint on one line (nmap's `servicefp_sf_remove`).
pub fn unwrap(wrapped: &str) -> String {
    wrapped.replace("\nSF:", "")
}

/// nmap's text with its line wrapping (`addServiceChar`): before a
/// character is added at a position 74 past a multiple of 75, `\nSF:` is.
struct Wrapped(String);

impl Wrapped {
    fn push(&mut self, c: char) {
        if self.0.len() % (WRAP + 1) == WRAP {
            self.0.push_str("\nSF:");
        }
        self.0.push(c);
    }

    fn push_str(&mut self, s: &str) {
        s.chars().for_each(|c| self.push(c));
    }
}

/// A probe name as the fingerprint can hold it (nmap's are letters,
/// digits, `-` and `_`): anything else as `_`.
fn probe_name(name: &str) -> String {
    let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    let name: String = name.chars().map(|c| if ok(c) { c } else { '_' }).take(64).collect();
    if name.is_empty() {
        "_".into()
    } else {
        name
    }
}

/// One reply as the fingerprint writes it (nmap's escaping): letters and
/// digits as they are; NUL as `\0` (`\x00` before a digit); the regex
/// metacharacters `\?"[]().*+$^|` after a backslash; other punctuation as
/// it is; `\r`, `\n`, `\t`; every other byte (space included) as `\xhh`.
pub fn escape(resp: &[u8]) -> String {
    let mut out = String::with_capacity(resp.len() * 2);
    for (i, &b) in resp.iter().enumerate() {
        match b {
            _ if b.is_ascii_alphanumeric() => out.push(b as char),
            0 if resp.get(i + 1).is_some_and(u8::is_ascii_digit) => out.push_str("\\x00"),
            0 => out.push_str("\\0"),
            b'\\' | b'?' | b'"' | b'[' | b']' | b'(' | b')' | b'.' | b'*' | b'+' | b'$' | b'^' | b'|' => {
                out.push('\\');
                out.push(b as char);
            }
            _ if b.is_ascii_punctuation() => out.push(b as char),
            b'\r' => out.push_str("\\r"),
            b'\n' => out.push_str("\\n"),
            b'\t' => out.push_str("\\t"),
            _ => {
                let _ = write!(out, "\\x{b:02x}");
            }
        }
    }
    out
}

/// The service fingerprint of `replies` (replies without a byte left
/// out), or `None` when no probe got one. Each `%r(probe,LENGTH,"...")`
/// gives the length of the reply as kept: nmap's is of all it read, and
/// detection keeps at most [`ProbeReply::MAX`] bytes, so a longer reply
/// says `400`.
pub fn fingerprint(port: u16, proto: Proto, ssl: bool, h: &Header, replies: &[ProbeReply]) -> Option<Fingerprint> {
    let mut fp = Wrapped(String::new());
    let mut probes = Vec::new();
    for r in replies.iter().filter(|r| !r.data.is_empty()) {
        if fp.0.len() > FULL {
            break;
        }
        if fp.0.is_empty() {
            fp.push_str(&format!(
                "SF-Port{port}-{}:V={}{}%I={}%D={}/{}%Time={:X}%P={}",
                proto.as_str().to_ascii_uppercase(),
                probe_name(h.version),
                if ssl { "%T=SSL" } else { "" },
                h.intensity,
                h.date.0,
                h.date.1,
                h.unix_secs as u32,
                probe_name(h.platform),
            ));
        }
        let name = probe_name(&r.probe);
        let body = escape(&r.data[..r.data.len().min(REPLY_USED)]);
        fp.push_str(&format!("%r({name},{:X},\"", r.data.len()));
        fp.push_str(&body);
        fp.push('"');
        fp.push(')');
        probes.push((name, body));
    }
    if probes.is_empty() {
        return None;
    }
    // The closing semicolon is never wrapped.
    fp.0.push(';');
    Some(Fingerprint { wrapped: fp.0, probes })
}

/// A service's fingerprint with moonscan's header, or `None` when it has no
/// replies. `started` is when the scan started (seconds since 1970).
pub fn of_service(s: &Service, intensity: u8, started: f64) -> Option<Fingerprint> {
    let at = (started + s.t).floor() as i64;
    fingerprint(s.port, s.proto, s.tunnel == Some(Tunnel::Ssl), &Header::moonscan(intensity, at), &s.replies)
}

/// What fingerprint-strings.nse reads back from a fingerprint's reply
/// (lpeg-utility's two passes, nmap's quirks kept: `\\` and `\"` lose
/// their backslash first, then `\t \r \n \0` and `\xHH` are decoded and
/// any other backslash is dropped, so a server's own `\` is lost). `None`
/// where the script fails (`\x` followed by no hex digit: `string.char(nil)`).
fn read_back(body: &str) -> Option<Vec<u8>> {
    let b = body.as_bytes();
    // escaped_quote: `\\` and `\"` to the character, other escapes kept.
    let mut first = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && matches!(b.get(i + 1), Some(b'\\' | b'"')) {
            first.push(b[i + 1]);
            i += 2;
        } else {
            first.push(b[i]);
            i += 1;
        }
    }
    // unescape.
    let mut out = Vec::with_capacity(first.len());
    let mut i = 0;
    while i < first.len() {
        if first[i] != b'\\' {
            out.push(first[i]);
            i += 1;
            continue;
        }
        let Some(&c) = first.get(i + 1) else { break };
        match c {
            b't' => out.push(b'\t'),
            b'r' => out.push(b'\r'),
            b'n' => out.push(b'\n'),
            b'0' => out.push(0),
            b'x' => {
                let digits = first[i + 2..].iter().take(2).take_while(|d| d.is_ascii_hexdigit()).count();
                let hex = std::str::from_utf8(&first[i + 2..i + 2 + digits]).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 2 + digits;
                continue;
            }
            c => out.push(c),
        }
        i += 2;
    }
    Some(out)
}

fn printable(b: u8) -> bool {
    (0x21..=0x7e).contains(&b)
}

/// The script's `strings(blob, 4)`, an LPeg grammar tried in order at each
/// position: a run of at least four printable characters or blank runs
/// (each blank run written as one space), else what to skip (up to three
/// printable characters then control, blank or high bytes, repeated),
/// written as a line break and four spaces. `None` when neither matches
/// at the start; what follows the last match is left out.
fn strings(blob: &[u8]) -> Option<String> {
    let mut out = String::new();
    let mut at = 0;
    let mut matched = false;
    loop {
        // plain
        let (mut i, mut n, mut run) = (at, 0, String::new());
        while i < blob.len() {
            if printable(blob[i]) {
                run.push(blob[i] as char);
                i += 1;
            } else if matches!(blob[i], b' ' | b'\t') {
                while i < blob.len() && matches!(blob[i], b' ' | b'\t') {
                    i += 1;
                }
                run.push(' ');
            } else {
                break;
            }
            n += 1;
        }
        if n >= MIN_STRING {
            out.push_str(&run);
            (at, matched) = (i, true);
            continue;
        }
        // skip
        let mut end = None;
        let mut i = at;
        loop {
            let mut j = i;
            while j < blob.len() && j - i < MIN_STRING - 1 && printable(blob[j]) {
                j += 1;
            }
            let k = j + blob[j..].iter().take_while(|&&b| b <= b' ' || b >= 0x7f).count();
            if k == j {
                break;
            }
            (i, end) = (k, Some(k));
        }
        match end {
            Some(e) => {
                out.push_str("\n    ");
                (at, matched) = (e, true);
            }
            None => break,
        }
    }
    matched.then_some(out)
}

/// fingerprint-strings' result for a fingerprint: the readable strings of
/// each reply (probes with the same strings share one entry, named by
/// their names in order, joined by `, `), entries in name order. The text
/// as nmap prints it, and the table (entry name to its lines, each after
/// `\n    `) its XML holds. `None` when no reply has a string.
pub fn strings_result(fp: &Fingerprint) -> Option<(String, BTreeMap<String, String>)> {
    // parse_fp keeps the last reply of a name; the probes go in name order.
    let mut replies: BTreeMap<&str, &str> = BTreeMap::new();
    for (name, body) in &fp.probes {
        replies.insert(name, body);
    }
    let mut by_text: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for (name, body) in replies {
        // A reply the script cannot read fails the whole script.
        let blob = read_back(body)?;
        let Some(plain) = strings(&blob) else { continue };
        let plain = format!("\n    {}", plain.trim_start_matches(['\n', ' ']));
        let plain = plain.trim_end_matches(['\n', ' ']);
        if !plain.is_empty() {
            by_text.entry(plain.to_string()).or_default().push(name);
        }
    }
    let table: BTreeMap<String, String> = by_text.into_iter().map(|(text, names)| (names.join(", "), text)).collect();
    if table.is_empty() {
        return None;
    }
    let mut text = String::new();
    for (label, lines) in &table {
        let _ = write!(text, "\n  {label}: {lines}");
    }
    Some((text, table))
}

/// The `fingerprint-strings` script result of a service with replies (as
/// nmap's script scan gives it), or `None`. It reads the fingerprint the
/// outputs print (moonscan's header at `unix_secs`, now): which probes fit
/// in 2,200 characters depends on the header's length, as in nmap.
pub fn strings_event(s: &Service, intensity: u8, unix_secs: i64) -> Option<ScriptEvent> {
    let h = Header::moonscan(intensity, unix_secs);
    let fp = fingerprint(s.port, s.proto, s.tunnel == Some(Tunnel::Ssl), &h, &s.replies)?;
    let (output, table) = strings_result(&fp)?;
    Some(ScriptEvent {
        scan_id: s.scan_id.clone(),
        ip: s.ip,
        port: s.port,
        proto: s.proto,
        plugin: STRINGS_ID.to_string(),
        output,
        data: serde_json::to_value(table).unwrap_or_default(),
        volatile: Vec::new(),
        host: false,
        targetname: s.targetname.clone(),
        t: s.t,
    })
}

#[cfg(test)]
#[path = "service_fp_tests.rs"]
pub(crate) mod tests;
