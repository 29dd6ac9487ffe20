//! The events every stage emits, and their NDJSON shape.
//!
//! In: nothing; this module only defines types. Out: [`Event`], serialised
//! with serde as one JSON object a line, tagged by `"type"`, and read back
//! the same way. What always holds: field names and values follow the
//! schema in DESIGN.md, optional fields are left out rather than written as
//! `null`, every event names its scan, and a scan's stream opens with one
//! `scan_start` and closes with one `scan_end`. [`Service`] is the one type
//! for what detection found on a port: service detection makes it, plugins
//! read it, outputs and stores write it. The module is a leaf: of the crate
//! it takes only the types its events carry from the modules that define
//! them ([`Proto`] and port lists from [`crate::ports`], [`ErrorKind`] from
//! [`crate::error`]), so every stage can import it and it imports none.

use std::net::IpAddr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// The kind an `error` event reports: the engine's one [`ErrorKind`].
pub use crate::error::ErrorKind;
pub use crate::ports::Proto;
pub use os::{OsClass, OsEvent, OsHint, OsMatch, PortUsed, Sequence, TraceEvent, TraceHop, Uptime};
pub use service::{banner_text, CertSummary, Identity, ProbeReply, Service, ServiceMethod, TlsInfo, Tunnel};

pub mod os;
pub mod script_text;
mod service;
pub mod service_fp;

/// The id every event of one scan carries (cheap to clone).
pub type ScanId = Arc<str>;

/// One thing that happened during a scan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    ScanStart(ScanStart),
    Host(HostEvent),
    Port(PortEvent),
    Extraports(ExtraportsEvent),
    Service(Box<Service>),
    Script(Box<ScriptEvent>),
    Finding(Box<FindingEvent>),
    Log(LogEvent),
    Error(ErrorEvent),
    Timing(TimingEvent),
    Rdns(RdnsEvent),
    Os(Box<OsEvent>),
    Trace(Box<TraceEvent>),
    ScanEnd(ScanEnd),
}

impl Event {
    /// The scan this event belongs to.
    pub fn scan_id(&self) -> &ScanId {
        match self {
            Event::ScanStart(e) => &e.scan_id,
            Event::Host(e) => &e.scan_id,
            Event::Port(e) => &e.scan_id,
            Event::Extraports(e) => &e.scan_id,
            Event::Service(e) => &e.scan_id,
            Event::Script(e) => &e.scan_id,
            Event::Finding(e) => &e.scan_id,
            Event::Log(e) => &e.scan_id,
            Event::Error(e) => &e.scan_id,
            Event::Timing(e) => &e.scan_id,
            Event::Rdns(e) => &e.scan_id,
            Event::Os(e) => &e.scan_id,
            Event::Trace(e) => &e.scan_id,
            Event::ScanEnd(e) => &e.scan_id,
        }
    }

    /// Moves the event to another scan (a stored scan read back, a merge).
    pub fn set_scan_id(&mut self, id: ScanId) {
        let slot = match self {
            Event::ScanStart(e) => &mut e.scan_id,
            Event::Host(e) => &mut e.scan_id,
            Event::Port(e) => &mut e.scan_id,
            Event::Extraports(e) => &mut e.scan_id,
            Event::Service(e) => &mut e.scan_id,
            Event::Script(e) => &mut e.scan_id,
            Event::Finding(e) => &mut e.scan_id,
            Event::Log(e) => &mut e.scan_id,
            Event::Error(e) => &mut e.scan_id,
            Event::Timing(e) => &mut e.scan_id,
            Event::Rdns(e) => &mut e.scan_id,
            Event::Os(e) => &mut e.scan_id,
            Event::Trace(e) => &mut e.scan_id,
            Event::ScanEnd(e) => &mut e.scan_id,
        };
        *slot = id;
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScanStart {
    pub scan_id: ScanId,
    /// Written as RFC 3339, UTC, to the millisecond.
    #[serde(with = "rfc3339")]
    pub started: std::time::SystemTime,
    /// The command line, as given (for people; nothing reads flags from it).
    pub args: Vec<String>,
    pub scan_type: ScanType,
    /// Written as a string: a 64-bit number is not exact in JSON readers
    /// that use doubles (jq, JavaScript).
    #[serde(with = "u64_text")]
    pub seed: u64,
    /// `(address, port)` pairs this scan (or shard) will probe.
    pub probes_planned: u64,
    #[serde(flatten)]
    pub settings: ScanSettings,
}

/// What a scan was asked to do, as outputs report it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScanSettings {
    /// The TCP ports scanned, written as nmap lists them (`1-1024,8080`).
    #[serde(default, with = "port_list")]
    pub ports: Vec<u16>,
    /// The UDP ports scanned (`-sU`), written the same way.
    #[serde(default, with = "port_list", skip_serializing_if = "Vec::is_empty")]
    pub udp_ports: Vec<u16>,
    /// Service detection runs on open ports (`-sV`).
    #[serde(default)]
    pub service_detection: bool,
    /// Its version intensity (0-9, `--version-intensity`): the `I=` of
    /// nmap's service fingerprints. Left out without detection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version_intensity: Option<u8>,
    /// The plugins selected, by the names their findings carry.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plugins: Vec<String>,
    /// `K/N` for a scan of part K of N.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<String>,
    /// How verbose the report is (`-v` counted).
    #[serde(default)]
    pub verbosity: u8,
    /// Target addresses, when host discovery runs (0 without it).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub hosts: u64,
    /// Not every port of every host is probed in this run (a resumed
    /// scan, `--host-timeout`): reports give no "Not shown" rest.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub partial: bool,
    /// The targets given by name, with the address each resolved to
    /// (nmap's `user` hostnames). Two names of one address are two
    /// targets, each detected and reported under its own name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hostnames: Vec<Hostname>,
    /// Addresses of `hostnames` also given as addresses (alone or in a
    /// block or range): a target of their own too, without a name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also_by_address: Vec<IpAddr>,
}

impl ScanSettings {
    /// The targets at each address given by name: its names in order,
    /// after the address itself (`None`) when it was given as an address
    /// too. An address not in the map is one target without a name.
    pub fn targets_by_address(&self) -> std::collections::HashMap<IpAddr, Vec<Option<Arc<str>>>> {
        let mut map: std::collections::HashMap<IpAddr, Vec<Option<Arc<str>>>> = Default::default();
        for &ip in &self.also_by_address {
            map.entry(ip).or_default().push(None);
        }
        let mut seen = std::collections::HashSet::new();
        for h in self.hostnames.iter().filter(|h| seen.insert((h.ip, h.name.as_str()))) {
            map.entry(h.ip).or_default().push(Some(h.name.as_str().into()));
        }
        map
    }
}

/// A target given by name and the address it resolved to.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Hostname {
    pub ip: IpAddr,
    pub name: String,
    /// The name's other addresses, not scanned (without `--resolve-all`):
    /// nmap's "Other addresses for NAME (not scanned)".
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub others: Vec<IpAddr>,
}

/// The name a reverse DNS lookup (PTR) found for a host's address.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RdnsEvent {
    pub scan_id: ScanId,
    pub ip: IpAddr,
    /// Without the root's trailing dot.
    pub name: String,
    /// Seconds since the scan started.
    pub t: f64,
}

/// A time as RFC 3339 text (UTC, milliseconds).
mod rfc3339 {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::SystemTime;

    pub fn serialize<S: Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&humantime::format_rfc3339_millis(*t).to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<SystemTime, D::Error> {
        humantime::parse_rfc3339_weak(&String::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

/// Ports as nmap lists them: `1-1024,3306,8080-8081`.
pub mod port_list {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn to_text(ports: &[u16]) -> String {
        let mut out = String::new();
        let mut i = 0;
        while i < ports.len() {
            let mut j = i;
            while j + 1 < ports.len() && ports[j + 1] == ports[j].wrapping_add(1) {
                j += 1;
            }
            if !out.is_empty() {
                out.push(',');
            }
            if i == j {
                out.push_str(&ports[i].to_string());
            } else {
                out.push_str(&format!("{}-{}", ports[i], ports[j]));
            }
            i = j + 1;
        }
        out
    }

    pub fn serialize<S: Serializer>(ports: &[u16], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&to_text(ports))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u16>, D::Error> {
        let text = String::deserialize(d)?;
        if text.is_empty() {
            return Ok(Vec::new());
        }
        crate::ports::parse_ports(&text).map(|l| l.tcp).map_err(serde::de::Error::custom)
    }
}

/// A u64 as a JSON string (a number is still accepted when read).
mod u64_text {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&v.to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            Text(String),
            Number(u64),
        }
        match Either::deserialize(d)? {
            Either::Number(n) => Ok(n),
            Either::Text(t) => t.parse().map_err(serde::de::Error::custom),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScanType {
    Connect,
    Syn,
    /// -sA: ACK probes; a RST says `unfiltered`, silence or ICMP `filtered`.
    Ack,
    /// -sW: ACK probes; a RST with a window says `open`, without `closed`.
    Window,
    /// -sF: FIN probes; a RST says `closed`, silence `open|filtered`.
    Fin,
    /// -sN: probes with no flag set; as -sF.
    Null,
    /// -sX: FIN, PSH and URG; as -sF.
    Xmas,
    /// -sM: FIN and ACK (Maimon); as -sF.
    Maimon,
    /// -sU: a UDP datagram; an answer says `open`, ICMP port unreachable
    /// `closed`, other unreachables `filtered`, silence `open|filtered`.
    Udp,
}

impl ScanType {
    /// The raw TCP scans: all but connect.
    pub fn is_raw(self) -> bool {
        self != ScanType::Connect
    }

    /// The setting that asks for it, as the library's messages name it
    /// (`` `scan_type(Syn)` ``, `` `udp` ``).
    pub fn setting(self) -> String {
        match self {
            ScanType::Udp => "`udp`".into(),
            t => format!("`scan_type({t:?})`"),
        }
    }

    /// nmap's name for it in XML (`<scaninfo type=...>`).
    pub fn as_str(self) -> &'static str {
        match self {
            ScanType::Connect => "connect",
            ScanType::Syn => "syn",
            ScanType::Ack => "ack",
            ScanType::Window => "window",
            ScanType::Fin => "fin",
            ScanType::Null => "null",
            ScanType::Xmas => "xmas",
            ScanType::Maimon => "maimon",
            ScanType::Udp => "udp",
        }
    }

    /// Every scan type, for parsing nmap's names back.
    pub const ALL: [ScanType; 9] = [
        ScanType::Connect,
        ScanType::Syn,
        ScanType::Ack,
        ScanType::Window,
        ScanType::Fin,
        ScanType::Null,
        ScanType::Xmas,
        ScanType::Maimon,
        ScanType::Udp,
    ];
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PortState {
    Open,
    Closed,
    Filtered,
    /// Reachable, open or closed unknown (-sA).
    Unfiltered,
    /// No answer where an open port gives none either (-sF, -sN, -sX, -sM).
    #[serde(rename = "open|filtered")]
    OpenFiltered,
}

impl PortState {
    pub fn as_str(self) -> &'static str {
        match self {
            PortState::Open => "open",
            PortState::Closed => "closed",
            PortState::Filtered => "filtered",
            PortState::Unfiltered => "unfiltered",
            PortState::OpenFiltered => "open|filtered",
        }
    }

    /// nmap's name back to a state.
    pub fn parse(s: &str) -> Option<PortState> {
        [PortState::Open, PortState::Closed, PortState::Filtered, PortState::Unfiltered, PortState::OpenFiltered]
            .into_iter()
            .find(|p| p.as_str() == s)
    }
}

/// Why a port has its state, in nmap's words (`--reason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Reason {
    SynAck,
    /// A UDP datagram answered a UDP probe.
    UdpResponse,
    Reset,
    ConnRefused,
    NoResponse,
    /// ICMP destination unreachable, by code (ICMPv6's mapped to these).
    NetUnreach,
    HostUnreach,
    ProtoUnreach,
    PortUnreach,
    NetProhibited,
    HostProhibited,
    AdminProhibited,
    /// Host discovery: what answered a ping, as nmap names it.
    EchoReply,
    TimestampReply,
    AddressmaskReply,
    ArpResponse,
    NdResponse,
    /// The target is this machine.
    LocalhostResponse,
    /// Taken as up without asking (`-Pn`) or not asked at all (`-sL`).
    UserSet,
    /// A reason this version does not know (read from a newer file).
    #[serde(other)]
    Unknown,
}

impl Reason {
    /// nmap's word for it; a word this version does not know is `Unknown`.
    pub fn parse(s: &str) -> Reason {
        [
            Reason::SynAck,
            Reason::UdpResponse,
            Reason::Reset,
            Reason::ConnRefused,
            Reason::NoResponse,
            Reason::NetUnreach,
            Reason::HostUnreach,
            Reason::ProtoUnreach,
            Reason::PortUnreach,
            Reason::NetProhibited,
            Reason::HostProhibited,
            Reason::AdminProhibited,
            Reason::EchoReply,
            Reason::TimestampReply,
            Reason::AddressmaskReply,
            Reason::ArpResponse,
            Reason::NdResponse,
            Reason::LocalhostResponse,
            Reason::UserSet,
        ]
        .into_iter()
        .find(|r| r.as_str() == s)
        .unwrap_or(Reason::Unknown)
    }

    /// An answer to an ICMP ping (echo, timestamp, address mask).
    pub fn is_pong(self) -> bool {
        matches!(self, Reason::EchoReply | Reason::TimestampReply | Reason::AddressmaskReply)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Reason::SynAck => "syn-ack",
            Reason::UdpResponse => "udp-response",
            Reason::Reset => "reset",
            Reason::ConnRefused => "conn-refused",
            Reason::NoResponse => "no-response",
            Reason::NetUnreach => "net-unreach",
            Reason::HostUnreach => "host-unreach",
            Reason::ProtoUnreach => "proto-unreach",
            Reason::PortUnreach => "port-unreach",
            Reason::NetProhibited => "net-prohibited",
            Reason::HostProhibited => "host-prohibited",
            Reason::AdminProhibited => "admin-prohibited",
            Reason::EchoReply => "echo-reply",
            Reason::TimestampReply => "timestamp-reply",
            Reason::AddressmaskReply => "addressmask-reply",
            Reason::ArpResponse => "arp-response",
            Reason::NdResponse => "nd-response",
            Reason::LocalhostResponse => "localhost-response",
            Reason::UserSet => "user-set",
            Reason::Unknown => "unknown",
        }
    }
}

macro_rules! display_as_str {
    ($($t:ty),*) => {$(
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl From<$t> for String {
            fn from(v: $t) -> String {
                v.as_str().to_string()
            }
        }
    )*};
}
display_as_str!(Reason, Severity, PortState, HostState, Tunnel, Proto);

/// Whether host discovery found a target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HostState {
    Up,
    Down,
    /// Listed, never asked (`-sL`).
    Unknown,
}

impl HostState {
    pub fn as_str(self) -> &'static str {
        match self {
            HostState::Up => "up",
            HostState::Down => "down",
            HostState::Unknown => "unknown",
        }
    }
}

/// Ports of one host decided but not reported one by one (closed ports
/// without `-v`, ports filtered by an ICMP error), counted by state and
/// reason: what nmap calls "Not shown" and writes as `<extraports>`. Sent
/// once per (host, protocol, state, reason) just before `scan_end`. Ports
/// that never answered (`no-response`) are not counted: a report gets them
/// as the scanned ports left over. When the host has few ports in that
/// state (at most 25 over both protocols and every reason), `ports` names
/// them, and nmap's reports list them row by row as nmap's port table does.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExtraportsEvent {
    pub scan_id: ScanId,
    pub ip: IpAddr,
    pub proto: Proto,
    pub state: PortState,
    pub reason: Reason,
    pub count: u32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<u16>,
}

/// What host discovery decided about one target.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostEvent {
    pub scan_id: ScanId,
    pub ip: IpAddr,
    pub state: HostState,
    /// What answered (`echo-reply`, `syn-ack`, `arp-response`...), or
    /// `no-response` for a host that never did.
    pub reason: Reason,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<u8>,
    /// Seconds from the host's first discovery probe to its answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<f64>,
    /// The answering host's MAC address, for an on-link target (`02:00:5e:...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
    /// Seconds since the scan started.
    pub t: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PortEvent {
    pub scan_id: ScanId,
    pub ip: IpAddr,
    pub port: u16,
    pub proto: Proto,
    pub state: PortState,
    /// Why the state was decided.
    pub reason: Reason,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<u8>,
    /// Seconds since the scan started.
    pub t: f64,
}

/// What a finding is about (`references`, `cve`, `cwe`, `remediation`,
/// `tags`): a plugin's, checked at load, or one finding's, checked when
/// `ctx:finding` is called: each list at most [`ABOUT_MAX`] entries of at
/// most 512 bytes, CVE ids as `CVE-YYYY-N...`, CWE ids as `CWE-N`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct About {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub references: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cve: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cwe: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remediation: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
}

/// Most entries in each list of [`About`] and of `args`.
pub const ABOUT_MAX: usize = 16;

impl About {
    /// Whether nothing is said.
    pub fn is_empty(&self) -> bool {
        *self == About::default()
    }

    /// Whether `s` is a CVE id (`CVE-2021-44228`).
    pub fn is_cve(s: &str) -> bool {
        let mut parts = s.split('-');
        parts.next() == Some("CVE")
            && parts.next().is_some_and(|y| y.len() == 4 && y.bytes().all(|b| b.is_ascii_digit()))
            && parts.next().is_some_and(|n| n.len() >= 4 && n.len() <= 12 && n.bytes().all(|b| b.is_ascii_digit()))
            && parts.next().is_none()
    }

    /// Whether `s` is a CWE id (`CWE-79`).
    pub fn is_cwe(s: &str) -> bool {
        s.strip_prefix("CWE-").is_some_and(|n| !n.is_empty() && n.len() <= 6 && n.bytes().all(|b| b.is_ascii_digit()))
    }

    /// Whether it keeps the limits a plugin's is checked against at load.
    pub fn plausible(&self) -> bool {
        let short = |v: &Vec<String>| v.len() <= ABOUT_MAX && v.iter().all(|s| !s.is_empty() && s.len() <= 512);
        short(&self.references)
            && short(&self.tags)
            && self.cve.iter().all(|c| About::is_cve(c))
            && self.cwe.iter().all(|c| About::is_cwe(c))
            && self.cve.len() <= ABOUT_MAX
            && self.cwe.len() <= ABOUT_MAX
            && self.remediation.as_ref().is_none_or(|r| r.len() <= MAX_REMEDIATION)
    }
}

/// Longest remediation text.
pub const MAX_REMEDIATION: usize = 2000;

/// How much a finding matters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    #[default]
    Info,
    Low,
    Medium,
    High,
    Critical,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Low => "low",
            Severity::Medium => "medium",
            Severity::High => "high",
            Severity::Critical => "critical",
        }
    }

    /// `info`, `low`, `medium`, `high` or `critical`.
    pub fn parse(s: &str) -> Option<Severity> {
        Some(match s {
            "info" => Severity::Info,
            "low" => Severity::Low,
            "medium" => Severity::Medium,
            "high" => Severity::High,
            "critical" => Severity::Critical,
            _ => return None,
        })
    }
}

/// What a plugin's `run` returned: its script result, as nmap's script
/// output (the `<script>` of a port or host). Not a finding: it has no
/// severity, and counts, SARIF and `db diff`'s findings leave it out.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScriptEvent {
    pub scan_id: ScanId,
    pub ip: IpAddr,
    pub port: u16,
    pub proto: Proto,
    /// The plugin's id (an nmap script id for nmap's scripts).
    pub plugin: String,
    /// Its output text as nmap prints a script's, given by the plugin or
    /// rendered from `data` as NSE renders a table.
    pub output: String,
    /// What `run` returned, as data (left out when it returned only text).
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub data: serde_json::Value,
    /// Keys of `data` (at any depth) whose values change from one run to
    /// the next (a date, a counter), as the plugin declares them: `db diff`
    /// ignores them. Left out when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volatile: Vec<String>,
    /// A result about the host rather than the port the plugin ran on
    /// (its `scope = "host"`): nmap's host script results. Left out when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub host: bool,
    /// The name the plugin ran under, for a target given by name (two
    /// names of one address are two targets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub targetname: Option<String>,
    /// Seconds since the scan started.
    pub t: f64,
}

/// Something a plugin found on a port (`ctx:finding{...}`), with a severity.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FindingEvent {
    pub scan_id: ScanId,
    pub ip: IpAddr,
    pub port: u16,
    pub proto: Proto,
    pub plugin: String,
    pub severity: Severity,
    pub title: String,
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub data: serde_json::Value,
    /// What this finding is about, given with it (`ctx:finding{cve = ...}`);
    /// the plugin's own metadata is not repeated here. Written as an
    /// `about` object, left out when empty.
    #[serde(default, skip_serializing_if = "About::is_empty")]
    pub about: About,
    /// A finding about the host rather than the port the plugin ran on
    /// (its `scope = "host"`). Left out when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub host: bool,
    /// The name the plugin ran under, for a target given by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub targetname: Option<String>,
    /// Seconds since the scan started.
    pub t: f64,
}

/// A line a plugin logged (`ctx:log`, `print`, or a `nil, "why"` return).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LogEvent {
    pub scan_id: ScanId,
    pub ip: IpAddr,
    pub port: u16,
    pub plugin: String,
    pub message: String,
}

/// How fast a raw scan goes and what the path does to it: sent every
/// few seconds while it runs, and whenever its congestion control slows
/// it down (then with `slowdown`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimingEvent {
    pub scan_id: ScanId,
    /// Probes per second the scan paces itself to now (every sender's).
    pub rate: f64,
    /// Share of the answered probes' tries that were lost (0 to 1).
    pub loss: f64,
    /// Smoothed round trip over every answer, seconds (none before one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt: Option<f64>,
    /// Why the scan just slowed down, in a line (nmap's "Increasing send
    /// delay" notes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slowdown: Option<String>,
    /// Seconds since the scan started.
    pub t: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorEvent {
    pub scan_id: ScanId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip: Option<IpAddr>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin: Option<String>,
    pub kind: ErrorKind,
    pub message: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ScanEnd {
    pub scan_id: ScanId,
    /// Seconds from start to end.
    pub elapsed: f64,
    pub probes_sent: u64,
    pub open: u64,
    pub closed: u64,
    pub filtered: u64,
    pub errors: u64,
    /// Findings (`finding` events; script results are not findings).
    pub findings: u64,
    /// Script results (`script` events).
    #[serde(default)]
    pub scripts: u64,
    /// Hosts found up and down by host discovery (both 0 without it).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub hosts_up: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub hosts_down: u64,
    /// True when the scan was stopped before every probe was sent.
    pub interrupted: bool,
    /// Times the congestion control slowed the scan down, and why the
    /// first time (left out when it never did).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub slowdowns: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slowed: Option<String>,
    /// Ports not shown went uncounted for some hosts (past the tally's
    /// cap): reports then give no "Not shown" rest.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unshown_capped: bool,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_event_matches_the_schema() {
        let ev = Event::Port(PortEvent {
            scan_id: "5c".into(),
            ip: "198.18.0.2".parse().unwrap(),
            port: 22,
            proto: Proto::Tcp,
            state: PortState::Open,
            reason: Reason::SynAck,
            ttl: None,
            t: 0.5,
        });
        let v: serde_json::Value = serde_json::to_value(&ev).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"type":"port","scan_id":"5c","ip":"198.18.0.2","port":22,"proto":"tcp",
                               "state":"open","reason":"syn-ack","t":0.5})
        );
        let back: Event = serde_json::from_value(v).unwrap();
        assert_eq!(back, ev);
    }

    #[test]
    fn error_event_leaves_out_what_it_does_not_know() {
        let ev = Event::Error(ErrorEvent {
            scan_id: "5c".into(),
            ip: Some("2001:2::2".parse().unwrap()),
            port: None,
            plugin: None,
            kind: ErrorKind::Io,
            message: "no route to host".into(),
        });
        let v: serde_json::Value = serde_json::to_value(&ev).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"type":"error","scan_id":"5c","ip":"2001:2::2","kind":"io","message":"no route to host"})
        );
    }

    #[test]
    fn events_read_back_as_written() {
        let mut svc = Service::bare("5c".into(), "198.18.0.2".parse().unwrap(), 443, Proto::Tcp);
        svc.id.product = Some("nginx".into());
        svc.id.cpe = vec!["cpe:/a:igor_sysoev:nginx".into()];
        svc.tunnel = Some(Tunnel::Ssl);
        svc.banner = b"SSH-2.0-x\r\n\x00\xff\\ ok".to_vec();
        svc.tls = Some(Box::new(TlsInfo { version: "TLSv1.3".into(), ..TlsInfo::default() }));
        let start = ScanStart {
            scan_id: "5c".into(),
            started: humantime::parse_rfc3339("2026-11-23T19:02:03.125Z").unwrap(),
            args: vec!["moonscan".into()],
            scan_type: ScanType::Syn,
            seed: u64::MAX - 1,
            probes_planned: 1,
            settings: ScanSettings {
                ports: vec![22, 80, 81, 82, 443],
                udp_ports: vec![53, 161, 162],
                service_detection: true,
                version_intensity: Some(9),
                plugins: vec!["http-title".into()],
                shard: Some("1/2".into()),
                verbosity: 2,
                hosts: 256,
                hostnames: vec![Hostname {
                    ip: "198.18.2.3".parse().unwrap(),
                    name: "lab.example".into(),
                    others: vec!["2001:2::3".parse().unwrap()],
                }],
                also_by_address: vec!["198.18.2.3".parse().unwrap()],
                partial: true,
            },
        };
        let extra = Event::Extraports(ExtraportsEvent {
            scan_id: "5c".into(),
            ip: "198.18.2.3".parse().unwrap(),
            proto: Proto::Udp,
            state: PortState::Closed,
            reason: Reason::PortUnreach,
            count: 997,
            ports: Vec::new(),
        });
        assert_eq!(
            serde_json::to_string(&extra).unwrap(),
            r#"{"type":"extraports","scan_id":"5c","ip":"198.18.2.3","proto":"udp","state":"closed","reason":"port-unreach","count":997}"#
        );
        let host = Event::Host(HostEvent {
            scan_id: "5c".into(),
            ip: "198.18.2.3".parse().unwrap(),
            state: HostState::Up,
            reason: Reason::ArpResponse,
            ttl: None,
            latency: Some(0.0002),
            mac: Some("02:00:5E:10:00:01".into()),
            t: 0.5,
        });
        let line = serde_json::to_string(&host).unwrap();
        assert_eq!(
            line,
            r#"{"type":"host","scan_id":"5c","ip":"198.18.2.3","state":"up","reason":"arp-response","latency":0.0002,"mac":"02:00:5E:10:00:01","t":0.5}"#
        );
        for ev in [Event::Service(Box::new(svc)), Event::ScanStart(start), host, extra] {
            let line = serde_json::to_string(&ev).unwrap();
            assert_eq!(serde_json::from_str::<Event>(&line).unwrap(), ev, "{line}");
        }
        let line = serde_json::to_string(&Event::ScanStart(ScanStart {
            scan_id: "5c".into(),
            started: std::time::UNIX_EPOCH,
            args: vec![],
            scan_type: ScanType::Connect,
            seed: u64::MAX,
            probes_planned: 0,
            settings: ScanSettings { ports: vec![22, 80, 81, 82, 443], ..ScanSettings::default() },
        }))
        .unwrap();
        assert!(line.contains(r#""seed":"18446744073709551615""#), "{line}");
        assert!(line.contains(r#""started":"1970-01-01T00:00:00.000Z""#), "{line}");
        assert!(line.contains(r#""ports":"22,80-82,443""#), "{line}");
        assert_eq!(banner_text::from_text(&banner_text::to_text(b"a\\x41\x00")), b"a\\x41\x00");
    }

    #[test]
    fn probe_replies_survive_ndjson_and_are_left_out_when_none() {
        let mut svc = Service::bare("5c".into(), "198.18.0.5".parse().unwrap(), 47001, Proto::Tcp);
        let line = serde_json::to_string(&Event::Service(Box::new(svc.clone()))).unwrap();
        assert!(!line.contains("replies"), "{line}");
        // Every byte value, an ANSI escape, CR LF, NUL and 0xff, and a
        // backslash before what reads as an escape.
        let all: Vec<u8> = (0..=255).collect();
        svc.replies = vec![
            ProbeReply { probe: "NULL".into(), data: b"\x1b[31m\x41\r\n\\x".to_vec() },
            ProbeReply { probe: "GetRequest".into(), data: b"\x1b]0;t\x07\r\n\0\xff".to_vec() },
            ProbeReply { probe: "all".into(), data: all },
        ];
        let ev = Event::Service(Box::new(svc));
        let line = serde_json::to_string(&ev).unwrap();
        assert!(line.contains(r#""replies":[{"probe":"NULL","data":"\\x1b[31mA\\r\\n\\\\x"}"#), "{line}");
        // Printable ASCII alone: no control byte, nothing past 0x7e.
        assert!(line.bytes().all(|b| (0x20..0x7f).contains(&b)), "{line}");
        assert_eq!(serde_json::from_str::<Event>(&line).unwrap(), ev);
    }
}
