//! The events every stage emits, and their NDJSON shape.
//!
//! In: nothing; this module only defines types. Out: [`Event`], serialised
//! with serde as one JSON object a line, tagged by `"type"`. What always
//! holds: field names and values follow the schema in DESIGN.md, optional
//! fields are left out rather than written as `null`, and a scan's stream
//! opens with one `scan_start` and closes with one `scan_end`.

use std::net::IpAddr;

use serde::Serialize;

/// One thing that happened during a scan.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    ScanStart(ScanStart),
    Port(PortEvent),
    Service(Box<ServiceEvent>),
    Finding(Box<FindingEvent>),
    Log(LogEvent),
    Error(ErrorEvent),
    ScanEnd(ScanEnd),
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ScanStart {
    pub scan_id: String,
    /// RFC 3339, UTC.
    pub started: String,
    pub args: Vec<String>,
    pub scan_type: ScanType,
    pub seed: u64,
    /// `(address, port)` pairs this scan (or shard) will probe.
    pub probes_planned: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ScanType {
    Connect,
    Syn,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PortState {
    Open,
    Closed,
    Filtered,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PortEvent {
    pub ip: IpAddr,
    pub port: u16,
    pub proto: &'static str,
    pub state: PortState,
    /// Why the state was decided, in nmap's words (`syn-ack`, `conn-refused`, `no-response`).
    pub reason: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttl: Option<u8>,
    /// Seconds since the scan started.
    pub t: f64,
}

/// How a service was identified, as nmap's XML `method` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ServiceMethod {
    /// A match rule matched a response.
    Probed,
    /// Only a soft match: the service is known, the product is not.
    Soft,
    /// Nothing matched; the service is the usual one for the port number.
    Table,
}

/// What runs on an open port.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ServiceEvent {
    pub ip: IpAddr,
    pub port: u16,
    pub proto: &'static str,
    /// nmap's service name (`http`, `ssh`, ...); `unknown` when nothing matched.
    pub service: String,
    pub method: ServiceMethod,
    /// `ssl` when the service was found inside TLS.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tunnel: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub product: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub info: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub os: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cpe: Vec<String>,
    /// The probe whose response identified it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe: Option<String>,
    /// What the service sent unprompted (its banner); non-printable bytes as `\xHH`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub banner: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<Box<TlsInfo>>,
    /// Seconds since the scan started.
    pub t: f64,
}

/// A TLS session: what was negotiated and the whole certificate chain.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TlsInfo {
    /// `TLSv1.3`, `TLSv1.2`.
    pub version: String,
    /// IANA name of the cipher suite.
    pub cipher: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alpn: Option<String>,
    /// Leaf first, as the server sent it.
    pub chain: Vec<CertSummary>,
    /// The DER bytes of each certificate, in chain order (for plugins).
    #[serde(skip)]
    pub der: Vec<Vec<u8>>,
}

/// One certificate, as x509-parser reads it.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CertSummary {
    pub subject: String,
    pub issuer: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub san: Vec<String>,
    /// RFC 3339, UTC.
    pub not_before: String,
    pub not_after: String,
    /// Hex, as encoded.
    pub serial: String,
    /// `rsa`, `ec`, `ed25519`, `dsa` or the algorithm's name.
    pub key_type: String,
    pub key_bits: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub curve: Option<String>,
    pub signature_algorithm: String,
    pub self_signed: bool,
    pub sha256: String,
    /// Set when the certificate could not be parsed; then only `sha256` is meaningful.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Something a plugin found on a port.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FindingEvent {
    pub ip: IpAddr,
    pub port: u16,
    pub proto: &'static str,
    pub plugin: String,
    /// info, low, medium, high or critical.
    pub severity: &'static str,
    pub title: String,
    #[serde(skip_serializing_if = "serde_json::Value::is_null")]
    pub data: serde_json::Value,
    /// Seconds since the scan started.
    pub t: f64,
}

/// A line a plugin logged (`ctx:log`, `print`, or a `nil, "why"` return).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LogEvent {
    pub ip: IpAddr,
    pub port: u16,
    pub plugin: String,
    pub message: String,
}

/// What class of failure an error event reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorKind {
    Timeout,
    Budget,
    Sandbox,
    Io,
    Parse,
    /// A plugin raised an error.
    Plugin,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ErrorEvent {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ip: Option<IpAddr>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plugin: Option<String>,
    pub kind: ErrorKind,
    pub message: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ScanEnd {
    pub scan_id: String,
    /// Seconds from start to end.
    pub elapsed: f64,
    pub probes_sent: u64,
    pub open: u64,
    pub closed: u64,
    pub filtered: u64,
    pub errors: u64,
    pub findings: u64,
    /// True when the scan was stopped before every probe was sent.
    pub interrupted: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_event_matches_the_schema() {
        let ev = Event::Port(PortEvent {
            ip: "198.18.0.2".parse().unwrap(),
            port: 22,
            proto: "tcp",
            state: PortState::Open,
            reason: "syn-ack",
            ttl: None,
            t: 0.5,
        });
        let v: serde_json::Value = serde_json::to_value(&ev).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"type":"port","ip":"198.18.0.2","port":22,"proto":"tcp",
                               "state":"open","reason":"syn-ack","t":0.5})
        );
    }

    #[test]
    fn error_event_leaves_out_what_it_does_not_know() {
        let ev = Event::Error(ErrorEvent {
            ip: Some("2001:2::2".parse().unwrap()),
            port: None,
            plugin: None,
            kind: ErrorKind::Io,
            message: "no route to host".into(),
        });
        let v: serde_json::Value = serde_json::to_value(&ev).unwrap();
        assert_eq!(v, serde_json::json!({"type":"error","ip":"2001:2::2","kind":"io","message":"no route to host"}));
    }
}
