//! Result stores: a sink that writes every event into SQLite or PostgreSQL,
//! and [`Db`], which reads the scans back (`moonscan db`).
//!
//! In: the scan's event stream ([`Store`] is a [`Sink`]). Out: rows in the
//! tables of [`schema`] (scans, ports, services, tls_certs, findings, scripts,
//! errors, hosts, extraports, rdns, os with os_matches and os_classes,
//! traces with trace_hops), in a file (SQLite, WAL mode, `synchronous=NORMAL`) or a
//! PostgreSQL database (`postgres://` or `postgresql://` URL, one connection,
//! no TLS). What always holds: [`Sink::record`] only buffers rows;
//! [`Sink::flush`] writes everything buffered in one transaction (nothing of
//! a failed flush is written); a failure is an `io::Error` that names the
//! database, never a panic. Plugins' log lines are not stored.
//!
//! Several scans may write into one database at once (each has its own scan
//! id): SQLite waits for the file lock up to [`BUSY_TIMEOUT`], PostgreSQL
//! serialises only the creation of the tables.

mod diff;
mod postgres;
mod read;
pub mod schema;
mod sqlite;

use std::io;
use std::time::{Duration, SystemTime};

pub use diff::{diff, steady_form, Diff, OsChange, ServiceChange, Uncovered};
pub use read::Db;
pub use read::ScanSummary;

use super::Sink;
use crate::error::{Error, ErrorKind};
use crate::findings::{Event, PortState, ServiceMethod};
use crate::places::PgPasswords;
use schema::Table;

/// How long a SQLite writer waits for another process's transaction.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// Opens the store at `target` (a file path, or a `postgres://` /
/// `postgresql://` URL), creating the tables if they are missing. The
/// error's message does not repeat `target` (show it with
/// [`display_name`]); the errors of `record`, `flush` and `close` name it.
/// A PostgreSQL URL without a password takes one from `pg`, as libpq does.
pub fn open(target: &str, pg: &PgPasswords) -> crate::error::Result<Box<dyn Sink>> {
    Ok(Box::new(Store::open(target, pg)?))
}

/// True if `target` names a PostgreSQL database rather than a file.
pub fn is_postgres(target: &str) -> bool {
    let lower = target.get(..13).unwrap_or(target).to_ascii_lowercase();
    lower.starts_with("postgres://") || lower.starts_with("postgresql://")
}

/// One value bound to an insert's parameter.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Val {
    Null,
    Int(i64),
    Real(f64),
    Bool(bool),
    /// Text, or JSON text for a JSON column.
    Text(String),
}

impl Val {
    fn opt(s: &Option<String>) -> Val {
        s.as_ref().map_or(Val::Null, |s| Val::Text(s.clone()))
    }

    fn json<T: serde::Serialize + ?Sized>(v: &T) -> Val {
        // Serialising strings, vectors and Values cannot fail.
        Val::Text(serde_json::to_string(v).unwrap_or_else(|_| "null".into()))
    }

    fn int(n: u64) -> Val {
        Val::Int(i64::try_from(n).unwrap_or(i64::MAX))
    }
}

/// What one flush writes: rows per table (in [`schema::TABLES`] order) and
/// the `scan_end` updates, which go last.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    pub rows: [Vec<Vec<Val>>; schema::TABLES.len()],
    pub ends: Vec<Vec<Val>>,
}

impl Batch {
    fn len(&self) -> usize {
        self.rows.iter().map(Vec::len).sum::<usize>() + self.ends.len()
    }

    fn clear(&mut self) {
        self.rows.iter_mut().for_each(Vec::clear);
        self.ends.clear();
    }
}

/// A database connection, as the store and [`Db`] use it.
pub(crate) trait Backend: Send {
    /// Writes the whole batch in one transaction.
    fn write(&mut self, batch: &Batch) -> crate::error::Result<()>;
    /// Runs a query with `?` placeholders and text parameters.
    fn query(&mut self, sql: &str, params: &[&str]) -> crate::error::Result<Vec<Vec<Cell>>>;
}

/// One value a query returned.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Cell {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
}

/// Opens a backend: PostgreSQL for a URL, SQLite otherwise. `create`: a
/// missing SQLite file is created (else it is an error).
fn connect(target: &str, create: bool, pg: &PgPasswords) -> crate::error::Result<Box<dyn Backend>> {
    if is_postgres(target) {
        Ok(Box::new(postgres::Pg::connect(target, pg)?))
    } else {
        Ok(Box::new(sqlite::Lite::open(target, create)?))
    }
}

/// The store sink: buffers each event's rows, writes them on flush.
pub struct Store {
    db: Box<dyn Backend>,
    /// The database as messages name it (a URL without its password).
    label: String,
    scan_id: Option<String>,
    seq: i64,
    batch: Batch,
}

impl Store {
    /// See [`open`].
    pub fn open(target: &str, pg: &PgPasswords) -> crate::error::Result<Store> {
        let db = connect(target, true, pg)?;
        Ok(Store::with_backend(db, display_name(target)))
    }

    fn with_backend(db: Box<dyn Backend>, label: String) -> Store {
        Store { db, label, scan_id: None, seq: 0, batch: Batch::default() }
    }

    /// An in-memory SQLite store (tests).
    #[cfg(test)]
    pub(crate) fn memory() -> Store {
        Store::with_backend(Box::new(sqlite::Lite::memory().expect("in-memory SQLite")), ":memory:".into())
    }

    /// Reads back what this store wrote (tests).
    #[cfg(test)]
    pub(crate) fn into_db(self) -> Db {
        Db::from_backend(self.db, self.label)
    }

    fn scan(&self, what: &str) -> io::Result<Val> {
        match &self.scan_id {
            Some(id) => Ok(Val::Text(id.clone())),
            None => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: {what} event before scan_start: nothing to store it under", self.label),
            )),
        }
    }

    fn push(&mut self, table: &Table, row: Vec<Val>) {
        debug_assert_eq!(row.len(), table.columns.len(), "{}", table.name);
        let i = schema::TABLES.iter().position(|t| t.name == table.name).unwrap_or(0);
        self.batch.rows[i].push(row);
    }

    /// A scan begins: its row in `scans`, and the event count starts again.
    fn store_start(&mut self, s: &crate::findings::ScanStart) {
        self.scan_id = Some(s.scan_id.to_string());
        self.seq = 1;
        let row = vec![
            Val::Text(s.scan_id.to_string()),
            Val::Text(humantime::format_rfc3339_millis(s.started).to_string()),
            Val::json(&s.args),
            Val::Text(serde_name(&s.scan_type)),
            Val::Text(s.seed.to_string()),
            Val::int(s.probes_planned),
            Val::opt(&s.settings.shard),
            Val::json(&s.settings),
        ];
        self.push(&schema::SCANS, row);
    }

    /// A service, and its TLS certificate chain if it has one.
    fn store_service(&mut self, s: &crate::findings::Service, seq: Val) -> io::Result<()> {
        let id = self.scan("service")?;
        let tls = s.tls.as_deref();
        let row = vec![
            id.clone(),
            Val::Text(s.ip.to_string()),
            Val::Int(s.port.into()),
            Val::Text(s.proto.into()),
            Val::Text(s.id.service.clone()),
            Val::opt(&s.id.product),
            Val::opt(&s.id.version),
            Val::opt(&s.id.info),
            Val::opt(&s.id.os),
            Val::opt(&s.id.hostname),
            Val::opt(&s.id.device),
            s.tunnel.map_or(Val::Null, |t| Val::Text(t.into())),
            Val::Text(method_name(s.method).into()),
            Val::json(&s.id.cpe),
            if s.banner.is_empty() { Val::Null } else { Val::Text(crate::findings::banner_text::to_text(&s.banner)) },
            Val::opt(&s.probe),
            tls.map_or(Val::Null, |t| Val::Text(t.version.clone())),
            tls.map_or(Val::Null, |t| Val::Text(t.cipher.clone())),
            tls.map_or(Val::Null, |t| Val::opt(&t.alpn)),
            tls.map_or(Val::Null, |t| Val::json(&TlsSession::of(t))),
            Val::Real(s.t),
            seq.clone(),
            Val::opt(&s.targetname),
            if s.replies.is_empty() { Val::Null } else { Val::json(&s.replies) },
        ];
        self.push(&schema::SERVICES, row);
        for (i, c) in tls.map_or(&[][..], |t| &t.chain[..]).iter().enumerate() {
            let row = vec![
                id.clone(),
                Val::Text(s.ip.to_string()),
                Val::Int(s.port.into()),
                Val::Int(i as i64),
                Val::Text(c.subject.clone()),
                Val::Text(c.issuer.clone()),
                Val::json(&c.san),
                Val::Text(c.not_before.clone()),
                Val::Text(c.not_after.clone()),
                Val::Text(c.serial.clone()),
                Val::Text(c.key_type.clone()),
                Val::Int(c.key_bits.into()),
                Val::opt(&c.curve),
                Val::Text(c.signature_algorithm.clone()),
                Val::Bool(c.self_signed),
                Val::Text(c.sha256.clone()),
                Val::opt(&c.error),
                seq.clone(),
            ];
            self.push(&schema::TLS_CERTS, row);
        }
        Ok(())
    }

    /// A finding.
    fn store_finding(&mut self, f: &crate::findings::FindingEvent, seq: Val) -> io::Result<()> {
        let row = vec![
            self.scan("finding")?,
            Val::Text(f.ip.to_string()),
            Val::Int(f.port.into()),
            Val::Text(f.proto.into()),
            Val::Text(f.plugin.clone()),
            Val::Text(f.severity.into()),
            Val::Text(f.title.clone()),
            if f.data.is_null() { Val::Null } else { Val::json(&f.data) },
            if f.about.is_empty() { Val::Null } else { Val::json(&f.about) },
            if f.host { Val::Int(1) } else { Val::Null },
            Val::Real(f.t),
            seq,
            Val::opt(&f.targetname),
        ];
        self.push(&schema::FINDINGS, row);
        Ok(())
    }

    /// A script's output.
    fn store_script(&mut self, r: &crate::findings::ScriptEvent, seq: Val) -> io::Result<()> {
        let row = vec![
            self.scan("script")?,
            Val::Text(r.ip.to_string()),
            Val::Int(r.port.into()),
            Val::Text(r.proto.into()),
            Val::Text(r.plugin.clone()),
            Val::Text(r.output.clone()),
            if r.data.is_null() { Val::Null } else { Val::json(&r.data) },
            if r.volatile.is_empty() { Val::Null } else { Val::json(&r.volatile) },
            if r.host { Val::Int(1) } else { Val::Null },
            Val::Real(r.t),
            seq,
            Val::opt(&r.targetname),
        ];
        self.push(&schema::SCRIPTS, row);
        Ok(())
    }

    /// An OS result, its matches and their classes.
    fn store_os(&mut self, e: &crate::findings::OsEvent, seq: Val) -> io::Result<()> {
        let id = self.scan("os")?;
        let at = Val::Text(e.ip.to_string());
        let seq_json = |s: &Option<crate::findings::Sequence>| s.as_ref().map_or(Val::Null, Val::json);
        let row = vec![
            id.clone(),
            at.clone(),
            Val::Bool(e.exact),
            Val::Bool(e.too_many),
            Val::opt(&e.fingerprint),
            Val::opt(&e.not_ideal),
            e.distance.map_or(Val::Null, |d| Val::Int(d.into())),
            e.uptime.as_ref().map_or(Val::Null, |u| Val::int(u.seconds)),
            e.uptime.as_ref().map_or(Val::Null, |u| Val::Text(u.lastboot.clone())),
            if e.ports_used.is_empty() { Val::Null } else { Val::json(&e.ports_used) },
            seq_json(&e.tcp_sequence),
            seq_json(&e.ip_id_sequence),
            seq_json(&e.tcp_ts_sequence),
            e.hint.as_ref().map_or(Val::Null, |h| Val::Text(h.family.clone())),
            e.hint.as_ref().map_or(Val::Null, |h| Val::Text(h.evidence.clone())),
            Val::Real(e.t),
            seq.clone(),
        ];
        self.push(&schema::OS, row);
        for (i, m) in e.matches.iter().enumerate() {
            let row = vec![
                id.clone(),
                at.clone(),
                Val::Int(i as i64),
                Val::Text(m.name.clone()),
                Val::Int(m.accuracy.into()),
                Val::int(m.line as u64),
                seq.clone(),
            ];
            self.push(&schema::OS_MATCHES, row);
            for (j, c) in m.classes.iter().enumerate() {
                let row = vec![
                    id.clone(),
                    at.clone(),
                    Val::Int(i as i64),
                    Val::Int(j as i64),
                    Val::Text(c.vendor.clone()),
                    Val::Text(c.family.clone()),
                    Val::opt(&c.generation),
                    Val::Text(c.device_type.clone()),
                    Val::Int(c.accuracy.into()),
                    Val::json(&c.cpe),
                    seq.clone(),
                ];
                self.push(&schema::OS_CLASSES, row);
            }
        }
        Ok(())
    }

    /// A traceroute and its hops.
    fn store_trace(&mut self, e: &crate::findings::TraceEvent, seq: Val) -> io::Result<()> {
        let id = self.scan("trace")?;
        let at = Val::Text(e.ip.to_string());
        let row = vec![
            id.clone(),
            at.clone(),
            Val::Int(e.port.into()),
            Val::Text(e.proto.into()),
            Val::Real(e.t),
            seq.clone(),
        ];
        self.push(&schema::TRACES, row);
        for h in &e.hops {
            let row = vec![
                id.clone(),
                at.clone(),
                Val::Int(h.ttl.into()),
                h.ip.map_or(Val::Null, |ip| Val::Text(ip.to_string())),
                h.rtt_ms.map_or(Val::Null, Val::Real),
                Val::opt(&h.host),
                seq.clone(),
            ];
            self.push(&schema::TRACE_HOPS, row);
        }
        Ok(())
    }

    /// The scan's end: its counts go into its `scans` row.
    fn store_end(&mut self, e: &crate::findings::ScanEnd) {
        let ended = humantime::format_rfc3339_millis(SystemTime::now()).to_string();
        self.batch.ends.push(vec![
            Val::Text(ended),
            Val::Real(e.elapsed),
            Val::int(e.probes_sent),
            Val::int(e.open),
            Val::int(e.closed),
            Val::int(e.filtered),
            Val::int(e.errors),
            Val::int(e.findings),
            Val::int(e.scripts),
            Val::Bool(e.interrupted),
            Val::Text(e.scan_id.to_string()),
        ]);
    }
}

/// `target` as messages should show it: a URL's password is left out
/// ([`super::redact::url`]).
pub fn display_name(target: &str) -> String {
    super::redact::url(target).into_owned()
}

fn state_name(s: PortState) -> &'static str {
    s.as_str()
}

fn method_name(m: ServiceMethod) -> &'static str {
    match m {
        ServiceMethod::Probed => "probed",
        ServiceMethod::Soft => "soft",
        ServiceMethod::Table => "table",
    }
}

/// The serde name of a unit enum value (`"syn"`, `"timeout"`).
fn serde_name<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}

impl Sink for Store {
    fn record(&mut self, event: &Event) -> io::Result<()> {
        let seq = Val::Int(self.seq);
        self.seq += 1;
        match event {
            Event::ScanStart(s) => self.store_start(s),
            Event::Port(p) => {
                let row = vec![
                    self.scan("port")?,
                    Val::Text(p.ip.to_string()),
                    Val::Int(p.port.into()),
                    Val::Text(p.proto.into()),
                    Val::Text(state_name(p.state).into()),
                    Val::Text(p.reason.into()),
                    p.ttl.map_or(Val::Null, |t| Val::Int(t.into())),
                    Val::Real(p.t),
                    seq,
                ];
                self.push(&schema::PORTS, row);
            }
            Event::Service(s) => self.store_service(s, seq)?,
            Event::Finding(f) => self.store_finding(f, seq)?,
            Event::Script(r) => self.store_script(r, seq)?,
            Event::Os(e) => self.store_os(e, seq)?,
            Event::Trace(e) => self.store_trace(e, seq)?,
            Event::Rdns(r) => {
                let row = vec![
                    self.scan("rdns")?,
                    Val::Text(r.ip.to_string()),
                    Val::Text(r.name.clone()),
                    Val::Real(r.t),
                    seq,
                ];
                self.push(&schema::RDNS, row);
            }
            Event::Host(h) => {
                let row = vec![
                    self.scan("host")?,
                    Val::Text(h.ip.to_string()),
                    Val::Text(serde_name(&h.state)),
                    Val::Text(h.reason.as_str().into()),
                    h.ttl.map_or(Val::Null, |t| Val::Int(t.into())),
                    h.latency.map_or(Val::Null, Val::Real),
                    Val::opt(&h.mac),
                    Val::Real(h.t),
                    seq,
                ];
                self.push(&schema::HOSTS, row);
            }
            Event::Extraports(e) => {
                let row = vec![
                    self.scan("extraports")?,
                    Val::Text(e.ip.to_string()),
                    Val::Text(e.proto.into()),
                    Val::Text(state_name(e.state).into()),
                    Val::Text(e.reason.as_str().into()),
                    Val::Int(e.count.into()),
                    if e.ports.is_empty() { Val::Null } else { Val::json(&e.ports) },
                    seq,
                ];
                self.push(&schema::EXTRAPORTS, row);
            }
            Event::Log(_) | Event::Timing(_) => {}
            Event::Error(e) => {
                let row = vec![
                    self.scan("error")?,
                    e.ip.map_or(Val::Null, |ip| Val::Text(ip.to_string())),
                    e.port.map_or(Val::Null, |p| Val::Int(p.into())),
                    Val::opt(&e.plugin),
                    Val::Text(serde_name(&e.kind)),
                    Val::Text(e.message.clone()),
                    seq,
                ];
                self.push(&schema::ERRORS, row);
            }
            Event::ScanEnd(e) => self.store_end(e),
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.batch.len() == 0 {
            return Ok(());
        }
        let res = self.db.write(&self.batch);
        let n = self.batch.len();
        // A failed batch is not retried: the transaction wrote none of it, and
        // the drain drops a failing sink.
        self.batch.clear();
        res.map_err(|e| io::Error::other(format!("{}: storing {n} rows: {e}", self.label)))
    }
}

/// A database error. The message does not name the database: the caller
/// does (`--db FILE: ...`).
fn db_error(e: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::Store, e.to_string())
}

/// A database error, keeping the driver's error as its cause.
fn db_cause(e: impl std::error::Error + Send + Sync + 'static) -> Error {
    Error::with_source(ErrorKind::Store, e.to_string(), e)
}

#[cfg(test)]
mod tests;

/// The `tls_session` column: the TLS facts beyond version, suite and ALPN.
#[derive(Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct TlsSession {
    #[serde(default)]
    pub path: String,
    #[serde(default)]
    pub kx: String,
    #[serde(default)]
    pub group: Option<String>,
    #[serde(default)]
    pub kx_bits: u32,
    #[serde(default)]
    pub ja3s: String,
    #[serde(default)]
    pub ja4s: String,
    #[serde(default)]
    pub starttls: Option<String>,
    /// Certificates the server sent past those kept.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub chain_cut: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl TlsSession {
    fn of(t: &crate::findings::TlsInfo) -> TlsSession {
        TlsSession {
            path: t.path.clone(),
            kx: t.kx.clone(),
            group: t.group.clone(),
            kx_bits: t.kx_bits,
            ja3s: t.ja3s.clone(),
            ja4s: t.ja4s.clone(),
            starttls: t.starttls.clone(),
            chain_cut: t.chain_cut,
        }
    }
}
