//! The tables, the same in SQLite and PostgreSQL (only the column types
//! differ), and the columns each insert writes.
//!
//! What always holds: every table but `scans` and `schema_version` has a
//! `scan_id` naming a row of `scans` (written in the same or an earlier
//! transaction; there are no FOREIGN KEY clauses, which cost PostgreSQL a
//! third of its insert time); `seq` is the event's position in its
//! scan's stream (0 is `scan_start`), so the stream can be rebuilt in order;
//! JSON columns hold JSON text (SQLite) or `jsonb` (PostgreSQL).

/// The schema this build writes; a database with a newer one is refused.
pub const VERSION: i64 = 11;

/// The DDL, with `{int}`, `{real}`, `{bool}` and `{json}` standing for the
/// backend's types. Every statement is idempotent (`IF NOT EXISTS`).
const DDL: &str = "
CREATE TABLE IF NOT EXISTS schema_version (
    version {int} NOT NULL
);
CREATE TABLE IF NOT EXISTS scans (
    id TEXT PRIMARY KEY,
    started TEXT NOT NULL,
    args {json} NOT NULL,
    scan_type TEXT NOT NULL,
    seed TEXT NOT NULL,
    probes_planned {int},
    shard TEXT,
    ended TEXT,
    elapsed {real},
    probes_sent {int},
    open {int},
    closed {int},
    filtered {int},
    errors {int},
    findings {int},
    interrupted {bool},
    settings {json},
    scripts {int}
);
CREATE TABLE IF NOT EXISTS ports (
    scan_id TEXT NOT NULL,
    ip TEXT NOT NULL,
    port {int} NOT NULL,
    proto TEXT NOT NULL,
    state TEXT NOT NULL,
    reason TEXT NOT NULL,
    ttl {int},
    t {real} NOT NULL,
    seq {int} NOT NULL,
    UNIQUE (scan_id, ip, port, proto)
);
CREATE TABLE IF NOT EXISTS services (
    scan_id TEXT NOT NULL,
    ip TEXT NOT NULL,
    port {int} NOT NULL,
    proto TEXT NOT NULL,
    service TEXT NOT NULL,
    product TEXT,
    version TEXT,
    info TEXT,
    os TEXT,
    hostname TEXT,
    device TEXT,
    tunnel TEXT,
    method TEXT NOT NULL,
    cpe {json} NOT NULL,
    banner TEXT,
    probe TEXT,
    tls_version TEXT,
    tls_cipher TEXT,
    tls_alpn TEXT,
    tls_session {json},
    t {real} NOT NULL,
    seq {int} NOT NULL,
    targetname TEXT,
    replies {json}
);
CREATE INDEX IF NOT EXISTS services_scan ON services (scan_id, ip, port);
CREATE TABLE IF NOT EXISTS tls_certs (
    scan_id TEXT NOT NULL,
    ip TEXT NOT NULL,
    port {int} NOT NULL,
    position {int} NOT NULL,
    subject TEXT NOT NULL,
    issuer TEXT NOT NULL,
    san {json} NOT NULL,
    not_before TEXT NOT NULL,
    not_after TEXT NOT NULL,
    serial TEXT NOT NULL,
    key_type TEXT NOT NULL,
    key_bits {int} NOT NULL,
    curve TEXT,
    signature_algorithm TEXT NOT NULL,
    self_signed {bool} NOT NULL,
    sha256 TEXT NOT NULL,
    error TEXT,
    seq {int} NOT NULL
);
CREATE INDEX IF NOT EXISTS tls_certs_scan ON tls_certs (scan_id, ip, port);
CREATE TABLE IF NOT EXISTS findings (
    scan_id TEXT NOT NULL,
    ip TEXT NOT NULL,
    port {int} NOT NULL,
    proto TEXT NOT NULL,
    plugin TEXT NOT NULL,
    severity TEXT NOT NULL,
    title TEXT NOT NULL,
    data {json},
    about {json},
    host {int},
    t {real} NOT NULL,
    seq {int} NOT NULL,
    targetname TEXT
);
CREATE INDEX IF NOT EXISTS findings_scan ON findings (scan_id, ip, port);
CREATE TABLE IF NOT EXISTS scripts (
    scan_id TEXT NOT NULL,
    ip TEXT NOT NULL,
    port {int} NOT NULL,
    proto TEXT NOT NULL,
    plugin TEXT NOT NULL,
    output TEXT NOT NULL,
    data {json},
    volatile {json},
    host {int},
    t {real} NOT NULL,
    seq {int} NOT NULL,
    targetname TEXT
);
CREATE INDEX IF NOT EXISTS scripts_scan ON scripts (scan_id, ip, port);
CREATE TABLE IF NOT EXISTS errors (
    scan_id TEXT NOT NULL,
    ip TEXT,
    port {int},
    plugin TEXT,
    kind TEXT NOT NULL,
    message TEXT NOT NULL,
    seq {int} NOT NULL
);
CREATE INDEX IF NOT EXISTS errors_scan ON errors (scan_id);
CREATE TABLE IF NOT EXISTS hosts (
    scan_id TEXT NOT NULL,
    ip TEXT NOT NULL,
    state TEXT NOT NULL,
    reason TEXT NOT NULL,
    ttl {int},
    latency {real},
    mac TEXT,
    t {real} NOT NULL,
    seq {int} NOT NULL,
    UNIQUE (scan_id, ip)
);
CREATE TABLE IF NOT EXISTS extraports (
    scan_id TEXT NOT NULL,
    ip TEXT NOT NULL,
    proto TEXT NOT NULL,
    state TEXT NOT NULL,
    reason TEXT NOT NULL,
    count {int} NOT NULL,
    ports {json},
    seq {int} NOT NULL
);
CREATE INDEX IF NOT EXISTS extraports_scan ON extraports (scan_id);
CREATE TABLE IF NOT EXISTS rdns (
    scan_id TEXT NOT NULL,
    ip TEXT NOT NULL,
    name TEXT NOT NULL,
    t {real} NOT NULL,
    seq {int} NOT NULL,
    UNIQUE (scan_id, ip)
);
CREATE TABLE IF NOT EXISTS os (
    scan_id TEXT NOT NULL,
    ip TEXT NOT NULL,
    exact {bool} NOT NULL,
    too_many {bool} NOT NULL,
    fingerprint TEXT,
    not_ideal TEXT,
    distance {int},
    uptime {int},
    lastboot TEXT,
    ports_used {json},
    tcp_sequence {json},
    ip_id_sequence {json},
    tcp_ts_sequence {json},
    hint_family TEXT,
    hint_evidence TEXT,
    t {real} NOT NULL,
    seq {int} NOT NULL
);
CREATE INDEX IF NOT EXISTS os_scan ON os (scan_id, ip);
CREATE TABLE IF NOT EXISTS os_matches (
    scan_id TEXT NOT NULL,
    ip TEXT NOT NULL,
    position {int} NOT NULL,
    name TEXT NOT NULL,
    accuracy {int} NOT NULL,
    line {int} NOT NULL,
    seq {int} NOT NULL
);
CREATE INDEX IF NOT EXISTS os_matches_scan ON os_matches (scan_id, ip);
CREATE TABLE IF NOT EXISTS os_classes (
    scan_id TEXT NOT NULL,
    ip TEXT NOT NULL,
    match_position {int} NOT NULL,
    position {int} NOT NULL,
    vendor TEXT NOT NULL,
    family TEXT NOT NULL,
    generation TEXT,
    device_type TEXT NOT NULL,
    accuracy {int} NOT NULL,
    cpe {json} NOT NULL,
    seq {int} NOT NULL
);
CREATE INDEX IF NOT EXISTS os_classes_scan ON os_classes (scan_id, ip);
CREATE TABLE IF NOT EXISTS traces (
    scan_id TEXT NOT NULL,
    ip TEXT NOT NULL,
    port {int} NOT NULL,
    proto TEXT NOT NULL,
    t {real} NOT NULL,
    seq {int} NOT NULL
);
CREATE INDEX IF NOT EXISTS traces_scan ON traces (scan_id, ip);
CREATE TABLE IF NOT EXISTS trace_hops (
    scan_id TEXT NOT NULL,
    ip TEXT NOT NULL,
    ttl {int} NOT NULL,
    hop_ip TEXT,
    rtt_ms {real},
    host TEXT,
    seq {int} NOT NULL
);
CREATE INDEX IF NOT EXISTS trace_hops_scan ON trace_hops (scan_id, ip);
";

/// What brings a database of schema version `from` to [`VERSION`] (with the
/// types as in the DDL), one statement each.
fn upgrades(from: i64) -> Vec<&'static str> {
    let mut out = Vec::new();
    if from < 2 {
        // Version 2: what a scan was asked to do (ScanSettings), as JSON.
        out.push("ALTER TABLE scans ADD COLUMN settings {json}");
    }
    if from < 3 {
        // Version 3: how the TLS session was read and what it negotiated
        // (path, kx, group, kx_bits, ja3s, ja4s), as JSON.
        out.push("ALTER TABLE services ADD COLUMN tls_session {json}");
    }
    if from < 4 {
        // Version 4: a script result's output text (FindingEvent::output).
        out.push("ALTER TABLE findings ADD COLUMN output TEXT");
    }
    if from < 5 {
        // Version 5: what one finding is about (FindingEvent::about), as JSON.
        out.push("ALTER TABLE findings ADD COLUMN about {json}");
    }
    if from < 6 {
        // Version 6: a host script result (FindingEvent::host), 1 or NULL.
        out.push("ALTER TABLE findings ADD COLUMN host {int}");
    }
    // Version 7: the hosts and extraports tables (made by the DDL, which
    // runs first: nothing to alter).
    if from < 8 {
        // Version 8: script results leave the findings table for their own
        // (made by the DDL); the count of each scan's findings follows.
        out.push("ALTER TABLE scans ADD COLUMN scripts {int}");
        out.push(
            "INSERT INTO scripts (scan_id, ip, port, proto, plugin, output, data, host, t, seq) \
             SELECT scan_id, ip, port, proto, plugin, output, data, host, t, seq FROM findings WHERE output IS NOT NULL",
        );
        out.push("DELETE FROM findings WHERE output IS NOT NULL");
        out.push(
            "UPDATE scans SET scripts = (SELECT COUNT(*) FROM scripts s WHERE s.scan_id = scans.id), \
             findings = (SELECT COUNT(*) FROM findings f WHERE f.scan_id = scans.id) WHERE ended IS NOT NULL",
        );
    }
    if from < 9 {
        // Version 9: the name a target was scanned under (two names of one
        // address are two targets), and the rdns table (made by the DDL,
        // as the scripts table before version 8, with the column).
        out.push("ALTER TABLE services ADD COLUMN targetname TEXT");
        out.push("ALTER TABLE findings ADD COLUMN targetname TEXT");
        if from == 8 {
            out.push("ALTER TABLE scripts ADD COLUMN targetname TEXT");
        }
    }
    if from < 10 {
        // Version 10: what each probe got from a port no rule identified
        // (Service::replies), as JSON: [{"probe", "data"}], data written
        // as the banner is.
        out.push("ALTER TABLE services ADD COLUMN replies {json}");
    }
    // Version 11: OS detection (os, os_matches, os_classes) and traceroute
    // (traces, trace_hops), tables made by the DDL: nothing to alter.
    out
}

/// The statements that bring a database of schema version `from` to
/// [`VERSION`], for SQLite.
pub fn sqlite_upgrades(from: i64) -> Vec<String> {
    upgrades(from).into_iter().map(|s| s.replace("{json}", "TEXT").replace("{int}", "INTEGER")).collect()
}

/// The statements that bring a database of schema version `from` to
/// [`VERSION`], for PostgreSQL.
pub fn postgres_upgrades(from: i64) -> Vec<String> {
    upgrades(from).into_iter().map(|s| s.replace("{json}", "JSONB").replace("{int}", "BIGINT")).collect()
}

/// The DDL for SQLite.
pub fn sqlite() -> String {
    DDL.replace("{int}", "INTEGER").replace("{real}", "REAL").replace("{bool}", "INTEGER").replace("{json}", "TEXT")
}

/// The DDL for PostgreSQL.
pub fn postgres() -> String {
    DDL.replace("{int}", "BIGINT")
        .replace("{real}", "DOUBLE PRECISION")
        .replace("{bool}", "BOOLEAN")
        .replace("{json}", "JSONB")
}

/// How a column's values are bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Text,
    Int,
    Real,
    Bool,
    Json,
}

/// A table rows are inserted into: its name and columns in insert order.
#[derive(Debug)]
pub struct Table {
    pub name: &'static str,
    pub columns: &'static [(&'static str, Kind)],
    /// `ON CONFLICT` clause target, for tables with a unique key.
    pub conflict: Option<&'static str>,
}

use Kind::*;

pub const SCANS: Table = Table {
    name: "scans",
    columns: &[
        ("id", Text),
        ("started", Text),
        ("args", Json),
        ("scan_type", Text),
        ("seed", Text),
        ("probes_planned", Int),
        ("shard", Text),
        ("settings", Json),
    ],
    conflict: Some("id"),
};

pub const PORTS: Table = Table {
    name: "ports",
    columns: &[
        ("scan_id", Text),
        ("ip", Text),
        ("port", Int),
        ("proto", Text),
        ("state", Text),
        ("reason", Text),
        ("ttl", Int),
        ("t", Real),
        ("seq", Int),
    ],
    conflict: Some("scan_id, ip, port, proto"),
};

pub const SERVICES: Table = Table {
    name: "services",
    columns: &[
        ("scan_id", Text),
        ("ip", Text),
        ("port", Int),
        ("proto", Text),
        ("service", Text),
        ("product", Text),
        ("version", Text),
        ("info", Text),
        ("os", Text),
        ("hostname", Text),
        ("device", Text),
        ("tunnel", Text),
        ("method", Text),
        ("cpe", Json),
        ("banner", Text),
        ("probe", Text),
        ("tls_version", Text),
        ("tls_cipher", Text),
        ("tls_alpn", Text),
        ("tls_session", Json),
        ("t", Real),
        ("seq", Int),
        ("targetname", Text),
        ("replies", Json),
    ],
    conflict: None,
};

pub const TLS_CERTS: Table = Table {
    name: "tls_certs",
    columns: &[
        ("scan_id", Text),
        ("ip", Text),
        ("port", Int),
        ("position", Int),
        ("subject", Text),
        ("issuer", Text),
        ("san", Json),
        ("not_before", Text),
        ("not_after", Text),
        ("serial", Text),
        ("key_type", Text),
        ("key_bits", Int),
        ("curve", Text),
        ("signature_algorithm", Text),
        ("self_signed", Bool),
        ("sha256", Text),
        ("error", Text),
        ("seq", Int),
    ],
    conflict: None,
};

pub const FINDINGS: Table = Table {
    name: "findings",
    columns: &[
        ("scan_id", Text),
        ("ip", Text),
        ("port", Int),
        ("proto", Text),
        ("plugin", Text),
        ("severity", Text),
        ("title", Text),
        ("data", Json),
        ("about", Json),
        ("host", Int),
        ("t", Real),
        ("seq", Int),
        ("targetname", Text),
    ],
    conflict: None,
};

pub const ERRORS: Table = Table {
    name: "errors",
    columns: &[
        ("scan_id", Text),
        ("ip", Text),
        ("port", Int),
        ("plugin", Text),
        ("kind", Text),
        ("message", Text),
        ("seq", Int),
    ],
    conflict: None,
};

/// What host discovery said of a host, or that a host taken as up
/// (`-Pn`) answered (its `host` event); the first event of a host is
/// kept.
pub const HOSTS: Table = Table {
    name: "hosts",
    columns: &[
        ("scan_id", Text),
        ("ip", Text),
        ("state", Text),
        ("reason", Text),
        ("ttl", Int),
        ("latency", Real),
        ("mac", Text),
        ("t", Real),
        ("seq", Int),
    ],
    conflict: Some("scan_id, ip"),
};

/// Script results (`script` events).
pub const SCRIPTS: Table = Table {
    name: "scripts",
    columns: &[
        ("scan_id", Text),
        ("ip", Text),
        ("port", Int),
        ("proto", Text),
        ("plugin", Text),
        ("output", Text),
        ("data", Json),
        ("volatile", Json),
        ("host", Int),
        ("t", Real),
        ("seq", Int),
        ("targetname", Text),
    ],
    conflict: None,
};

/// Ports decided but not shown one by one (`extraports` events).
pub const EXTRAPORTS: Table = Table {
    name: "extraports",
    columns: &[
        ("scan_id", Text),
        ("ip", Text),
        ("proto", Text),
        ("state", Text),
        ("reason", Text),
        ("count", Int),
        ("ports", Json),
        ("seq", Int),
    ],
    conflict: None,
};

/// The tables rows go to, in the order a batch writes them (scans first:
/// the others refer to it).
pub const TABLES: [&Table; 15] = [
    &SCANS,
    &PORTS,
    &SERVICES,
    &TLS_CERTS,
    &FINDINGS,
    &SCRIPTS,
    &ERRORS,
    &HOSTS,
    &EXTRAPORTS,
    &RDNS,
    &OS,
    &OS_MATCHES,
    &OS_CLASSES,
    &TRACES,
    &TRACE_HOPS,
];

/// What `scan_end` sets on its scan's row; the parameters are these columns, then the id.
pub const SCAN_END: &str = "UPDATE scans SET ended = ?, elapsed = ?, probes_sent = ?, open = ?, closed = ?, \
                            filtered = ?, errors = ?, findings = ?, scripts = ?, interrupted = ? WHERE id = ?";
pub const SCAN_END_KINDS: [Kind; 11] = [Text, Real, Int, Int, Int, Int, Int, Int, Int, Bool, Text];

pub const RDNS: Table = Table {
    name: "rdns",
    columns: &[("scan_id", Text), ("ip", Text), ("name", Text), ("t", Real), ("seq", Int)],
    conflict: Some("scan_id, ip"),
};

/// What OS detection found on a host, or the passive hint (`os` events):
/// one row an event, its matches and their classes in the next two tables
/// under the same `seq`. The sequences and ports used are JSON as in the
/// event.
pub const OS: Table = Table {
    name: "os",
    columns: &[
        ("scan_id", Text),
        ("ip", Text),
        ("exact", Bool),
        ("too_many", Bool),
        ("fingerprint", Text),
        ("not_ideal", Text),
        ("distance", Int),
        ("uptime", Int),
        ("lastboot", Text),
        ("ports_used", Json),
        ("tcp_sequence", Json),
        ("ip_id_sequence", Json),
        ("tcp_ts_sequence", Json),
        ("hint_family", Text),
        ("hint_evidence", Text),
        ("t", Real),
        ("seq", Int),
    ],
    conflict: None,
};

/// An OS event's matches, best first (`position` 0).
pub const OS_MATCHES: Table = Table {
    name: "os_matches",
    columns: &[
        ("scan_id", Text),
        ("ip", Text),
        ("position", Int),
        ("name", Text),
        ("accuracy", Int),
        ("line", Int),
        ("seq", Int),
    ],
    conflict: None,
};

/// The classes of each match, in order.
pub const OS_CLASSES: Table = Table {
    name: "os_classes",
    columns: &[
        ("scan_id", Text),
        ("ip", Text),
        ("match_position", Int),
        ("position", Int),
        ("vendor", Text),
        ("family", Text),
        ("generation", Text),
        ("device_type", Text),
        ("accuracy", Int),
        ("cpe", Json),
        ("seq", Int),
    ],
    conflict: None,
};

/// A host's traceroute (`trace` events); its hops in `trace_hops` under
/// the same `seq`.
pub const TRACES: Table = Table {
    name: "traces",
    columns: &[("scan_id", Text), ("ip", Text), ("port", Int), ("proto", Text), ("t", Real), ("seq", Int)],
    conflict: None,
};

/// One hop of a traceroute, in TTL order (`hop_ip` NULL for a hop that
/// never answered).
pub const TRACE_HOPS: Table = Table {
    name: "trace_hops",
    columns: &[
        ("scan_id", Text),
        ("ip", Text),
        ("ttl", Int),
        ("hop_ip", Text),
        ("rtt_ms", Real),
        ("host", Text),
        ("seq", Int),
    ],
    conflict: None,
};
