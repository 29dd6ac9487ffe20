//! The probe database: probes/*.yaml, one file per protocol family.
//!
//! A file holds a list of probes. A probe has a name, a protocol, a payload
//! written as escaped bytes (`\r \n \t \0 \\ \xHH`; empty means "send nothing,
//! wait for a banner": the NULL probe), the ports and TLS ports it is tried
//! first on, a rarity from 1 (try always) to 9 (try last), a wait time, and
//! its match and soft-match rules (see [`super::rules`]):
//!
//! ```yaml
//! probes:
//!   - name: GetRequest
//!     payload: 'GET / HTTP/1.0\r\n\r\n'
//!     ports: [80, 8080]
//!     tls_ports: [443, 8443]
//!     rarity: 1
//!     wait_ms: 5000
//!     matches:
//!       - service: http
//!         pattern: '^HTTP/1\.[01] \d\d\d .*?\r\nServer: nginx/([\d.]+)'
//!         product: nginx
//!         version: $1
//!         cpe: ['cpe:/a:igor_sysoev:nginx:$1']
//!     soft_matches:
//!       - service: http
//!         pattern: '^HTTP/1\.[01] \d\d\d'
//! ```
//!
//! Loading checks everything before anything is used: unknown fields, bad
//! escapes, rarity out of range, patterns that do not compile within the
//! limits, files over [`MAX_FILE`] bytes. An error names the file, the probe
//! and the rule.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::rules::{Identity, Rule};
use crate::error::{Error, ErrorKind, Result};

/// Largest probe file read.
pub const MAX_FILE: u64 = 4 << 20;
/// Longest payload.
pub const MAX_PAYLOAD: usize = 16 * 1024;

/// A probe file as written in YAML (also what `probes import` produces).
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FileSpec {
    /// TCP ports never probed (nmap's `Exclude`: printers print what they
    /// are sent); they get the port table's service and no probe.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<u16>,
    pub probes: Vec<ProbeSpec>,
}

fn default_protocol() -> String {
    "tcp".into()
}

fn default_rarity() -> u8 {
    5
}

fn default_wait() -> u64 {
    5000
}

/// One probe as written in YAML.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ProbeSpec {
    pub name: String,
    #[serde(default = "default_protocol")]
    pub protocol: String,
    #[serde(default)]
    pub payload: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<u16>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tls_ports: Vec<u16>,
    #[serde(default = "default_rarity")]
    pub rarity: u8,
    #[serde(default = "default_wait")]
    pub wait_ms: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub matches: Vec<RuleSpec>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub soft_matches: Vec<RuleSpec>,
    /// Probes whose rules are also tried on this probe's response, in
    /// order, before the NULL probe's (nmap's `fallback`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fallback: Vec<String>,
    /// A server that closes the connection within this many ms of it
    /// opening, having sent nothing, is reported as `tcpwrapped` (NULL probe).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcpwrapped_ms: Option<u64>,
    /// UDP only: payload bytes a raw `-sU` scan replaces with a keyed
    /// transaction id, and where the answer echoes them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub txid: Option<TxidSpec>,
    /// UDP only: the server answers from another port than the one probed
    /// (TFTP, RFC 1350: each transfer gets a port of its own).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub answers_from_any_port: bool,
}

/// Where a UDP probe carries a transaction id that its answer echoes (a
/// DNS id, an NTP transmit timestamp returned as the origin timestamp...).
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TxidSpec {
    /// Offset of the id in the payload.
    pub at: usize,
    /// Its length: 1 to 4 bytes.
    pub len: usize,
    /// Offset of the echoed id in the answer.
    pub reply_at: usize,
}

/// One match rule as written in YAML: a pattern and the [`Identity`] it
/// gives (service, product, version, info, os, hostname, device, cpe).
#[derive(Debug, Default, Deserialize, Serialize)]
pub struct RuleSpec {
    pub pattern: String,
    /// The pattern needs backtracking (lookaround, backreferences): it runs
    /// on fancy-regex with a step limit instead of the linear engine.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub backtrack: bool,
    #[serde(flatten)]
    pub id: Identity,
    /// Keys that are neither (refused when the rule is compiled: serde's
    /// `deny_unknown_fields` does not work with `flatten`).
    #[serde(flatten, skip_serializing)]
    pub unknown: std::collections::BTreeMap<String, serde_yaml::Value>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    Tcp,
    Udp,
}

/// A probe, checked and compiled.
#[derive(Clone, Debug)]
pub struct Probe {
    pub name: String,
    pub transport: Transport,
    /// Bytes to send; empty for the NULL probe.
    pub payload: Vec<u8>,
    pub ports: Vec<u16>,
    pub tls_ports: Vec<u16>,
    pub rarity: u8,
    pub wait: Duration,
    pub matches: Vec<Rule>,
    pub soft_matches: Vec<Rule>,
    /// Names of the probes whose rules also apply to this one's responses.
    pub fallback: Vec<String>,
    pub tcpwrapped: Option<Duration>,
    /// UDP: where the payload carries a transaction id the answer echoes.
    pub txid: Option<TxidSpec>,
    /// UDP: the answer may come from another port of the target.
    pub answers_from_any_port: bool,
    /// The file it came from.
    pub origin: PathBuf,
}

/// Every probe of a scan.
#[derive(Clone, Debug, Default)]
pub struct ProbeDb {
    probes: Vec<Probe>,
    excluded: std::collections::BTreeSet<u16>,
}

fn bad(origin: &Path, what: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::Config, format!("{}: {what}", origin.display()))
}

/// The probe folder: the one `places` names, or the probes built into
/// moonscan ([`crate::core_files`]).
pub fn default_dir(places: &crate::places::Places) -> std::path::PathBuf {
    if let Some(d) = &places.probes {
        return d.clone();
    }
    crate::core_files::dir(crate::core_files::Core::Probes, places)
        .unwrap_or_else(|e| std::path::PathBuf::from(format!("(moonscan's built-in probes, not written out: {e})")))
}

impl ProbeDb {
    /// Loads every `*.yaml` file of a folder, in name order.
    pub fn load_dir(dir: &Path) -> Result<ProbeDb> {
        let entries = std::fs::read_dir(dir).map_err(|e| bad(dir, e))?;
        let mut files: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
            .collect();
        files.sort();
        let mut db = ProbeDb::default();
        for f in files {
            db.add_file(&f)?;
        }
        Ok(db)
    }

    /// Loads one file and adds its probes.
    pub fn add_file(&mut self, path: &Path) -> Result<()> {
        let text = crate::files::read_text_capped(path, MAX_FILE, "probe file")?;
        self.add_str(&text, path)
    }

    /// Parses probe YAML (`origin` names it in errors) and adds its probes.
    pub fn add_str(&mut self, text: &str, origin: &Path) -> Result<()> {
        if text.len() as u64 > MAX_FILE {
            return Err(bad(origin, format!("larger than {MAX_FILE} bytes")));
        }
        let spec: FileSpec = serde_yaml::from_str(text).map_err(|e| bad(origin, e))?;
        if spec.exclude.contains(&0) {
            return Err(bad(origin, "exclude: port 0 is not a port"));
        }
        self.excluded.extend(spec.exclude);
        for p in spec.probes {
            let probe = compile_probe(p, origin)?;
            if self.probes.iter().any(|q| q.name == probe.name && q.transport == probe.transport) {
                return Err(bad(origin, format!("probe {} is defined twice", probe.name)));
            }
            self.probes.push(probe);
        }
        Ok(())
    }

    pub fn probes(&self) -> &[Probe] {
        &self.probes
    }

    pub fn get(&self, name: &str) -> Option<&Probe> {
        self.probes.iter().find(|p| p.name == name)
    }

    /// Ports never probed (the probe files' `exclude`).
    pub fn excluded(&self, port: u16) -> bool {
        self.excluded.contains(&port)
    }
}

fn compile_probe(p: ProbeSpec, origin: &Path) -> Result<Probe> {
    let at = |what: String| bad(origin, format!("probe {}: {what}", p.name));
    if p.name.is_empty() || !p.name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
        return Err(bad(origin, format!("probe name {:?} must be letters, digits, - or _", p.name)));
    }
    let transport = match p.protocol.as_str() {
        "tcp" => Transport::Tcp,
        "udp" => Transport::Udp,
        other => return Err(at(format!("protocol {other:?} is not tcp or udp"))),
    };
    if !(1..=9).contains(&p.rarity) {
        return Err(at(format!("rarity {} is not 1-9", p.rarity)));
    }
    if p.wait_ms == 0 || p.wait_ms > 60_000 {
        return Err(at(format!("wait_ms {} is not 1-60000", p.wait_ms)));
    }
    let payload = unescape(&p.payload).map_err(at)?;
    if payload.len() > MAX_PAYLOAD {
        return Err(at(format!("payload longer than {MAX_PAYLOAD} bytes")));
    }
    let rules = |list: Vec<RuleSpec>, kind: &str| -> Result<Vec<Rule>> {
        list.into_iter()
            .enumerate()
            .map(|(i, r)| {
                let name = r.id.service.clone();
                if let Some(key) = r.unknown.keys().next() {
                    return Err(at(format!("{kind} {} ({name}): unknown field `{key}`", i + 1)));
                }
                let rule = if r.backtrack { Rule::backtracking(&r.pattern, r.id) } else { Rule::new(&r.pattern, r.id) };
                rule.map_err(|e| at(format!("{kind} {} ({name}): {e}", i + 1)))
            })
            .collect()
    };
    if p.fallback.len() > 8 || p.fallback.iter().any(|f| f.is_empty() || f.len() > 64) {
        return Err(at("fallback names at most 8 probes".into()));
    }
    let tcpwrapped = match p.tcpwrapped_ms {
        Some(ms) if ms == 0 || ms > 60_000 => return Err(at(format!("tcpwrapped_ms {ms} is not 1-60000"))),
        ms => ms.map(Duration::from_millis),
    };
    if p.answers_from_any_port && transport != Transport::Udp {
        return Err(at("answers_from_any_port applies to UDP probes only".into()));
    }
    if let Some(t) = p.txid {
        if transport != Transport::Udp {
            return Err(at("txid applies to UDP probes only".into()));
        }
        if !(1..=4).contains(&t.len)
            || t.at.checked_add(t.len).is_none_or(|end| end > payload.len())
            || t.reply_at > 1500
        {
            return Err(at(format!("txid ({} bytes at {}) must be 1-4 bytes inside the payload", t.len, t.at)));
        }
    }
    Ok(Probe {
        txid: p.txid,
        answers_from_any_port: p.answers_from_any_port,
        matches: rules(p.matches, "match")?,
        soft_matches: rules(p.soft_matches, "soft match")?,
        name: p.name,
        transport,
        payload,
        ports: p.ports,
        tls_ports: p.tls_ports,
        rarity: p.rarity,
        wait: Duration::from_millis(p.wait_ms),
        fallback: p.fallback,
        tcpwrapped,
        origin: origin.to_path_buf(),
    })
}

/// Decodes `\r \n \t \0 \\ \xHH`; any other backslash sequence is an error.
pub fn unescape(s: &str) -> std::result::Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(s.len());
    let mut bytes = s.bytes();
    while let Some(b) = bytes.next() {
        if b != b'\\' {
            out.push(b);
            continue;
        }
        match bytes.next() {
            Some(b'r') => out.push(b'\r'),
            Some(b'n') => out.push(b'\n'),
            Some(b't') => out.push(b'\t'),
            Some(b'0') => out.push(0),
            Some(b'\\') => out.push(b'\\'),
            Some(b'x') => {
                let hex: Vec<u8> = bytes.by_ref().take(2).collect();
                let text = std::str::from_utf8(&hex).unwrap_or("");
                match u8::from_str_radix(text, 16) {
                    Ok(v) if hex.len() == 2 => out.push(v),
                    _ => return Err(format!("bad escape \\x{text} in payload")),
                }
            }
            Some(c) => return Err(format!("unknown escape \\{} in payload", c as char)),
            None => return Err("payload ends with a lone backslash".into()),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every rule of the shipped probes/ compiles within the limits (rules
    /// compile lazily in a scan, so a broken one would only never match).
    #[test]
    fn every_shipped_rule_compiles() {
        let db = ProbeDb::load_dir(&default_dir(&crate::places::Places::default())).unwrap();
        let mut n = 0;
        for p in db.probes() {
            for r in p.matches.iter().chain(&p.soft_matches) {
                r.compiles().unwrap_or_else(|e| panic!("probe {} rule {}: {e}", p.name, r.pattern()));
                n += 1;
            }
        }
        assert!(n > 100, "{n} rules");
    }

    /// The literal-prefix check that skips rules before they compile never
    /// turns a match away: every shipped rule on every recorded reply gives
    /// what the regex alone gives.
    #[test]
    fn prefix_checks_never_refuse_a_match() {
        let db = ProbeDb::load_dir(&default_dir(&crate::places::Places::default())).unwrap();
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/banners");
        let mut replies: Vec<Vec<u8>> =
            std::fs::read_dir(dir).unwrap().map(|e| std::fs::read(e.unwrap().path()).unwrap()).collect();
        replies.extend([b"".to_vec(), b"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n".to_vec(), b"xSSH-2.0-x\r\n".to_vec()]);
        let (mut matched, mut tried) = (0, 0);
        for p in db.probes() {
            for r in p.matches.iter().chain(&p.soft_matches) {
                let re = crate::pattern::compile(r.pattern()).unwrap();
                for reply in &replies {
                    tried += 1;
                    let by_regex = re.is_match(reply);
                    matched += usize::from(by_regex);
                    assert_eq!(
                        r.apply(reply).is_some(),
                        by_regex,
                        "{} on {:?}",
                        r.pattern(),
                        String::from_utf8_lossy(reply)
                    );
                }
            }
        }
        assert!(matched > 40 && tried > 1000, "{matched} of {tried}");
    }

    fn load(text: &str) -> Result<ProbeDb> {
        let mut db = ProbeDb::default();
        db.add_str(text, Path::new("test.yaml")).map(|()| db)
    }

    #[test]
    fn a_probe_file_loads() {
        let db = load(
            r#"
probes:
  - name: NULL
    rarity: 1
    wait_ms: 6000
    matches:
      - service: ssh
        pattern: '^SSH-2\.0-OpenSSH_([\w.]+)'
        product: OpenSSH
        version: $1
  - name: GetRequest
    payload: 'GET / HTTP/1.0\r\n\r\n'
    ports: [80]
    tls_ports: [443]
    rarity: 1
    soft_matches:
      - service: http
        pattern: '^HTTP/1\.[01] '
"#,
        )
        .unwrap();
        assert_eq!(db.probes().len(), 2);
        let null = db.get("NULL").unwrap();
        assert!(null.payload.is_empty());
        assert_eq!(null.wait, Duration::from_secs(6));
        let id = null.matches[0].apply(b"SSH-2.0-OpenSSH_9.2p1 Debian").unwrap();
        assert_eq!(id.version.as_deref(), Some("9.2p1"));
        let get = db.get("GetRequest").unwrap();
        assert_eq!(get.payload, b"GET / HTTP/1.0\r\n\r\n");
        assert_eq!((get.ports.as_slice(), get.tls_ports.as_slice()), (&[80][..], &[443][..]));
        assert_eq!(get.soft_matches.len(), 1);
        assert_eq!(get.rarity, 1);
    }

    #[test]
    fn escapes_decode_to_bytes() {
        assert_eq!(unescape(r"a\r\n\t\0\\\x16\xff").unwrap(), b"a\r\n\t\0\\\x16\xff");
        assert!(unescape(r"\q").is_err());
        assert!(unescape(r"\x1").is_err());
        assert!(unescape(r"\xzz").is_err());
        assert!(unescape("\\").is_err());
    }

    #[test]
    fn malformed_files_are_refused_with_a_reason() {
        for (text, needle) in [
            ("probes: [", "test.yaml"),
            ("probes:\n  - name: X\n    colour: red\n", "unknown field"),
            (
                "probes:\n  - name: X\n    matches:\n      - service: s\n        pattern: x\n        colour: red\n",
                "match 1 (s): unknown field `colour`",
            ),
            ("probes:\n  - name: X\n    rarity: 10\n", "rarity 10"),
            ("probes:\n  - name: X\n    protocol: sctp\n", "not tcp or udp"),
            ("probes:\n  - name: X\n    payload: '\\q'\n", "unknown escape"),
            ("probes:\n  - name: X\n    wait_ms: 0\n", "wait_ms"),
            ("probes:\n  - name: 'a b'\n", "probe name"),
            ("probes:\n  - name: X\n  - name: X\n", "defined twice"),
            ("probes:\n  - name: X\n    matches:\n      - service: s\n        pattern: '('\n", "match 1 (s)"),
            ("probes:\n  - name: X\n    matches:\n      - pattern: 'a'\n", "missing field"),
            ("probes:\n  - name: X\n    ports: [70000]\n", "test.yaml"),
            (&format!("probes:\n  - name: X\n    payload: '{}'\n", "a".repeat(MAX_PAYLOAD + 1)), "payload longer"),
        ] {
            let e = load(text).expect_err(text).to_string();
            assert!(e.contains(needle), "{text:?}: {e}");
            assert!(e.starts_with("test.yaml"), "{e}");
        }
    }

    #[test]
    fn yaml_bombs_are_refused() {
        // Billion laughs: aliases that expand exponentially.
        let mut bomb = String::from("a: &a [\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\"]\n");
        for i in 0..9 {
            let (prev, next) = ((b'a' + i) as char, (b'a' + i + 1) as char);
            bomb.push_str(&format!(
                "{next}: &{next} [*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev}]\n"
            ));
        }
        bomb.push_str("probes: []\n");
        assert!(load(&bomb).is_err());
        let deep = format!("probes: {}{}", "[".repeat(10_000), "]".repeat(10_000));
        assert!(load(&deep).is_err());
        assert!(load(&"x".repeat(MAX_FILE as usize + 1)).unwrap_err().to_string().contains("larger than"));
    }
}
