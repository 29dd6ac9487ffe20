//! Plugins: Lua files that look at each open port and report findings.
//!
//! In: plugin files (plugins/*.lua, or paths named by `--script`), the
//! selection expression, and open ports with what service detection found.
//! Out: `finding`, `log` and `error` events. What always holds: a plugin is
//! text compiled by the host (never bytecode from a file), checked once when
//! loaded (a missing or mistyped field refuses the file, naming the field),
//! and every run is sandboxed and budgeted ([`host`]); its sockets reach only
//! the scanned host on the scan's ports ([`net`]).
//!
//! A plugin file returns a table:
//!
//! ```lua
//! return {
//!   id = "http-title",
//!   description = "Shows the title of a web server's default page.",
//!   categories = { "default", "discovery", "safe" },
//!   ports = { 80, 443 },          -- run on these ports,
//!   services = { "http" },        -- or on these detected services,
//!   portrule = function(port) return port.number == 8080 end, -- or when this says so
//!   run = function(ctx) ... end,
//! }
//! ```

pub mod host;
pub mod net;
pub mod select;
pub mod ssh;
pub mod stage;
pub mod value;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, ErrorKind, Result};

pub use host::{Budgets, PortInfo, RunOutput, Vm};
pub use select::Selection;

/// Largest plugin file read.
pub const MAX_FILE: u64 = 256 * 1024;

/// A loaded, checked plugin.
#[derive(Clone, Debug)]
pub struct Plugin {
    pub id: String,
    pub description: String,
    pub categories: Vec<String>,
    pub ports: Vec<u16>,
    pub services: Vec<String>,
    /// The plugin decides in code whether it runs on a port.
    pub portrule: bool,
    pub path: PathBuf,
    /// Luau bytecode the host compiled from the file's text.
    pub(crate) bytecode: Arc<[u8]>,
}

fn bad(path: &Path, what: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::Config, format!("{}: {what}", path.display()))
}

/// Reads, compiles and checks one plugin file.
pub fn load_file(path: &Path) -> Result<Plugin> {
    let len = std::fs::metadata(path).map_err(|e| bad(path, e))?.len();
    if len > MAX_FILE {
        return Err(bad(path, format!("larger than {MAX_FILE} bytes")));
    }
    let bytes = std::fs::read(path).map_err(|e| bad(path, e))?;
    load_source(&bytes, path)
}

/// Compiles and checks plugin source (`path` names it in errors).
pub fn load_source(bytes: &[u8], path: &Path) -> Result<Plugin> {
    // Text only: Lua and Luau bytecode start with a control byte, and no
    // file's bytes are ever handed to the VM as a binary chunk.
    if bytes.first().is_some_and(|&b| b < 0x09 || b == 0x1b) || std::str::from_utf8(bytes).is_err() {
        return Err(bad(path, "not a text file (precompiled chunks are refused)"));
    }
    let bytecode = mlua::Compiler::new().compile(bytes).map_err(|e| bad(path, syntax(&e)))?;
    let meta = host::inspect(&bytecode, path).map_err(|e| bad(path, e))?;
    Ok(Plugin {
        id: meta.id,
        description: meta.description,
        categories: meta.categories,
        ports: meta.ports,
        services: meta.services,
        portrule: meta.portrule,
        path: path.to_path_buf(),
        bytecode: bytecode.into(),
    })
}

fn syntax(e: &mlua::Error) -> String {
    match e {
        mlua::Error::SyntaxError { message, .. } => format!("syntax error: {message}"),
        other => format!("does not compile: {other}"),
    }
}

/// Loads every `*.lua` file of a folder (not its subfolders), in name order.
pub fn load_dir(dir: &Path) -> Result<Vec<Plugin>> {
    let entries = std::fs::read_dir(dir).map_err(|e| bad(dir, e))?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "lua") && p.is_file())
        .collect();
    files.sort();
    let mut out: Vec<Plugin> = Vec::new();
    for f in files {
        add_unique(&mut out, load_file(&f)?)?;
    }
    Ok(out)
}

/// Adds a plugin; an id already present is an error naming both files.
pub fn add_unique(list: &mut Vec<Plugin>, p: Plugin) -> Result<()> {
    if let Some(q) = list.iter().find(|q| q.id == p.id) {
        if q.path == p.path {
            return Ok(());
        }
        return Err(Error::new(
            ErrorKind::Config,
            format!("two plugins have the id {}: {} and {}", p.id, q.path.display(), p.path.display()),
        ));
    }
    list.push(p);
    Ok(())
}

/// The plugins an expression selects: every plugin loaded from a path it
/// names, and those of `available` its terms select. A term that matches
/// nothing is an error, as in nmap.
pub fn select(available: &[Plugin], expr: &str) -> Result<Vec<Plugin>> {
    let sel = Selection::parse(expr)?;
    let mut chosen: Vec<Plugin> = Vec::new();
    let mut from_paths: Vec<Plugin> = Vec::new();
    for path in sel.paths() {
        if path.is_dir() {
            for p in load_dir(path)? {
                add_unique(&mut from_paths, p)?;
            }
        } else if path.is_file() {
            add_unique(&mut from_paths, load_file(path)?)?;
        } else {
            return Err(Error::new(ErrorKind::Config, format!("--script: {} is not a file or folder", path.display())));
        }
    }
    let mut everything: Vec<Plugin> = available.to_vec();
    for p in &from_paths {
        add_unique(&mut everything, p.clone())?;
    }
    let named: Vec<(&str, &[String])> = everything.iter().map(|p| (p.id.as_str(), p.categories.as_slice())).collect();
    if let Some(term) = sel.unmatched(&named).first() {
        return Err(Error::new(
            ErrorKind::Config,
            format!("--script: '{term}' did not match a category, plugin id or path"),
        ));
    }
    for p in from_paths {
        add_unique(&mut chosen, p)?;
    }
    for p in available {
        if sel.selects(&p.id, &p.categories) {
            add_unique(&mut chosen, p.clone())?;
        }
    }
    Ok(chosen)
}

#[cfg(test)]
mod tests;
