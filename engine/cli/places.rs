//! The environment the moonscan command reads, as the library's
//! [`Places`]: the library itself reads no environment variable.
//!
//! In: the process environment and the user's password entry. Out: a
//! [`Places`]. What always holds: the search orders are the command's
//! documented ones: `$MOONSCAN_PLUGINS` and `$MOONSCAN_PROBES` replace the
//! built-in folders; the built-in files go under `$XDG_CACHE_HOME/moonscan`,
//! else `$HOME/.cache/moonscan`, else the temporary folder; the data folder
//! is `$MOONSCAN_HOME`, else `$XDG_DATA_HOME/moonscan`, else
//! `~/.local/share/moonscan` (the home folder being `$HOME` or, without it,
//! the password entry's; never the current folder); nmap's files are looked
//! for in `$NMAPDIR` first; PostgreSQL passwords come from `$PGPASSWORD`,
//! else `$PGPASSFILE`, else `~/.pgpass`. Empty and relative values are
//! treated as each of those always was.

use std::ffi::OsString;
use std::path::PathBuf;

use moonscan::places::{DataDir, PgPasswords, Places, NMAP_DIRS};

/// The places the environment names.
pub fn from_env() -> Places {
    let var = |k: &str| std::env::var_os(k);
    let nonempty = |v: OsString| (!v.is_empty()).then_some(v);
    let absolute = |v: OsString| Some(PathBuf::from(v)).filter(|p| p.is_absolute());
    let cache_home = match var("XDG_CACHE_HOME").and_then(absolute) {
        Some(x) => Some(x),
        None => var("HOME").and_then(absolute).map(|h| h.join(".cache")),
    };
    let nmap = var("NMAPDIR").map(PathBuf::from).into_iter().chain(NMAP_DIRS.map(PathBuf::from)).collect();
    Places {
        plugins: var("MOONSCAN_PLUGINS").map(PathBuf::from),
        probes: var("MOONSCAN_PROBES").map(PathBuf::from),
        cache_home,
        temp: std::env::temp_dir(),
        data: data_dir(),
        nmap,
        pg: PgPasswords {
            password: std::env::var("PGPASSWORD").ok().filter(|p| !p.is_empty()),
            file: var("PGPASSFILE")
                .and_then(nonempty)
                .map(PathBuf::from)
                .or_else(|| var("HOME").and_then(nonempty).map(|h| PathBuf::from(h).join(".pgpass"))),
        },
    }
}

/// moonscan's data folder: `$MOONSCAN_HOME` if set, else
/// `$XDG_DATA_HOME/moonscan`, else `~/.local/share/moonscan`; or why there
/// is none.
fn data_dir() -> DataDir {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    if let Some(h) = var("MOONSCAN_HOME") {
        DataDir::At(PathBuf::from(h))
    } else if let Some(x) = var("XDG_DATA_HOME").filter(|x| std::path::Path::new(x).is_absolute()) {
        DataDir::At(PathBuf::from(x).join("moonscan"))
    } else {
        match std::env::home_dir().filter(|h| h.is_absolute()) {
            Some(h) => DataDir::At(h.join(".local/share/moonscan")),
            None => DataDir::Missing(
                "no data folder: HOME is not set and this user has no home folder in the password database; \
                         set MOONSCAN_HOME to a folder only you can write"
                    .into(),
            ),
        }
    }
}
