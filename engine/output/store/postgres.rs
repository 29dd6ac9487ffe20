//! The PostgreSQL backend (the sync `postgres` crate, no TLS): one
//! connection, one transaction a flush.
//!
//! A flush of few rows is one round trip: a script of multi-row INSERTs
//! with the values as SQL literals (see [`literal`]), which the server runs
//! as one transaction. A flush of many ports (a sweep) first COPYs them into
//! a temporary table and inserts them from there with `ON CONFLICT DO
//! NOTHING`: for 65,536 ports the server takes 0.36 s that way against 0.9 s
//! for the same rows as INSERT literals (four round trips instead of one,
//! which matters only for small flushes). Reads use bound parameters.
//!
//! A URL without a password takes one as libpq does, from the settings
//! given ([`PgPasswords`]; the command's are `$PGPASSWORD`, `$PGPASSFILE`
//! and `~/.pgpass`): the password, else the first matching line of the
//! password file, read only if no one but its owner may read it.
//!
//! The sync client runs its own small Tokio runtime, which cannot be
//! entered from a thread that is already inside one: every call is then made
//! from a scoped helper thread instead.

use std::borrow::Cow;
use std::error::Error as StdError;
use std::path::PathBuf;
use std::time::Duration;

use postgres::types::{FromSql, ToSql, Type};
use postgres::{Client, Config, NoTls};

use super::schema::{self, Kind};
use super::{db_error, Backend, Batch, Cell, Val};
use crate::error::{Error, ErrorKind};
use crate::places::PgPasswords;

/// Rows in one INSERT statement.
const CHUNK_ROWS: usize = 1000;
/// From this many ports in a flush on, they go through COPY.
const COPY_PORTS: usize = 256;
/// The session's staging table for COPY (emptied at every commit).
const STAGE: &str = "moonscan_stage_ports";
/// A lock number for creating the tables (`pg_advisory_xact_lock`): "moonscan".
const SCHEMA_LOCK: i64 = 0x6d6f_6f6e_7363_616e;

pub(crate) struct Pg {
    client: Client,
    /// The staging table exists in this session.
    staged: bool,
}

/// Runs `f` where the sync client may block: here, or on a helper thread
/// when this thread is inside a Tokio runtime.
fn off_runtime<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    if tokio::runtime::Handle::try_current().is_err() {
        return f();
    }
    std::thread::scope(|s| match s.spawn(f).join() {
        Ok(v) => v,
        Err(p) => std::panic::resume_unwind(p),
    })
}

/// A database error with PostgreSQL's own message and detail, and the
/// driver's error as its cause.
fn pg_err(e: postgres::Error) -> Error {
    Error::with_source(ErrorKind::Store, pg_message(&e), e)
}

fn pg_message(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => {
            let mut s = format!("{}: {}", db.severity(), db.message());
            if let Some(d) = db.detail() {
                s.push_str(&format!(" ({d})"));
            }
            s
        }
        None => {
            let mut s = e.to_string();
            if let Some(src) = e.source() {
                s.push_str(&format!(": {src}"));
            }
            s
        }
    }
}

/// Largest password file read.
const MAX_PASSFILE: u64 = 1 << 20;

/// Where a password comes from when the URL has none.
#[derive(Debug, Default)]
struct Passwords {
    /// The password given ([`PgPasswords::password`]; empty is none).
    env: Option<String>,
    /// The password file ([`PgPasswords::file`]).
    file: Option<PathBuf>,
    /// The user name to match when the URL has none (the driver logs in
    /// as the system user then).
    system_user: Option<String>,
}

impl Passwords {
    fn from_settings(pg: &PgPasswords) -> Passwords {
        Passwords {
            env: pg.password.clone().filter(|p| !p.is_empty()),
            file: pg.file.clone(),
            system_user: whoami::username().ok(),
        }
    }
}

/// Gives `cfg` the password libpq would use when the URL has none. Returns
/// why a password file was passed over (for the error of a failed
/// connection: libpq prints it as a warning).
fn fill_password(cfg: &mut Config, from: &Passwords) -> Option<String> {
    if cfg.get_password().is_some() {
        return None;
    }
    if let Some(p) = &from.env {
        cfg.password(p.as_str());
        return None;
    }
    let path = from.file.as_ref()?;
    let meta = std::fs::metadata(path).ok()?;
    let skip = |why: &str| Some(format!("password file {} not read: {why}", path.display()));
    if !meta.is_file() {
        return skip("not a plain file");
    }
    {
        use std::os::unix::fs::PermissionsExt;
        if meta.permissions().mode() & 0o077 != 0 {
            return skip("group or others may read it (chmod 0600 it)");
        }
    }
    let text = match crate::files::read_text_capped(path, MAX_PASSFILE, "password file") {
        Ok(t) => t,
        Err(e) => return Some(e.to_string()),
    };
    let host = match cfg.get_hosts().first() {
        Some(postgres::config::Host::Tcp(h)) => h.clone(),
        // libpq matches a Unix socket (or no host) as localhost.
        _ => "localhost".to_string(),
    };
    let port = cfg.get_ports().first().copied().unwrap_or(5432).to_string();
    let user = cfg.get_user().map(str::to_string).or_else(|| from.system_user.clone())?;
    let db = cfg.get_dbname().map_or_else(|| user.clone(), str::to_string);
    if let Some(p) = passfile_lookup(&text, [&host, &port, &db, &user]) {
        cfg.password(p);
    }
    None
}

/// The password of the first line of a `.pgpass` file that matches host,
/// port, database and user: `hostname:port:database:username:password`,
/// `*` matching anything, `\:` and `\\` a literal colon and backslash,
/// lines starting with `#` ignored.
fn passfile_lookup(text: &str, want: [&str; 4]) -> Option<String> {
    for line in text.lines() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        // (as written, unescaped) for each field.
        let mut fields: Vec<(String, String)> = vec![(String::new(), String::new())];
        let mut chars = line.chars();
        while let Some(c) = chars.next() {
            let last = fields.len() - 1;
            match c {
                '\\' => {
                    let next = chars.next().unwrap_or('\\');
                    fields[last].0.extend([c, next]);
                    fields[last].1.push(next);
                }
                ':' if fields.len() < 5 => fields.push((String::new(), String::new())),
                // The password ends at a colon, as libpq reads it.
                ':' => break,
                c => {
                    fields[last].0.push(c);
                    fields[last].1.push(c);
                }
            }
        }
        if fields.len() < 5 {
            continue;
        }
        if fields.iter().zip(want).all(|((raw, text), w)| raw == "*" || text == w) {
            return Some(fields[4].1.clone());
        }
    }
    None
}

impl Pg {
    /// Connects and creates the tables if they are missing.
    pub fn connect(url: &str, pg: &PgPasswords) -> crate::error::Result<Pg> {
        let mut cfg: Config = url.parse().map_err(|e| db_error(format!("bad PostgreSQL URL: {e}")))?;
        if cfg.get_connect_timeout().is_none() {
            cfg.connect_timeout(Duration::from_secs(10));
        }
        if cfg.get_application_name().is_none() {
            cfg.application_name("moonscan");
        }
        let passed_over = fill_password(&mut cfg, &Passwords::from_settings(pg));
        off_runtime(move || {
            let client = cfg.connect(NoTls).map_err(|e| {
                let why = passed_over.map_or_else(String::new, |w| format!(" ({w})"));
                Error::with_source(ErrorKind::Store, format!("cannot connect: {}{why}", pg_message(&e)), e)
            })?;
            let mut pg = Pg { client, staged: false };
            pg.create_schema().map_err(|e| db_error(format!("creating the tables: {e}")))?;
            Ok(pg)
        })
    }

    fn create_schema(&mut self) -> crate::error::Result<()> {
        // Literals are quoted for standard_conforming_strings (the default
        // since PostgreSQL 9.1): make sure it is on for this session.
        self.client.batch_execute("SET standard_conforming_strings = on").map_err(pg_err)?;
        let mut tx = self.client.transaction().map_err(pg_err)?;
        // Concurrent CREATE TABLE IF NOT EXISTS can fail in PostgreSQL: one
        // scan at a time creates the tables.
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK]).map_err(pg_err)?;
        // Keep the server's notices ("relation already exists, skipping") quiet.
        tx.batch_execute("SET LOCAL client_min_messages = warning").map_err(pg_err)?;
        tx.batch_execute(&schema::postgres()).map_err(pg_err)?;
        let version: Option<i64> = tx.query_one("SELECT max(version) FROM schema_version", &[]).map_err(pg_err)?.get(0);
        // An older database's tables were skipped by IF NOT EXISTS: upgrade them.
        if let Some(v) = version.filter(|&v| v < schema::VERSION) {
            for sql in schema::postgres_upgrades(v) {
                tx.batch_execute(&sql).map_err(pg_err)?;
            }
            tx.execute("UPDATE schema_version SET version = $1", &[&schema::VERSION]).map_err(pg_err)?;
        }
        let version: Option<i64> = tx.query_one("SELECT max(version) FROM schema_version", &[]).map_err(pg_err)?.get(0);
        match version {
            None => {
                tx.execute("INSERT INTO schema_version (version) VALUES ($1)", &[&schema::VERSION]).map_err(pg_err)?;
            }
            Some(v) if v > schema::VERSION => {
                return Err(db_error(format!(
                    "the database has schema version {v}; this moonscan knows version {} and older",
                    schema::VERSION
                )))
            }
            Some(_) => {}
        }
        tx.commit().map_err(pg_err)
    }
}

/// What a NUL character becomes: PostgreSQL stores none, in text or jsonb.
const NUL: &str = "\\x00";

/// Text as PostgreSQL accepts it: every NUL character made the four
/// characters `\x00`, in text, and in JSON text in every string (and key)
/// of the value it holds.
fn pg_text(s: &str, kind: Kind) -> Cow<'_, str> {
    match kind {
        Kind::Json => pg_json(s),
        _ if s.contains('\0') => s.replace('\0', NUL).into(),
        _ => s.into(),
    }
}

/// JSON text with the NULs of its strings replaced, in the parsed value: a
/// textual replace of `\u0000` would also hit an escaped backslash followed
/// by `u0000` (`\\u0000`) and make the text invalid.
fn pg_json(s: &str) -> Cow<'_, str> {
    // serde_json writes a NUL as \u0000: text without one has no NUL.
    if !s.contains("\\u0000") && !s.contains('\0') {
        return s.into();
    }
    match serde_json::from_str::<serde_json::Value>(s) {
        Ok(mut v) => {
            strip_nul(&mut v);
            // Serialising a Value cannot fail.
            serde_json::to_string(&v).map_or_else(|_| "null".into(), Cow::Owned)
        }
        // Not JSON (the server will say so): no NUL reaches it at least.
        Err(_) => s.replace('\0', NUL).into(),
    }
}

/// Replaces the NULs of every string and key of `v` by [`NUL`].
fn strip_nul(v: &mut serde_json::Value) {
    use serde_json::Value;
    match v {
        Value::String(s) if s.contains('\0') => *s = s.replace('\0', NUL),
        Value::Array(a) => a.iter_mut().for_each(strip_nul),
        Value::Object(o) if o.keys().any(|k| k.contains('\0')) => {
            *o = std::mem::take(o)
                .into_iter()
                .map(|(k, mut v)| {
                    strip_nul(&mut v);
                    (k.replace('\0', NUL), v)
                })
                .collect();
        }
        Value::Object(o) => o.values_mut().for_each(strip_nul),
        _ => {}
    }
}

/// Appends `v` as an SQL literal for a column of `kind`. Strings are quoted
/// with `'` doubled, which is the whole of quoting with
/// standard_conforming_strings on (checked at connect) and UTF-8 on both
/// sides (the client's encoding is always UTF8).
pub(super) fn literal(out: &mut String, v: &Val, kind: Kind) {
    use std::fmt::Write as _;
    match v {
        Val::Null => out.push_str("NULL"),
        Val::Int(n) => {
            let _ = write!(out, "{n}");
        }
        // Display of an f64 is decimal and reads back as the same number.
        Val::Real(x) if x.is_finite() => {
            let _ = write!(out, "{x}");
        }
        Val::Real(x) if x.is_nan() => out.push_str("'NaN'"),
        Val::Real(x) => out.push_str(if *x > 0.0 { "'Infinity'" } else { "'-Infinity'" }),
        Val::Bool(b) => out.push_str(if *b { "TRUE" } else { "FALSE" }),
        Val::Text(t) => {
            out.push('\'');
            out.push_str(&pg_text(t, kind).replace('\'', "''"));
            out.push('\'');
            if kind == Kind::Json {
                out.push_str("::jsonb");
            }
        }
    }
}

/// The whole batch as one script: multi-row INSERTs of up to [`CHUNK_ROWS`]
/// rows, then the `scan_end` updates. `skip_ports`: the ports are written
/// otherwise.
pub(super) fn script(batch: &Batch, skip_ports: bool) -> String {
    let mut sql = String::new();
    for (table, rows) in schema::TABLES.iter().zip(&batch.rows) {
        if skip_ports && table.name == schema::PORTS.name {
            continue;
        }
        let cols: Vec<&str> = table.columns.iter().map(|c| c.0).collect();
        for chunk in rows.chunks(CHUNK_ROWS) {
            sql.push_str(&format!("INSERT INTO {} ({}) VALUES ", table.name, cols.join(", ")));
            for (r, row) in chunk.iter().enumerate() {
                sql.push_str(if r == 0 { "(" } else { ", (" });
                for (i, (v, (_, kind))) in row.iter().zip(table.columns).enumerate() {
                    if i > 0 {
                        sql.push_str(", ");
                    }
                    literal(&mut sql, v, *kind);
                }
                sql.push(')');
            }
            if let Some(key) = table.conflict {
                sql.push_str(&format!(" ON CONFLICT ({key}) DO NOTHING"));
            }
            sql.push_str(";\n");
        }
    }
    for row in &batch.ends {
        let mut vals = row.iter().zip(schema::SCAN_END_KINDS);
        for c in schema::SCAN_END.chars() {
            match (c, if c == '?' { vals.next() } else { None }) {
                ('?', Some((v, kind))) => literal(&mut sql, v, kind),
                _ => sql.push(c),
            }
        }
        sql.push_str(";\n");
    }
    sql
}

/// Appends `v` as a field of COPY's text format.
pub(super) fn copy_field(out: &mut String, v: &Val, kind: Kind) {
    use std::fmt::Write as _;
    match v {
        Val::Null => out.push_str("\\N"),
        Val::Int(n) => {
            let _ = write!(out, "{n}");
        }
        Val::Real(x) if x.is_finite() => {
            let _ = write!(out, "{x}");
        }
        Val::Real(x) if x.is_nan() => out.push_str("NaN"),
        Val::Real(x) => out.push_str(if *x > 0.0 { "Infinity" } else { "-Infinity" }),
        Val::Bool(b) => out.push(if *b { 't' } else { 'f' }),
        Val::Text(t) => {
            for c in pg_text(t, kind).chars() {
                match c {
                    '\\' => out.push_str("\\\\"),
                    '\t' => out.push_str("\\t"),
                    '\n' => out.push_str("\\n"),
                    '\r' => out.push_str("\\r"),
                    c => out.push(c),
                }
            }
        }
    }
}

impl Pg {
    fn write_now(&mut self, batch: &Batch) -> crate::error::Result<()> {
        let ports = &batch.rows[schema::TABLES.iter().position(|t| t.name == schema::PORTS.name).unwrap_or(1)];
        if ports.len() < COPY_PORTS {
            // One round trip: a multi-statement simple query is one
            // transaction (an error rolls all of it back).
            return self.client.batch_execute(&script(batch, false)).map_err(pg_err);
        }
        let res = self.write_copy(batch, ports);
        if res.is_err() {
            // Leave no transaction open (the error said what went wrong).
            let _ = self.client.batch_execute("ROLLBACK");
        }
        res
    }

    /// BEGIN; COPY the ports into the staging table; then one script: the
    /// ports from there, the other rows, COMMIT (which empties the table).
    fn write_copy(&mut self, batch: &Batch, ports: &[Vec<Val>]) -> crate::error::Result<()> {
        let cols: Vec<&str> = schema::PORTS.columns.iter().map(|c| c.0).collect();
        let cols = cols.join(", ");
        if !self.staged {
            self.client
                .batch_execute(&format!(
                    "CREATE TEMP TABLE IF NOT EXISTS {STAGE} ON COMMIT DELETE ROWS AS \
                     SELECT {cols} FROM ports WITH NO DATA"
                ))
                .map_err(|e| pg_err(e).context("creating the staging table"))?;
            self.staged = true;
        }
        self.client.batch_execute("BEGIN").map_err(pg_err)?;
        let mut text = String::with_capacity(ports.len() * 64);
        for row in ports {
            for (i, (v, (_, kind))) in row.iter().zip(schema::PORTS.columns).enumerate() {
                if i > 0 {
                    text.push('\t');
                }
                copy_field(&mut text, v, *kind);
            }
            text.push('\n');
        }
        let mut w = self
            .client
            .copy_in(&format!("COPY {STAGE} ({cols}) FROM STDIN"))
            .map_err(|e| pg_err(e).context("copying ports"))?;
        std::io::Write::write_all(&mut w, text.as_bytes()).map_err(|e| super::db_cause(e).context("copying ports"))?;
        w.finish().map_err(|e| pg_err(e).context("copying ports"))?;
        let key = schema::PORTS.conflict.unwrap_or("scan_id, ip, port, proto");
        let sql = format!(
            "INSERT INTO ports ({cols}) SELECT {cols} FROM {STAGE} ON CONFLICT ({key}) DO NOTHING;\n{}COMMIT",
            script(batch, true)
        );
        self.client.batch_execute(&sql).map_err(pg_err)
    }

    fn query_now(&mut self, sql: &str, params: &[&str]) -> crate::error::Result<Vec<Vec<Cell>>> {
        let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p as &(dyn ToSql + Sync)).collect();
        let rows = self.client.query(numbered(sql).as_str(), &refs).map_err(pg_err)?;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            let mut cells = Vec::with_capacity(row.len());
            for i in 0..row.len() {
                cells.push(row.try_get::<_, Cell>(i).map_err(pg_err)?);
            }
            out.push(cells);
        }
        Ok(out)
    }
}

/// `?` placeholders as PostgreSQL's `$1`, `$2`, ... (the SQL here has no `?` in literals).
fn numbered(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut n = 0;
    for c in sql.chars() {
        if c == '?' {
            n += 1;
            out.push_str(&format!("${n}"));
        } else {
            out.push(c);
        }
    }
    out
}

impl<'a> FromSql<'a> for Cell {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Cell, Box<dyn StdError + Sync + Send>> {
        Ok(match *ty {
            Type::INT8 => Cell::Int(i64::from_sql(ty, raw)?),
            Type::INT4 => Cell::Int(i32::from_sql(ty, raw)?.into()),
            Type::INT2 => Cell::Int(i16::from_sql(ty, raw)?.into()),
            Type::FLOAT8 => Cell::Real(f64::from_sql(ty, raw)?),
            Type::FLOAT4 => Cell::Real(f32::from_sql(ty, raw)?.into()),
            Type::BOOL => Cell::Int(bool::from_sql(ty, raw)?.into()),
            // jsonb's binary form is a version byte, then the text.
            Type::JSONB if raw.first() == Some(&1) => Cell::Text(String::from_utf8_lossy(&raw[1..]).into_owned()),
            _ => Cell::Text(String::from_utf8_lossy(raw).into_owned()),
        })
    }

    fn from_sql_null(_: &Type) -> Result<Cell, Box<dyn StdError + Sync + Send>> {
        Ok(Cell::Null)
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}

impl Backend for Pg {
    fn write(&mut self, batch: &Batch) -> crate::error::Result<()> {
        off_runtime(|| self.write_now(batch))
    }

    fn query(&mut self, sql: &str, params: &[&str]) -> crate::error::Result<Vec<Vec<Cell>>> {
        off_runtime(|| self.query_now(sql, params))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passfile_lines_match_as_libpq_reads_them() {
        let text = "# comment\n\
                    other:5432:db:u:wrong\n\
                    h:5432:db:u\n\
                    h:*:db:u:hun\\:ter\\\\2:ignored\r\n\
                    *:*:*:*:fallback\n";
        assert_eq!(passfile_lookup(text, ["h", "5432", "db", "u"]).as_deref(), Some("hun:ter\\2"));
        assert_eq!(passfile_lookup(text, ["x", "1", "y", "z"]).as_deref(), Some("fallback"));
        // An escaped star is a star, not a wildcard.
        assert_eq!(passfile_lookup("\\*:*:*:*:p\n", ["h", "1", "d", "u"]), None);
        assert_eq!(passfile_lookup("\\*:*:*:*:p\n", ["*", "1", "d", "u"]).as_deref(), Some("p"));
        assert_eq!(passfile_lookup("h:5432:db:u\n", ["h", "5432", "db", "u"]), None, "four fields: no password");
    }

    #[test]
    fn a_url_without_password_takes_pgpassword_then_the_password_file() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pgpass");
        std::fs::write(&file, "127.0.0.1:5432:x:u:from-file\n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let cfg = |url: &str| -> Config { url.parse().unwrap() };
        let from = |env: Option<&str>| Passwords {
            env: env.map(String::from),
            file: Some(file.clone()),
            system_user: Some("u".into()),
        };
        let password = |c: &Config| c.get_password().map(|p| String::from_utf8_lossy(p).into_owned());

        let mut c = cfg("postgres://u@127.0.0.1/x");
        assert_eq!(fill_password(&mut c, &from(None)), None);
        assert_eq!(password(&c).as_deref(), Some("from-file"));
        // The system user (and the database named after it) when the URL has none.
        std::fs::write(&file, "127.0.0.1:5432:u:u:as-system-user\n").unwrap();
        let mut c = cfg("postgres://127.0.0.1");
        fill_password(&mut c, &from(None));
        assert_eq!(password(&c).as_deref(), Some("as-system-user"));
        // $PGPASSWORD first; the URL's own password before both.
        let mut c = cfg("postgres://u@127.0.0.1/x");
        fill_password(&mut c, &from(Some("from-env")));
        assert_eq!(password(&c).as_deref(), Some("from-env"));
        let mut c = cfg("postgres://u:in-url@127.0.0.1/x");
        fill_password(&mut c, &from(Some("from-env")));
        assert_eq!(password(&c).as_deref(), Some("in-url"));
        // A file others may read is passed over, and the error will say why.
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let mut c = cfg("postgres://u@127.0.0.1/u");
        let why = fill_password(&mut c, &from(None)).unwrap();
        assert!(why.contains("chmod 0600"), "{why}");
        assert_eq!(password(&c), None);
        // Larger than 1 MiB: not read.
        std::fs::write(&file, vec![b'#'; (MAX_PASSFILE + 1) as usize]).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let why = fill_password(&mut c, &from(None)).unwrap();
        assert!(why.contains("larger than 1048576 bytes"), "{why}");
        // No file: nothing to say.
        let none = Passwords { file: Some(dir.path().join("none")), ..Passwords::default() };
        assert_eq!(fill_password(&mut c, &none), None);
    }
}
