//! A loaded plugin: what its table declares ([`Meta`], held once), where it
//! came from and how far it is trusted, the libraries its `require`
//! searches, and its code, compiled at most once.
//!
//! In: a checked [`Meta`] and the verified text of a plugin file, held as
//! `Code` (made by the loaders of [`super`]). Out: a [`Plugin`] the
//! selection picks from and the sandbox runs. What always holds: the code
//! is the text that was checked, compiled by the host (never bytecode from
//! a file); its metadata is read from the [`Meta`] alone, never from a
//! second copy.

use std::path::PathBuf;
use std::sync::Arc;

use super::code::Code;
use super::library::Libraries;
use super::meta::Meta;

/// A loaded, checked plugin.
#[derive(Clone, Debug)]
pub struct Plugin {
    /// What its table declared (or its metadata cache entry said it did):
    /// id, description, categories, ports, services, portrule, the
    /// `--script-args` keys it reads, its finding metadata, its scope and
    /// the keys of its result that change from run to run.
    pub meta: Meta,
    pub path: PathBuf,
    /// The pack it came from (`core` for plugins/), None for a file named on the command line.
    pub pack: Option<String>,
    /// False for a plugin of an unsigned pack, or one signed by a key not
    /// trusted: it runs only when selected by name, never by a category,
    /// a glob or `all`.
    pub trusted: bool,
    /// Where its `require` finds modules: its pack's library, then the core one.
    pub libs: Libraries,
    /// Selected by its id, `pack:id` or path (not by a category or glob):
    /// as in NSE, its runs see one more level of verbosity.
    pub named: bool,
    /// The file's text and, once a VM first needs it, its Luau bytecode.
    pub(crate) code: Arc<Code>,
}

impl Plugin {
    /// A plugin of no pack, trusted, not named, from its checked metadata
    /// and code.
    pub(crate) fn new(meta: Meta, path: PathBuf, libs: Libraries, code: Code) -> Plugin {
        Plugin { meta, path, pack: None, trusted: true, libs, named: false, code: Arc::new(code) }
    }

    /// Whether the plugin runs on this port by its `ports` and `services`
    /// alone (a portrule may still take it: [`crate::plugins::Vm::wants`]).
    pub fn listed_for(&self, info: &crate::findings::Service) -> bool {
        self.meta.ports.contains(&info.port)
            || info.known_service().is_some_and(|s| self.meta.services.iter().any(|x| x == s))
    }

    /// Whether the plugin may run on this port: listed for it, or a
    /// portrule decides (no VM is needed to know a plugin never runs).
    pub fn may_run_on(&self, info: &crate::findings::Service) -> bool {
        self.meta.portrule || self.listed_for(info)
    }

    /// The name events carry: `pack:id` for a plugin of an installed pack,
    /// the bare id for core plugins and files given by path.
    pub fn name(&self) -> String {
        match self.pack.as_deref() {
            Some(p) if p != "core" => format!("{p}:{}", self.meta.id),
            _ => self.meta.id.clone(),
        }
    }

    /// Marks the plugin as coming from `pack`.
    pub fn in_pack(mut self, pack: &str, trusted: bool) -> Plugin {
        self.pack = Some(pack.to_string());
        self.trusted = trusted;
        self
    }

    /// Every name a `--script` term may use: the id and `pack:id`.
    pub(crate) fn names(&self) -> Vec<String> {
        let mut v = vec![self.meta.id.clone()];
        if let Some(p) = &self.pack {
            v.push(format!("{p}:{}", self.meta.id));
        }
        v
    }
}
