//! The SQLite backend (rusqlite, SQLite compiled in): WAL journal,
//! `synchronous=NORMAL` (a commit is durable against a crash of moonscan,
//! and against power loss up to the last checkpoint), prepared inserts.

use std::path::Path;

use rusqlite::types::{ToSqlOutput, Value, ValueRef};
use rusqlite::{Connection, OpenFlags, ToSql};

use super::schema::{self, Table};
use super::{db_cause, db_error, Backend, Batch, Cell, Val, BUSY_TIMEOUT};

pub(crate) struct Lite {
    conn: Connection,
}

impl ToSql for Val {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            Val::Null => ToSqlOutput::Owned(Value::Null),
            Val::Int(n) => ToSqlOutput::Owned(Value::Integer(*n)),
            Val::Real(x) => ToSqlOutput::Owned(Value::Real(*x)),
            Val::Bool(b) => ToSqlOutput::Owned(Value::Integer(i64::from(*b))),
            Val::Text(s) => ToSqlOutput::Borrowed(ValueRef::Text(s.as_bytes())),
        })
    }
}

impl Lite {
    /// Opens (or, with `create`, creates) the database file and its tables.
    pub fn open(path: &str, create: bool) -> crate::error::Result<Lite> {
        if !create && !Path::new(path).exists() {
            return Err(db_error("no such database (store a scan in it with `output::store` first)"));
        }
        let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        if create {
            flags |= OpenFlags::SQLITE_OPEN_CREATE;
        }
        // SQLite's "unable to open database file: PATH" names the path itself.
        let conn = Connection::open_with_flags(path, flags)
            .map_err(|e| db_error(e.to_string().replace(&format!(": {path}"), "")))?;
        Lite::setup(conn, true)
    }

    /// A private in-memory database (tests).
    #[cfg(test)]
    pub fn memory() -> crate::error::Result<Lite> {
        let conn = Connection::open_in_memory().map_err(db_cause)?;
        Lite::setup(conn, false)
    }

    fn setup(conn: Connection, wal: bool) -> crate::error::Result<Lite> {
        conn.busy_timeout(BUSY_TIMEOUT).map_err(db_cause)?;
        if wal {
            // journal_mode answers with the mode in force.
            let mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0)).map_err(db_cause)?;
            if !mode.eq_ignore_ascii_case("wal") {
                return Err(db_error(format!("cannot use WAL mode (journal_mode is {mode})")));
            }
        }
        conn.execute_batch("PRAGMA synchronous=NORMAL").map_err(db_cause)?;
        let mut lite = Lite { conn };
        lite.create_schema().map_err(|e| e.context("creating the tables"))?;
        Ok(lite)
    }

    fn create_schema(&mut self) -> crate::error::Result<()> {
        // IMMEDIATE: take the write lock first, so two scans starting at once
        // do not both see an empty schema_version.
        let tx = self.conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate).map_err(db_cause)?;
        tx.execute_batch(&schema::sqlite()).map_err(db_cause)?;
        // An older database's tables were skipped by IF NOT EXISTS: upgrade them.
        let existing: Option<i64> =
            tx.query_row("SELECT max(version) FROM schema_version", [], |r| r.get(0)).map_err(db_cause)?;
        if let Some(v) = existing.filter(|&v| v < schema::VERSION) {
            for sql in schema::sqlite_upgrades(v) {
                tx.execute_batch(&sql)
                    .map_err(|e| db_cause(e).context(format!("upgrading from schema version {v}")))?;
            }
            tx.execute("UPDATE schema_version SET version = ?1", [schema::VERSION]).map_err(db_cause)?;
        }
        let version: Option<i64> =
            tx.query_row("SELECT max(version) FROM schema_version", [], |r| r.get(0)).map_err(db_cause)?;
        match version {
            None => {
                tx.execute("INSERT INTO schema_version (version) VALUES (?1)", [schema::VERSION]).map_err(db_cause)?;
            }
            Some(v) if v > schema::VERSION => {
                return Err(db_error(format!(
                    "the database has schema version {v}; this moonscan knows version {} and older",
                    schema::VERSION
                )))
            }
            Some(_) => {}
        }
        tx.commit().map_err(db_cause)
    }
}

/// `INSERT INTO t (a, b) VALUES (?, ?)`, ignoring rows whose unique key is
/// taken. (Multi-row INSERTs measured no faster here: the B-tree inserts cost
/// more than the statement steps.)
fn insert_sql(t: &Table) -> String {
    let cols: Vec<&str> = t.columns.iter().map(|c| c.0).collect();
    let marks = vec!["?"; cols.len()].join(", ");
    let conflict = match t.conflict {
        Some(key) => format!(" ON CONFLICT ({key}) DO NOTHING"),
        None => String::new(),
    };
    format!("INSERT INTO {} ({}) VALUES ({marks}){conflict}", t.name, cols.join(", "))
}

impl Backend for Lite {
    fn write(&mut self, batch: &Batch) -> crate::error::Result<()> {
        let tx = self.conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate).map_err(db_cause)?;
        for (table, rows) in schema::TABLES.iter().zip(&batch.rows) {
            if rows.is_empty() {
                continue;
            }
            let mut stmt = tx.prepare_cached(&insert_sql(table)).map_err(db_cause)?;
            for row in rows {
                stmt.execute(rusqlite::params_from_iter(row.iter()))
                    .map_err(|e| db_cause(e).context(format!("inserting into {}", table.name)))?;
            }
        }
        if !batch.ends.is_empty() {
            let mut stmt = tx.prepare_cached(schema::SCAN_END).map_err(db_cause)?;
            for row in &batch.ends {
                stmt.execute(rusqlite::params_from_iter(row.iter()))
                    .map_err(|e| db_cause(e).context("updating scans"))?;
            }
        }
        tx.commit().map_err(|e| db_cause(e).context("commit"))
    }

    fn query(&mut self, sql: &str, params: &[&str]) -> crate::error::Result<Vec<Vec<Cell>>> {
        let mut stmt = self.conn.prepare_cached(sql).map_err(db_cause)?;
        let n = stmt.column_count();
        let mut rows = stmt.query(rusqlite::params_from_iter(params.iter())).map_err(db_cause)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(db_cause)? {
            let mut cells = Vec::with_capacity(n);
            for i in 0..n {
                cells.push(match row.get_ref(i).map_err(db_cause)? {
                    ValueRef::Null => Cell::Null,
                    ValueRef::Integer(n) => Cell::Int(n),
                    ValueRef::Real(x) => Cell::Real(x),
                    ValueRef::Text(t) | ValueRef::Blob(t) => Cell::Text(String::from_utf8_lossy(t).into_owned()),
                });
            }
            out.push(cells);
        }
        Ok(out)
    }
}
