//! Plugins: Lua files that look at each open port and report findings.
//!
//! In: plugin files (plugins/*.lua, or paths named by `--script`), the
//! selection expression, and open ports with what service detection found.
//! Out: `finding`, `log` and `error` events. What always holds: a plugin is
//! text compiled by the host (never bytecode from a file), checked once when
//! loaded (a missing or mistyped field refuses the file, naming the field),
//! and every run is sandboxed ([`sandbox::host`]) and budgeted
//! (`sandbox::run`); its sockets reach only the scanned host on the scan's
//! ports ([`sandbox::guard`]).
//!
//! Two folders, by role: [`load`] reads, checks and selects plugins before
//! the scan runs any (files, metadata, libraries, `--script` expressions,
//! `--script-args` keys); [`sandbox`] is the Luau VM they run in and the
//! host API they run against (`ctx`, its sockets, the guard, budgets,
//! record and replay). [`stage`] is the pipeline stage that joins them.
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

pub mod load;
pub mod sandbox;
pub mod stage;

pub use load::{
    add_unique, core_library, default_dir, libraries_for, load_dir, load_file, load_pack_dir, load_pack_dir_cached,
    load_source, load_source_cached, load_source_in, select, store_meta, Libraries, Library, Plugin, Selection,
    MAX_FILE,
};
pub use sandbox::host::Vm;
pub use sandbox::run::{Budgets, Finding, OutputAllowance, RunError, RunOutput};
