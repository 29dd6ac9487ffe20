//! Lua modules that plugins `require`: a pack's `lib/*.lua` and the core
//! library (plugins/lib/*.lua), each file pinned by its sha256 in its
//! pack.yaml (`lib:`) and compiled from the bytes that were checked.
//!
//! In: the verified bytes of each module file. Out: [`Libraries`], where a
//! plugin's `require "name"` looks (its own pack's library, then the core
//! one). What always holds: a module is found by name only (`lib/NAME.lua`;
//! no path, no file system); a `require` of a name no library holds, or a
//! cycle of modules requiring each other, is an error naming the file when
//! the plugin or pack is loaded (names given as literal strings; others
//! fail the same way when the code runs); a module's code runs in the
//! sandbox and budgets of the run that requires it, once per run (each
//! run has instances of its own: see `host.rs`).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::code::Code;
use crate::error::{Error, ErrorKind, Result};

/// Largest module file.
pub const MAX_MODULE: u64 = super::MAX_FILE;
/// Most modules one library holds.
pub const MAX_MODULES: usize = 256;

/// One module: the file it came from and its code.
#[derive(Debug)]
pub struct Module {
    /// Its path as errors name it (`lib/ftp.lua`, or the pack's path of it).
    pub file: String,
    pub(crate) code: Arc<Code>,
    /// The names its text requires with a literal string.
    requires: Vec<String>,
    /// The sha256 of its text.
    sha256: [u8; 32],
}

/// The modules of one pack (or of the core), by name.
#[derive(Debug, Default)]
pub struct Library {
    /// `core`, or the pack's name.
    pub origin: String,
    modules: BTreeMap<String, Module>,
}

/// The module name of a library file: `lib/NAME.lua`, NAME made of
/// letters, digits, `_` and `-`.
pub fn module_name(rel: &str) -> Option<&str> {
    let name = rel.strip_prefix("lib/")?.strip_suffix(".lua")?;
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    ok.then_some(name)
}

impl Library {
    pub fn new(origin: &str) -> Library {
        Library { origin: origin.to_string(), modules: BTreeMap::new() }
    }

    /// Adds the module in `rel` (`lib/NAME.lua`) from its checked bytes.
    pub fn add(&mut self, rel: &str, file: &str, bytes: &[u8]) -> Result<()> {
        let bad = |m: String| Error::new(ErrorKind::Config, format!("{file}: {m}"));
        let name = module_name(rel)
            .ok_or_else(|| bad("a library module is lib/NAME.lua, NAME of letters, digits, _ and -".into()))?;
        if bytes.first().is_some_and(|&b| b < 0x09 || b == 0x1b) || std::str::from_utf8(bytes).is_err() {
            return Err(bad("not a text file (precompiled chunks are refused)".into()));
        }
        if self.modules.len() >= MAX_MODULES {
            return Err(bad(format!("a library holds at most {MAX_MODULES} modules")));
        }
        let requires = literal_requires(bytes);
        let sha256 = <sha2::Sha256 as sha2::Digest>::digest(bytes).into();
        let module = Module { file: file.to_string(), code: Arc::new(Code::new(bytes)), requires, sha256 };
        if self.modules.insert(name.to_string(), module).is_some() {
            return Err(bad(format!("module {name} is listed twice")));
        }
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.modules.is_empty()
    }
}

/// Where a plugin's `require` looks, in order: its pack's library, then
/// the core library.
#[derive(Clone, Debug, Default)]
pub struct Libraries(pub Vec<Arc<Library>>);

impl Libraries {
    /// The module `name`: the index of the library holding it, and the module.
    pub fn find(&self, name: &str) -> Option<(usize, &Module)> {
        self.0.iter().enumerate().find_map(|(i, l)| l.modules.get(name).map(|m| (i, m)))
    }

    /// Where a module of library `i` looks for what it requires: its own
    /// library and those after it (a core module never sees a pack's).
    pub fn from(&self, i: usize) -> Libraries {
        Libraries(self.0.get(i..).unwrap_or_default().to_vec())
    }

    /// A digest of every module (origin, name and text): what a plugin's
    /// cached metadata also depends on, since its top level may read a module.
    pub fn fingerprint(&self) -> [u8; 32] {
        use sha2::Digest;
        let mut h = sha2::Sha256::new();
        for l in &self.0 {
            for (name, m) in &l.modules {
                h.update(l.origin.as_bytes());
                h.update([0]);
                h.update(name.as_bytes());
                h.update([0]);
                h.update(m.sha256);
            }
        }
        h.finalize().into()
    }

    /// With `core` searched after what is already there.
    pub fn then(&self, core: &Arc<Library>) -> Libraries {
        let mut v = self.0.clone();
        if !v.iter().any(|l| Arc::ptr_eq(l, core)) {
            v.push(core.clone());
        }
        Libraries(v)
    }

    /// Checks what `source` (the text of `file`) requires by literal name:
    /// every name is a module here, and no module leads back to itself.
    pub fn check(&self, source: &[u8], file: &str) -> Result<()> {
        let mut done = std::collections::HashSet::new();
        for name in literal_requires(source) {
            self.walk(0, &name, file, &mut vec![file.to_string()], &mut done)?;
        }
        Ok(())
    }

    /// Every module of every library resolves (each from its own library
    /// on) and none is in a cycle.
    pub fn check_modules(&self) -> Result<()> {
        let mut done = std::collections::HashSet::new();
        for (i, lib) in self.0.iter().enumerate() {
            for m in lib.modules.values() {
                for name in &m.requires {
                    self.walk(i, name, &m.file, &mut vec![format!("{}:{}", lib.origin, m.file)], &mut done)?;
                }
            }
        }
        Ok(())
    }

    /// Resolves `name` from library `start` on, then what it requires in
    /// turn; `done` holds the modules (library, name) already found whole,
    /// so each is walked once (linear in the modules, not in the paths).
    fn walk(
        &self,
        start: usize,
        name: &str,
        from: &str,
        path: &mut Vec<String>,
        done: &mut std::collections::HashSet<(usize, String)>,
    ) -> Result<()> {
        let scope = self.from(start);
        let Some((at, m)) = scope.find(name) else {
            let where_ = scope.0.iter().map(|l| format!("{} (lib/)", l.origin)).collect::<Vec<_>>();
            let looked = if where_.is_empty() { "no library".to_string() } else { where_.join(", ") };
            return Err(Error::new(
                ErrorKind::Config,
                format!("{from}: require \"{name}\": no module lib/{name}.lua in {looked}"),
            ));
        };
        let at = start + at;
        let label = format!("{}:{}", self.0[at].origin, m.file);
        if done.contains(&(at, name.to_string())) {
            return Ok(());
        }
        if path.contains(&label) {
            path.push(label);
            return Err(Error::new(ErrorKind::Config, format!("require cycle: {}", path.join(" -> "))));
        }
        if path.len() > 64 {
            return Err(Error::new(ErrorKind::Config, format!("{from}: modules nest more than 64 deep")));
        }
        path.push(label);
        for next in &m.requires {
            self.walk(at, next, &m.file, path, done)?;
        }
        path.pop();
        done.insert((at, name.to_string()));
        Ok(())
    }
}

/// The names `require` is called with as literal strings in `source`
/// (`require "x"`, `require("x")`, `require 'x'`), outside comments and
/// string literals (a small Lua lexer: short and long strings, line and
/// long comments).
fn literal_requires(source: &[u8]) -> Vec<String> {
    let s = source;
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    // `[`, then `=`s, then `[`: a long bracket's level, or None.
    let long_open = |at: usize| -> Option<usize> {
        if s.get(at) != Some(&b'[') {
            return None;
        }
        let mut j = at + 1;
        while s.get(j) == Some(&b'=') {
            j += 1;
        }
        (s.get(j) == Some(&b'[')).then_some(j - at - 1)
    };
    // Past the long bracket of `level` closing after `from`.
    let long_close = |from: usize, level: usize| -> usize {
        let close: Vec<u8> = std::iter::once(b']').chain(std::iter::repeat_n(b'=', level)).chain([b']']).collect();
        s[from..].windows(close.len()).position(|w| w == close.as_slice()).map_or(s.len(), |p| from + p + close.len())
    };
    // Past the short string opened by the quote at `at`, and its text (a
    // `\` escapes the next byte, a newline too; `\z` skips white space).
    let short_string = |at: usize| -> (usize, Option<&[u8]>) {
        let q = s[at];
        let mut j = at + 1;
        while j < s.len() && s[j] != q && s[j] != b'\n' {
            if s[j] == b'\\' && s.get(j + 1) == Some(&b'z') {
                j += 2;
                while j < s.len() && s[j].is_ascii_whitespace() {
                    j += 1;
                }
            } else {
                j += if s[j] == b'\\' { 2 } else { 1 };
            }
        }
        if j < s.len() && s[j] == q {
            (j + 1, Some(&s[at + 1..j]))
        } else {
            (j, None)
        }
    };
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    while i < s.len() {
        let c = s[i];
        if c == b'-' && s.get(i + 1) == Some(&b'-') {
            match long_open(i + 2) {
                Some(level) => i = long_close(i + 2, level),
                None => i = s[i..].iter().position(|&b| b == b'\n').map_or(s.len(), |p| i + p),
            }
        } else if c == b'"' || c == b'\'' || c == b'`' {
            i = short_string(i).0;
        } else if let Some(level) = long_open(i) {
            i = long_close(i, level);
        } else if ident(c) {
            let start = i;
            while i < s.len() && ident(s[i]) {
                i += 1;
            }
            let dotted = start > 0 && (s[start - 1] == b'.' || s[start - 1] == b':');
            if &s[start..i] != b"require" || dotted {
                continue;
            }
            let mut j = i;
            while j < s.len() && s[j].is_ascii_whitespace() {
                j += 1;
            }
            if s.get(j) == Some(&b'(') {
                j += 1;
                while j < s.len() && s[j].is_ascii_whitespace() {
                    j += 1;
                }
            }
            if matches!(s.get(j), Some(b'"' | b'\'')) {
                let (end, text) = short_string(j);
                if let Some(name) = text.and_then(|t| std::str::from_utf8(t).ok()) {
                    if !name.is_empty() && !out.iter().any(|n| n == name) {
                        out.push(name.to_string());
                    }
                }
                i = end;
            }
        } else {
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lib(origin: &str, files: &[(&str, &str)]) -> Arc<Library> {
        let mut l = Library::new(origin);
        for (rel, text) in files {
            l.add(rel, &format!("{origin}/{rel}"), text.as_bytes()).unwrap();
        }
        Arc::new(l)
    }

    #[test]
    fn literal_requires_are_found_in_each_spelling() {
        let src = br#"local a = require "ftp" local b = require('smtp') local c = require 'x-y'
                      local d = myrequire("no") local e = require(name) local f = m.require("no")
                      -- require "in-a-comment"
                      --[==[ require "in-a-long-comment" ]==]
                      local g = "require 'in-a-string'" local h = [[require "in-a-long-string"]]
                      local i = { "require", "package" } local j = require "last"
                      local k = "a\z
                          require 'not-code' b" local l = `require "tick"` local m = require "end""#;
        assert_eq!(literal_requires(src), ["ftp", "smtp", "x-y", "last", "end"]);
    }

    #[test]
    fn missing_modules_and_cycles_are_errors_naming_the_files() {
        let core = lib("core", &[("lib/reply.lua", "return {}"), ("lib/a.lua", "local b = require 'b' return {}")]);
        let pack = lib("mypack", &[("lib/b.lua", "local a = require 'a' return {}"), ("lib/c.lua", "return {}")]);
        let libs = Libraries(vec![pack.clone()]).then(&core);
        assert!(libs.check(b"local r = require 'reply' local c = require 'c'", "p.lua").is_ok());
        let e = libs.check(b"local n = require 'nope'", "plugins/p.lua").unwrap_err().to_string();
        assert!(
            e.contains("plugins/p.lua: require \"nope\": no module lib/nope.lua in mypack (lib/), core (lib/)"),
            "{e}"
        );
        let e = libs.check_modules().unwrap_err().to_string();
        // A core module never sees a pack's: core's a cannot require the pack's b.
        assert!(e.contains("core/lib/a.lua: require \"b\": no module lib/b.lua in core (lib/)"), "{e}");
        let pack =
            lib("mypack", &[("lib/b.lua", "local c = require 'c' return {}"), ("lib/c.lua", "local b = require 'b'")]);
        let e = Libraries(vec![pack]).then(&core).check_modules().unwrap_err().to_string();
        let cycle = "mypack:mypack/lib/b.lua -> mypack:mypack/lib/c.lua -> mypack:mypack/lib/b.lua";
        assert!(e.contains("require cycle:") && e.contains(cycle), "{e}");
        // The pack's own module comes first.
        let shadow = lib("p2", &[("lib/reply.lua", "return 1")]);
        let libs = Libraries(vec![shadow]).then(&core);
        assert_eq!(libs.find("reply").unwrap().0, 0);
        // Diamonds of requires are walked once each, not once per path.
        let mut many = Library::new("deep");
        for n in 0..60 {
            let text = format!("local a = require 'm{}' local b = require 'm{}' return {{}}", n + 1, n + 2);
            many.add(&format!("lib/m{n}.lua"), &format!("lib/m{n}.lua"), text.as_bytes()).unwrap();
        }
        for n in 60..62 {
            many.add(&format!("lib/m{n}.lua"), &format!("lib/m{n}.lua"), b"return {}").unwrap();
        }
        let t = std::time::Instant::now();
        Libraries(vec![Arc::new(many)]).check_modules().unwrap();
        assert!(t.elapsed() < std::time::Duration::from_secs(1), "{:?}", t.elapsed());
    }

    #[test]
    fn a_library_holds_at_most_so_many_modules_nested_so_deep() {
        let mut l = Library::new("core");
        for n in 0..MAX_MODULES {
            l.add(&format!("lib/m{n}.lua"), &format!("lib/m{n}.lua"), b"return {}").unwrap();
        }
        let e = l.add("lib/one-more.lua", "lib/one-more.lua", b"return {}").unwrap_err().to_string();
        assert!(e.contains("at most 256 modules"), "{e}");
        // A chain of 70 modules, each requiring the next: deeper than 64.
        let mut chain = Library::new("core");
        for n in 0..70 {
            let text = if n < 69 { format!("return require 'c{}'", n + 1) } else { "return {}".to_string() };
            chain.add(&format!("lib/c{n}.lua"), &format!("lib/c{n}.lua"), text.as_bytes()).unwrap();
        }
        let e = Libraries(vec![Arc::new(chain)]).check(b"local c = require 'c0'", "p.lua").unwrap_err().to_string();
        assert!(e.contains("modules nest more than 64 deep"), "{e}");
    }

    #[test]
    fn module_files_are_lib_name_lua_text() {
        assert_eq!(module_name("lib/ftp.lua"), Some("ftp"));
        for bad in ["ftp.lua", "lib/sub/x.lua", "lib/.lua", "lib/a b.lua", "lib/x.txt"] {
            assert_eq!(module_name(bad), None, "{bad}");
        }
        let mut l = Library::new("core");
        let e = l.add("lib/x.lua", "lib/x.lua", b"\x1bLuaQ").unwrap_err().to_string();
        assert!(e.contains("precompiled"), "{e}");
    }
}
