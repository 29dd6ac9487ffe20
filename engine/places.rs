//! Where moonscan finds and keeps its files, as settings: the plugin and
//! probe folders, the user's cache (where the built-in files are written
//! out), the data folder (keys, packs, the plugin metadata cache), nmap's
//! data folders and the PostgreSQL password sources. The library reads no
//! environment: the moonscan command fills a [`Places`] from its
//! environment (engine/cli/places.rs), and a program embedding the engine
//! sets what it means.
//!
//! In: paths and values, however the caller found them. Out: the same, to
//! the code that reads those folders. What always holds: nothing here looks
//! at the environment or the file system; the defaults are the fixed
//! folders named below, and an unset folder is `None` (the code that needs
//! it says so, naming the setting).

use std::path::PathBuf;

/// The folders and files the library reads and writes besides those a
/// scan names.
#[derive(Clone, Debug)]
pub struct Places {
    /// The plugin folder, the pack `core` (`MOONSCAN_PLUGINS` for the
    /// command); `None`: the plugins built into moonscan.
    pub plugins: Option<PathBuf>,
    /// The probe folder (`MOONSCAN_PROBES` for the command); `None`: the
    /// probes built into moonscan.
    pub probes: Option<PathBuf>,
    /// The user's cache folder (`$XDG_CACHE_HOME`, else `$HOME/.cache`, for
    /// the command): the built-in files are written out in its `moonscan`
    /// folder. Used only when absolute.
    pub cache_home: Option<PathBuf>,
    /// The temporary folder: the built-in files go to its `moonscan-UID`
    /// folder when the cache cannot take them. Default /tmp.
    pub temp: PathBuf,
    /// The data folder: trusted keys, installed packs, the plugin metadata
    /// cache (the command's: `$MOONSCAN_HOME`, `$XDG_DATA_HOME/moonscan` or
    /// `~/.local/share/moonscan`).
    pub data: DataDir,
    /// nmap's data folders, searched in order (the command puts `$NMAPDIR`
    /// first). Default /usr/share/nmap, /usr/local/share/nmap.
    pub nmap: Vec<PathBuf>,
    /// Where a PostgreSQL password comes from when a store's URL has none.
    pub pg: PgPasswords,
}

/// Where the data folder is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum DataDir {
    /// None: a scan uses no installed pack and caches no plugin metadata;
    /// what needs the folder itself (installing a pack, trusting a key)
    /// fails saying none is set.
    #[default]
    None,
    /// This folder.
    At(PathBuf),
    /// One was looked for and there is none, for this reason: whatever
    /// needs the folder, a scan included, fails with it.
    Missing(String),
}

/// The password sources libpq reads when a URL has no password.
#[derive(Clone, Default)]
pub struct PgPasswords {
    /// The password itself (`$PGPASSWORD` for the command; empty is none).
    pub password: Option<String>,
    /// The password file (`$PGPASSFILE`, else `$HOME/.pgpass`, for the command).
    pub file: Option<PathBuf>,
}

/// Shows whether a password is set, never the password.
impl std::fmt::Debug for PgPasswords {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgPasswords")
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("file", &self.file)
            .finish()
    }
}

impl Default for Places {
    fn default() -> Places {
        Places {
            plugins: None,
            probes: None,
            cache_home: None,
            temp: PathBuf::from("/tmp"),
            data: DataDir::None,
            nmap: NMAP_DIRS.iter().map(PathBuf::from).collect(),
            pg: PgPasswords::default(),
        }
    }
}

/// Where nmap installs its data files.
pub const NMAP_DIRS: [&str; 2] = ["/usr/share/nmap", "/usr/local/share/nmap"];
