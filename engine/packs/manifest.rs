//! pack.yaml: what a pack holds, pinned by sha256.
//!
//! The text is checked before any YAML parser sees it ([`check_shape`]):
//! at most [`MAX_MANIFEST`] bytes, UTF-8, nesting at most [`MAX_INDENT`]
//! columns of indentation and [`MAX_FLOW`] levels of `[`/`{`, and no
//! anchors, aliases or tags (a manifest needs none, and refusing them makes a
//! billion-laughs document an error instead of an expansion). Then serde
//! parses it with unknown fields denied, and [`Manifest::validate`] checks
//! every value.

use serde::{Deserialize, Serialize};

use crate::error::{Error, ErrorKind, Result};

/// Largest pack.yaml read.
pub const MAX_MANIFEST: usize = 64 * 1024;
/// Deepest indentation (in columns, `- ` indicators included) a line of pack.yaml may have.
pub const MAX_INDENT: usize = 64;
/// Deepest nesting of flow collections (`[`, `{`) in pack.yaml.
pub const MAX_FLOW: usize = 16;
/// Most files (plugins and probes together) a manifest may list.
pub const MAX_ENTRIES: usize = 1000;

/// The parsed pack.yaml.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub name: String,
    pub version: String,
    /// A semver requirement the engine's version must meet, e.g. ">=0.1".
    pub engine: String,
    pub description: String,
    pub authors: Vec<String>,
    pub license: String,
    #[serde(default)]
    pub plugins: Vec<FileEntry>,
    /// Lua modules the pack's plugins `require` (`lib/NAME.lua`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lib: Vec<FileEntry>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probes: Vec<FileEntry>,
}

/// One file a manifest lists.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct FileEntry {
    /// Relative path inside the pack, `/`-separated.
    pub file: String,
    /// Lowercase hex sha256 of the file's bytes (may be empty before `pack sign --update-hashes`).
    #[serde(default)]
    pub sha256: String,
}

/// What a listed file is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    Plugin,
    /// A library module (`lib/NAME.lua`).
    Lib,
    Probes,
}

fn refuse(what: &str, msg: impl std::fmt::Display) -> Error {
    super::refuse_as(ErrorKind::Config, format!("{what}: {msg}"))
}

/// Parses pack.yaml's bytes (`what` names the file in errors). The hashes
/// are checked for form only when `hashes_required`.
pub fn parse(bytes: &[u8], what: &str, hashes_required: bool) -> Result<Manifest> {
    let text = check_shape(bytes, what, MAX_MANIFEST)?;
    let m: Manifest = serde_yaml::from_str(text).map_err(|e| refuse(what, format!("not a valid manifest: {e}")))?;
    m.validate(what, hashes_required)?;
    Ok(m)
}

/// The size, encoding and shape checks done before any YAML parser runs.
pub fn check_shape<'a>(bytes: &'a [u8], what: &str, max: usize) -> Result<&'a str> {
    if bytes.len() > max {
        return Err(refuse(what, format!("{} bytes, larger than the {max}-byte limit", bytes.len())));
    }
    let text = std::str::from_utf8(bytes).map_err(|_| refuse(what, "not UTF-8 text"))?;
    if text.contains('\0') {
        return Err(refuse(what, "holds a NUL byte"));
    }
    scan_yaml(text).map_err(|(line, msg)| refuse(what, format!("line {line}: {msg}")))?;
    Ok(text)
}

/// A lexical pass over YAML text that finds how deep it nests and whether it
/// uses anchors, aliases or tags, without building anything.
fn scan_yaml(text: &str) -> std::result::Result<(), (usize, String)> {
    let mut scan = YamlScan::default();
    for (n, line) in text.split('\n').enumerate() {
        scan.line(n + 1, line.strip_suffix('\r').unwrap_or(line))?;
    }
    Ok(())
}

/// What [`scan_yaml`] carries from one line to the next.
#[derive(Default)]
struct YamlScan {
    /// Inside a quoted scalar that spans lines: the quote character.
    quote: Option<char>,
    /// Inside a block scalar (| or >): the indentation of the line that started it.
    block_parent: Option<usize>,
    /// How deep the flow collections ([ and {) are.
    flow: usize,
}

/// Where the pass goes after a character at a node's start.
enum NodeStep {
    /// On at this column.
    At(usize),
    /// To the next line.
    EndLine,
}

impl YamlScan {
    /// One line (`line_no` counts from 1).
    fn line(&mut self, line_no: usize, line: &str) -> std::result::Result<(), (usize, String)> {
        let chars: Vec<char> = line.chars().collect();
        let indent = chars.iter().take_while(|&&c| c == ' ').count();
        if let Some(parent) = self.block_parent {
            if chars.iter().all(|c| c.is_whitespace()) || indent > parent {
                return Ok(());
            }
            self.block_parent = None;
        }
        let mut node_start = true;
        let mut measured = false;
        let mut i = match self.quote {
            Some(q) => match close_quote(&chars, 0, q) {
                Some(end) => {
                    self.quote = None;
                    node_start = false;
                    measured = true;
                    end
                }
                None => return Ok(()),
            },
            None => indent,
        };
        while i < chars.len() {
            let c = chars[i];
            let next_blank = chars.get(i + 1).is_none_or(|n| n.is_whitespace());
            if c == ' ' || c == '\t' {
                i += 1;
                continue;
            }
            if node_start {
                match self.node_char(&chars, i, indent, line_no, &mut node_start, &mut measured)? {
                    NodeStep::At(next) => {
                        i = next;
                        continue;
                    }
                    NodeStep::EndLine => break,
                }
            }
            match c {
                ':' if next_blank
                    || (self.flow > 0 && chars.get(i + 1).is_some_and(|n| matches!(n, ',' | ']' | '}'))) =>
                {
                    node_start = true
                }
                ',' if self.flow > 0 => node_start = true,
                ']' | '}' if self.flow > 0 => self.flow -= 1,
                '#' if i > 0 && chars[i - 1].is_whitespace() => break,
                _ => {}
            }
            i += 1;
        }
        Ok(())
    }

    /// The character at column `i` where a node may start: an indicator, a
    /// comment, a quoted scalar, a flow collection's bracket, a block
    /// scalar, or the node's first character. The first such on a line
    /// measures its indentation.
    fn node_char(
        &mut self,
        chars: &[char],
        i: usize,
        indent: usize,
        line_no: usize,
        node_start: &mut bool,
        measured: &mut bool,
    ) -> std::result::Result<NodeStep, (usize, String)> {
        let c = chars[i];
        let next_blank = chars.get(i + 1).is_none_or(|n| n.is_whitespace());
        match c {
            '-' | '?' | ':' if next_blank => return Ok(NodeStep::At(i + 1)),
            '#' => return Ok(NodeStep::EndLine),
            _ => {}
        }
        if !*measured {
            *measured = true;
            if i > MAX_INDENT {
                return Err((
                    line_no,
                    format!("nested deeper than the limit ({i} columns of indentation, at most {MAX_INDENT})"),
                ));
            }
        }
        match c {
            '&' | '*' => Err((line_no, "YAML anchors and aliases (& and *) are not allowed".into())),
            '!' => Err((line_no, "YAML tags (!) are not allowed".into())),
            '\'' | '"' => match close_quote(chars, i + 1, c) {
                Some(end) => {
                    *node_start = false;
                    Ok(NodeStep::At(end))
                }
                None => {
                    self.quote = Some(c);
                    Ok(NodeStep::EndLine)
                }
            },
            '[' | '{' => {
                self.flow += 1;
                if self.flow > MAX_FLOW {
                    return Err((
                        line_no,
                        format!("nested deeper than the limit (more than {MAX_FLOW} levels of [ and {{)"),
                    ));
                }
                Ok(NodeStep::At(i + 1))
            }
            ']' | '}' if self.flow > 0 => {
                self.flow -= 1;
                *node_start = false;
                Ok(NodeStep::At(i + 1))
            }
            '|' | '>' if self.flow == 0 => {
                self.block_parent = Some(indent);
                Ok(NodeStep::EndLine)
            }
            '#' => Ok(NodeStep::EndLine),
            _ => {
                *node_start = false;
                Ok(NodeStep::At(i + 1))
            }
        }
    }
}

/// Where a quoted scalar that opened before `from` closes (the index after
/// its closing quote), if on this line.
fn close_quote(chars: &[char], from: usize, q: char) -> Option<usize> {
    let mut i = from;
    while i < chars.len() {
        let c = chars[i];
        if q == '"' && c == '\\' {
            i += 2;
            continue;
        }
        if c == q {
            if q == '\'' && chars.get(i + 1) == Some(&'\'') {
                i += 2;
                continue;
            }
            return Some(i + 1);
        }
        i += 1;
    }
    None
}

/// True for a valid pack name: `[a-z0-9][a-z0-9-]{0,63}`.
pub fn valid_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter().all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
}

/// Why a listed path is refused, if it is: it must be relative, `/`-separated,
/// without `.` or `..` components, hidden names or unusual characters.
pub fn check_rel_path(p: &str) -> crate::error::Result<()> {
    let bad = |m: String| super::refuse_as(ErrorKind::Integrity, m);
    if p.is_empty() {
        return Err(bad("empty path".into()));
    }
    if p.split(['/', '\\']).any(|c| c == "..") {
        return Err(bad(format!("path {p:?} contains '..'")));
    }
    if p.starts_with('/') || p.starts_with('\\') || p.as_bytes().get(1) == Some(&b':') {
        return Err(bad(format!("path {p:?} is absolute")));
    }
    if p.contains('\\') {
        return Err(bad(format!("path {p:?} contains a backslash (use /)")));
    }
    if p.len() > 1024 {
        return Err(bad(format!("path {p:?} is longer than 1024 bytes")));
    }
    let parts: Vec<&str> = p.split('/').collect();
    if parts.len() > 8 {
        return Err(bad(format!("path {p:?} is more than 8 folders deep")));
    }
    for c in parts {
        if c.is_empty() || c == "." {
            return Err(bad(format!("path {p:?} has an empty or '.' component")));
        }
        if c.starts_with('.') {
            return Err(bad(format!("path {p:?} names a hidden file or folder")));
        }
        if c.len() > 128 {
            return Err(bad(format!("path {p:?} has a name longer than 128 bytes")));
        }
        if !c.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'+')) {
            return Err(bad(format!("path {p:?} has characters other than letters, digits and . _ - +")));
        }
    }
    Ok(())
}

fn is_hex64(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl Manifest {
    /// The version, parsed (valid after [`Manifest::validate`]).
    pub fn semver(&self) -> semver::Version {
        semver::Version::parse(&self.version).unwrap_or_else(|_| semver::Version::new(0, 0, 0))
    }

    /// Every listed file with what it is, plugins first, then library
    /// modules, then probes, each in manifest order.
    pub fn entries(&self) -> impl Iterator<Item = (&FileEntry, FileKind)> {
        self.plugins
            .iter()
            .map(|e| (e, FileKind::Plugin))
            .chain(self.lib.iter().map(|e| (e, FileKind::Lib)))
            .chain(self.probes.iter().map(|e| (e, FileKind::Probes)))
    }

    /// The trusted comment a signature of this manifest carries.
    pub fn trusted_comment(&self) -> String {
        format!("pack:{} version:{}", self.name, self.version)
    }

    /// Checks every field; `what` names the file in errors.
    pub fn validate(&self, what: &str, hashes_required: bool) -> Result<()> {
        if !valid_name(&self.name) {
            return Err(refuse(
                what,
                format!("name {:?} must be 1-64 of a-z, 0-9 and -, starting with a letter or digit", self.name),
            ));
        }
        let version = semver::Version::parse(&self.version)
            .map_err(|e| refuse(what, format!("version {:?} is not a semantic version: {e}", self.version)))?;
        if version.to_string() != self.version {
            return Err(refuse(what, format!("version {:?} must be written as {version}", self.version)));
        }
        let req = semver::VersionReq::parse(&self.engine)
            .map_err(|e| refuse(what, format!("engine {:?} is not a semver requirement: {e}", self.engine)))?;
        let engine = engine_version();
        if !req.matches(&engine) {
            return Err(refuse(
                what,
                format!("pack {} needs engine {}, and this moonscan is {engine}", self.name, self.engine),
            ));
        }
        let text_field = |field: &str, v: &str, max: usize| -> Result<()> {
            if v.trim().is_empty() {
                return Err(refuse(what, format!("{field} is empty")));
            }
            if v.len() > max {
                return Err(refuse(what, format!("{field} is longer than {max} bytes")));
            }
            if v.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
                return Err(refuse(what, format!("{field} holds control characters")));
            }
            Ok(())
        };
        text_field("description", &self.description, 4096)?;
        text_field("license", &self.license, 256)?;
        if self.authors.is_empty() {
            return Err(refuse(what, "authors lists nobody"));
        }
        if self.authors.len() > 64 {
            return Err(refuse(what, "authors lists more than 64 names"));
        }
        for a in &self.authors {
            text_field("an author", a, 256)?;
        }
        if self.plugins.is_empty() && self.probes.is_empty() {
            return Err(refuse(what, "lists no plugins and no probes"));
        }
        if self.plugins.len() + self.lib.len() + self.probes.len() > MAX_ENTRIES {
            return Err(refuse(what, format!("lists more than {MAX_ENTRIES} files")));
        }
        let mut seen = std::collections::BTreeSet::new();
        for (e, kind) in self.entries() {
            check_rel_path(&e.file).map_err(|m| m.context(format!("{what}: file {}", e.file)))?;
            if matches!(e.file.as_str(), "pack.yaml" | "pack.sig") {
                return Err(refuse(what, format!("file {}: pack.yaml and pack.sig cannot be listed", e.file)));
            }
            let ext_ok = match kind {
                FileKind::Plugin => e.file.ends_with(".lua") && !e.file.starts_with("lib/"),
                FileKind::Lib => crate::plugins::load::library::module_name(&e.file).is_some(),
                FileKind::Probes => e.file.ends_with(".yaml") || e.file.ends_with(".yml"),
            };
            if !ext_ok {
                let need = match kind {
                    FileKind::Plugin => "a plugin must end in .lua, outside lib/",
                    FileKind::Lib => "a library module is lib/NAME.lua (NAME of letters, digits, _ and -)",
                    FileKind::Probes => "a probe file must end in .yaml",
                };
                return Err(refuse(what, format!("file {}: {need}", e.file)));
            }
            if !seen.insert(e.file.as_str()) {
                return Err(refuse(what, format!("file {} is listed twice", e.file)));
            }
            if hashes_required && !is_hex64(&e.sha256) {
                return Err(refuse(
                    what,
                    format!("file {}: sha256 {:?} is not 64 lowercase hex digits", e.file, e.sha256),
                ));
            }
        }
        Ok(())
    }
}

/// This engine's version (the crate's).
pub fn engine_version() -> semver::Version {
    semver::Version::parse(env!("CARGO_PKG_VERSION")).expect("the crate version is semver")
}
