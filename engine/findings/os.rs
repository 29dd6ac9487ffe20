//! What OS detection and traceroute tell about a host: the `os` and
//! `trace` events.
//!
//! In: nothing; types only. Out: [`OsEvent`] (nmap's `<os>`: ports used,
//! matches with their classes, the fingerprint, distance, uptime and the
//! sequence classes; or, without `-O`, only a passive hint) and
//! [`TraceEvent`] (nmap's `<trace>`). What always holds: accuracies are
//! whole percents as nmap prints them; a field the host gave nothing for
//! is absent, never made up.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::{Proto, ScanId};

/// One of the ports OS detection sent its probes to (nmap's `<portused>`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortUsed {
    /// `open` or `closed`.
    pub state: String,
    pub proto: Proto,
    pub port: u16,
}

/// An OS class of a match (nmap's `<osclass>`: a `Class` line of
/// nmap-os-db with the `CPE` lines that follow it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OsClass {
    pub vendor: String,
    pub family: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<String>,
    /// `general purpose`, `router`, `WAP`...
    pub device_type: String,
    pub accuracy: u8,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpe: Vec<String>,
}

/// A fingerprint of the database the host matched (nmap's `<osmatch>`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OsMatch {
    pub name: String,
    /// Whole percent, as nmap prints it.
    pub accuracy: u8,
    /// The line of nmap-os-db its `Fingerprint` line is on.
    pub line: usize,
    pub classes: Vec<OsClass>,
}

/// A sequence class with the values it was judged from (nmap's
/// `<tcpsequence>`, `<ipidsequence>`, `<tcptssequence>`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sequence {
    /// `All zeros`, `Incremental`, `1000HZ`..., or for TCP sequences the
    /// difficulty (`Good luck!`).
    pub class: String,
    /// TCP sequences only: nmap's index (the SP value, in decimal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<u32>,
    /// The values seen, in hex as nmap lists them (`A1B2C3D4,...`).
    pub values: String,
}

/// How long the host has been up, from its TCP timestamps.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Uptime {
    pub seconds: u64,
    /// The boot time as nmap writes it (`Fri Nov 27 09:12:03 2026`).
    pub lastboot: String,
}

/// An OS family guessed from the SYN-ACKs of the port scan alone (TTL,
/// window, MSS and option order, as p0f does): a guess, never a match.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OsHint {
    /// `Linux`, `Windows`, `FreeBSD`, `macOS`... or `unknown`.
    pub family: String,
    /// What it was judged from, as `ttl=64 win=65160 mss=1460 opts=M,S,T,N,W7`.
    pub evidence: String,
}

/// What OS detection found on one host.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OsEvent {
    pub scan_id: ScanId,
    pub ip: IpAddr,
    /// The ports the probes went to (empty for a passive hint).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports_used: Vec<PortUsed>,
    /// The matches nmap would show: every exact one, or else the best
    /// guesses, best first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub matches: Vec<OsMatch>,
    /// Whether `matches` are exact (100 %).
    #[serde(default)]
    pub exact: bool,
    /// Too many fingerprints matched exactly to name one (nmap says so).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub too_many: bool,
    /// The user asked for guesses: `--osscan-guess` / `--fuzzy`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub guess: bool,
    /// nmap's OS classification (`populateClassification`), which its
    /// "Device type", "Running" and "OS CPE" lines are made from: the
    /// classes of every ranked match (up to 36, not only the shown ones),
    /// each (vendor, family, generation, device type) once with the
    /// accuracy of the first match that has it; only exact matches'
    /// classes when there are exact matches. Empty when unknown (an event
    /// read back from a store): the lines are then made from `matches`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub classification: Vec<OsClass>,
    /// The fingerprint in nmap's submission format, `OS:` lines joined by
    /// newlines, as nmap's `<osfingerprint fingerprint=...>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
    /// Why the fingerprint is not ideal (nmap's "OS fingerprint not ideal
    /// because: ..."), e.g. `Missing a closed TCP port so results incomplete`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_ideal: Option<String>,
    /// Network distance in hops.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distance: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uptime: Option<Uptime>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_sequence: Option<Sequence>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_id_sequence: Option<Sequence>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_ts_sequence: Option<Sequence>,
    /// Without `-O` (or beside it): the passive guess from the port scan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<OsHint>,
    /// Seconds since the scan started.
    pub t: f64,
}

/// One hop of a traceroute.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceHop {
    pub ttl: u8,
    /// The address that answered; absent for a hop that never did (nmap's `...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip: Option<IpAddr>,
    /// Round trip in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_ms: Option<f64>,
    /// The hop's reverse DNS name, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

/// A host's traceroute (nmap's `<trace port= proto=>`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceEvent {
    pub scan_id: ScanId,
    pub ip: IpAddr,
    /// The port and protocol the probes went to.
    pub port: u16,
    pub proto: Proto,
    pub hops: Vec<TraceHop>,
    /// Seconds since the scan started.
    pub t: f64,
}

impl OsEvent {
    /// An event with the passive hint alone.
    pub fn hint(scan_id: ScanId, ip: IpAddr, hint: OsHint, t: f64) -> OsEvent {
        OsEvent {
            scan_id,
            ip,
            ports_used: Vec::new(),
            matches: Vec::new(),
            exact: false,
            too_many: false,
            guess: false,
            classification: Vec::new(),
            fingerprint: None,
            not_ideal: None,
            distance: None,
            uptime: None,
            tcp_sequence: None,
            ip_id_sequence: None,
            tcp_ts_sequence: None,
            hint: Some(hint),
            t,
        }
    }
}
