//! nmap's OS database (nmap-os-db, second generation) read into a form the
//! matcher walks quickly.
//!
//! In: the text of an nmap-os-db file (nmap 7.93's syntax): one
//! `MatchPoints` section (the points each test attribute is worth), then
//! `Fingerprint` entries, each with `Class` lines (each followed by its
//! `CPE` lines) and test lines such as `T1(R=Y%DF=N%T=3B-45|FA-104%...)`.
//! Out: an [`OsDb`]: its entries (name, the line of the `Fingerprint` line,
//! classes and CPEs) and, for each entry, its conditions: a (test,
//! attribute) slot of `MatchPoints` and a pre-parsed [`Expr`]. What always
//! holds: nothing in the text makes the parser panic; a malformed line is an
//! error naming its line number; every range is increasing, so matching
//! cannot fail (nmap 7.93 would stop on an assertion when matching).
//! Identical conditions are stored once. An attribute `MatchPoints` gives
//! no weight (nmap 7.93's own entries hold `OPS(R=N)`, which no host's
//! fingerprint has) is kept worth 0 points: nmap would stop with a fatal
//! error if a host's fingerprint had it too, this one counts it for
//! nothing.
//!
//! Expressions are judged exactly as nmap 7.93's `expr_match` does,
//! quirks included (see [`Expr`]); this is deliberate, so that a host gets
//! the matches and accuracies nmap 7.93 gives it with the same database.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::path::Path;

use crate::error::{Error, ErrorKind, Result};

/// The most bytes of an nmap-os-db file read (nmap 7.93's is about 5 MB).
pub const MAX_DB_BYTES: u64 = 64 << 20;

/// An OS class of an entry: a `Class vendor | family | generation | device
/// type` line with the `CPE` lines that follow it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Class {
    pub vendor: String,
    pub family: String,
    /// Absent when the generation field is empty (`Class 2N | embedded || specialized`).
    pub generation: Option<String>,
    pub device_type: String,
    /// The CPE names as nmap prints them: the first word of each `CPE` line
    /// (flags after it, such as `auto`, are dropped, as nmap drops them).
    pub cpe: Vec<String>,
}

/// One `Fingerprint` entry of the database.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The name after `Fingerprint`, trimmed (text from a `#` on is a comment, as for nmap).
    pub name: String,
    /// The line number (from 1) of its `Fingerprint` line.
    pub line: usize,
    pub classes: Vec<Class>,
    /// Its conditions: `conds[start..end]` of the database.
    conds: (u32, u32),
}

/// How one alternative of an expression judges a value that is a hex
/// number (nmap's `strtol(value, 16)` takes all of it, the empty value
/// included, which is 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Numeric {
    /// Compared as text, as a value that is not a number always is.
    Text,
    /// `<X`: below X.
    Less(u32),
    /// `>X`: above X.
    Greater(u32),
    /// `A-B`: from A to B, both included.
    Range(u32, u32),
    /// Matches no number: nmap 7.93 looks for a `-` in the rest of the
    /// whole expression, not in this alternative, so a plain alternative
    /// before a range (`1` in `1|5-7`), or one that does not parse as a
    /// range or comparison, never matches a number.
    Never,
}

/// One alternative of an expression (the text between `|`s).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Alt {
    /// The alternative as written.
    pub text: String,
    /// How it judges a value that is a number.
    pub numeric: Numeric,
    /// Whether it is the last alternative. A value compared as text must
    /// equal the last alternative, but need only *start with* any other
    /// one (nmap 7.93 compares those with `strncmp` over the
    /// alternative's length), so an empty alternative (`O=|M5B4`) matches
    /// any value that is compared as text.
    pub last: bool,
}

/// A pre-parsed attribute expression of an entry (`3B-45|FA-104`, `>0`,
/// `M5B4ST11NW7`, `S+`, or empty), judged as nmap 7.93's `expr_match`:
/// the value matches when one alternative does. A value that is a hex
/// number is judged by each alternative's [`Numeric`]; plain alternatives
/// are always compared as text (so `08` does not match `8`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expr {
    /// The expression as written.
    pub source: String,
    pub alts: Vec<Alt>,
}

/// A value of a subject fingerprint, with its number when nmap would read
/// it as one.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Value<'a> {
    text: &'a str,
    num: Option<u32>,
}

impl<'a> Value<'a> {
    pub(crate) fn new(text: &'a str) -> Value<'a> {
        // nmap holds values as C strings: a NUL ends them.
        let text = text.split('\0').next().unwrap_or("");
        let (n, used) = strtol16(text.as_bytes());
        Value { text, num: (used == text.len()).then_some(n) }
    }
}

impl Expr {
    /// Whether `value` (as a host's fingerprint holds it) matches.
    pub fn matches(&self, value: &str) -> bool {
        self.matches_value(&Value::new(value))
    }

    pub(crate) fn matches_value(&self, v: &Value<'_>) -> bool {
        self.alts.iter().any(|a| match (v.num, a.numeric) {
            (Some(n), Numeric::Less(x)) => n < x,
            (Some(n), Numeric::Greater(x)) => n > x,
            (Some(n), Numeric::Range(lo, hi)) => lo <= n && n <= hi,
            (Some(_), Numeric::Never) => false,
            _ if a.last => v.text == a.text,
            _ => v.text.starts_with(a.text.as_str()),
        })
    }

    /// Parses `source` as nmap 7.93 reads it at match time; an error is a
    /// decreasing or empty range, on which nmap would fail an assertion.
    fn parse(source: &str) -> std::result::Result<Expr, String> {
        let mut alts = Vec::new();
        let mut start = 0;
        loop {
            let end = source[start..].find('|').map_or(source.len(), |i| start + i);
            let last = end == source.len();
            let numeric = numeric_form(source, start, end);
            if let Numeric::Range(lo, hi) = numeric {
                if lo >= hi {
                    return Err(format!(
                        "the range {} in {source:?} does not increase (nmap would stop on it)",
                        &source[start..end]
                    ));
                }
            }
            alts.push(Alt { text: source[start..end].to_string(), numeric, last });
            if last {
                return Ok(Expr { source: source.to_string(), alts });
            }
            start = end + 1;
        }
    }
}

/// How the alternative `source[start..end]` judges a number, following
/// nmap 7.93's `expr_match` step by step.
fn numeric_form(source: &str, start: usize, end: usize) -> Numeric {
    let b = source.as_bytes();
    if b.get(start).is_some_and(|&c| c == b'<' || c == b'>') {
        let (n, used) = strtol16(&b[start + 1..]);
        if start + 1 + used != end {
            return Numeric::Never;
        }
        return if b[start] == b'<' { Numeric::Less(n) } else { Numeric::Greater(n) };
    }
    // nmap looks for the dash in the rest of the whole expression.
    let Some(dash) = source[start..].find('-').map(|i| start + i) else {
        return Numeric::Text;
    };
    let (lo, used) = strtol16(&b[start..]);
    if start + used != dash {
        return Numeric::Never;
    }
    let (hi, used) = strtol16(&b[dash + 1..]);
    if dash + 1 + used != end {
        return Numeric::Never;
    }
    Numeric::Range(lo, hi)
}

/// C's `strtol(s, &end, 16)` as glibc does it, cast to `unsigned int` as
/// nmap does: the value and how many bytes it took (0 when no digit).
fn strtol16(s: &[u8]) -> (u32, usize) {
    let mut i = s.iter().take_while(|c| matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')).count();
    let negative = s.get(i) == Some(&b'-');
    if matches!(s.get(i), Some(b'-' | b'+')) {
        i += 1;
    }
    if s.get(i) == Some(&b'0')
        && matches!(s.get(i + 1), Some(b'x' | b'X'))
        && s.get(i + 2).is_some_and(u8::is_ascii_hexdigit)
    {
        i += 2;
    }
    let digits = s[i.min(s.len())..].iter().take_while(|c| c.is_ascii_hexdigit()).count();
    if digits == 0 {
        return (0, 0);
    }
    let mut v: i64 = 0;
    let mut overflow = false;
    for &c in &s[i..i + digits] {
        let d = (c as char).to_digit(16).unwrap_or(0) as i64;
        match v.checked_mul(16).and_then(|x| x.checked_add(d)) {
            Some(x) => v = x,
            None => overflow = true,
        }
    }
    let v = match (overflow, negative) {
        (true, false) => i64::MAX,
        (true, true) => i64::MIN,
        (false, true) => -v,
        (false, false) => v,
    };
    (v as u32, i + digits)
}

/// A (test, attribute) with its weight: one of `MatchPoints`, or one only
/// entries use, worth nothing.
#[derive(Clone, Debug)]
struct Slot {
    test: u16,
    attr: String,
    weight: u32,
    /// Given in `MatchPoints`.
    weighted: bool,
}

/// A test: its name and its attributes' slots.
#[derive(Clone, Debug)]
struct TestDef {
    name: String,
    slots: Vec<u16>,
}

/// A condition as stored once: an attribute slot and an expression.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Cond {
    pub(crate) slot: u16,
    pub(crate) expr: u32,
}

/// One condition of an entry, as [`OsDb::conditions`] gives it.
#[derive(Clone, Copy, Debug)]
pub struct Condition<'a> {
    pub test: &'a str,
    pub attr: &'a str,
    /// The points it is worth (from `MatchPoints`).
    pub weight: u32,
    pub expr: &'a Expr,
}

/// A parsed nmap-os-db.
#[derive(Clone, Debug)]
pub struct OsDb {
    /// The tests of `MatchPoints`, in its order, then those only entries use.
    tests: Vec<TestDef>,
    slots: Vec<Slot>,
    exprs: Vec<Expr>,
    conds: Vec<Cond>,
    /// The conditions of every entry, entry after entry.
    entry_conds: Vec<u32>,
    entries: Vec<Entry>,
}

/// A small fast hash (FxHash's) for the parser's interning: keys are
/// short strings from the file, and SipHash would be most of the parse.
#[derive(Default)]
struct Fx(u64);

impl Hasher for Fx {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(w)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.write(&[i]);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<Fx>>;

fn line_error(line: usize, what: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::Config, format!("line {line}: {what}"))
}

/// `NAME(a=1%b=2)` split into its name and its attribute pairs.
fn split_test_line(line: &str, n: usize) -> Result<(&str, Vec<(&str, &str)>)> {
    let open =
        line.find('(').ok_or_else(|| line_error(n, format!("expected a test such as T1(R=Y%...), found {line:?}")))?;
    let close = line[open..].find(')').map(|i| open + i).ok_or_else(|| line_error(n, format!("no ')' in {line:?}")))?;
    if !line[close + 1..].trim().is_empty() {
        return Err(line_error(n, format!("text after ')' in {line:?}")));
    }
    let name = &line[..open];
    if name.is_empty() {
        return Err(line_error(n, format!("a test with no name in {line:?}")));
    }
    let body = &line[open + 1..close];
    let mut attrs = Vec::new();
    if !body.is_empty() {
        for pair in body.split('%') {
            let (a, v) = pair
                .split_once('=')
                .ok_or_else(|| line_error(n, format!("{name}: {pair:?} is not attribute=value")))?;
            attrs.push((a, v));
        }
    }
    Ok((name, attrs))
}

/// Whether `line` starts with `word` (ASCII case ignored) followed by
/// whitespace or its end.
fn keyword<'a>(line: &'a str, word: &str) -> Option<&'a str> {
    let head = line.get(..word.len())?;
    let rest = &line[word.len()..];
    (head.eq_ignore_ascii_case(word) && (rest.is_empty() || rest.starts_with(char::is_whitespace))).then_some(rest)
}

struct Parser<'t> {
    db: OsDb,
    expr_ids: FxMap<&'t str, u32>,
    cond_ids: FxMap<(u16, &'t str), u32>,
    /// Per slot and per test: the entry that last used it (duplicates).
    slot_seen: Vec<u32>,
    test_seen: Vec<u32>,
    match_points_line: Option<usize>,
}

impl<'t> Parser<'t> {
    fn match_points_line(&mut self, line: &'t str, n: usize) -> Result<()> {
        if line.starts_with("Class ") || line.starts_with("CPE ") {
            return Err(line_error(n, "Class and CPE lines belong to a Fingerprint, not to MatchPoints"));
        }
        let (name, attrs) = split_test_line(line, n)?;
        if self.db.test_index(name).is_some() {
            return Err(line_error(n, format!("test {name} is given twice in MatchPoints")));
        }
        let test = self.add_test(name, n)?;
        for (a, w) in attrs {
            if self.db.slot_in(test, a).is_some() {
                return Err(line_error(n, format!("{name}.{a} is given twice in MatchPoints")));
            }
            let weight = w
                .parse::<u32>()
                .ok()
                .filter(|&x| i32::try_from(x).is_ok())
                .ok_or_else(|| line_error(n, format!("{name}.{a}: {w:?} is not a number of points")))?;
            self.add_slot(test, a, weight, true, n)?;
        }
        Ok(())
    }

    fn add_test(&mut self, name: &str, n: usize) -> Result<usize> {
        if self.db.tests.len() >= u16::MAX as usize {
            return Err(line_error(n, "too many tests"));
        }
        self.db.tests.push(TestDef { name: name.to_string(), slots: Vec::new() });
        self.test_seen.push(u32::MAX);
        Ok(self.db.tests.len() - 1)
    }

    fn add_slot(&mut self, test: usize, attr: &str, weight: u32, weighted: bool, n: usize) -> Result<usize> {
        let slot = self.db.slots.len();
        let id = u16::try_from(slot).map_err(|_| line_error(n, "too many attributes"))?;
        self.db.slots.push(Slot { test: test as u16, attr: attr.to_string(), weight, weighted });
        self.db.tests[test].slots.push(id);
        self.slot_seen.push(u32::MAX);
        Ok(slot)
    }

    fn class_line(&mut self, rest: &str, n: usize) -> Result<()> {
        let parts: Vec<&str> = rest.splitn(4, '|').map(str::trim).collect();
        let [vendor, family, generation, device_type] = parts[..] else {
            return Err(line_error(
                n,
                format!("a Class line is vendor | family | generation | device type, not {rest:?}"),
            ));
        };
        let entry = self.db.entries.last_mut().ok_or_else(|| line_error(n, "a Class line outside a Fingerprint"))?;
        entry.classes.push(Class {
            vendor: vendor.to_string(),
            family: family.to_string(),
            generation: (!generation.is_empty()).then(|| generation.to_string()),
            device_type: device_type.to_string(),
            cpe: Vec::new(),
        });
        Ok(())
    }

    fn cpe_line(&mut self, rest: &str, n: usize) -> Result<()> {
        let cpe = rest.split_whitespace().next().ok_or_else(|| line_error(n, "a CPE line with no CPE name"))?;
        let class = self
            .db
            .entries
            .last_mut()
            .and_then(|e| e.classes.last_mut())
            .ok_or_else(|| line_error(n, "a CPE line before any Class line of its Fingerprint"))?;
        class.cpe.push(cpe.to_string());
        Ok(())
    }

    fn entry_test_line(&mut self, line: &'t str, n: usize) -> Result<()> {
        let (name, attrs) = split_test_line(line, n)?;
        let entry_no = self.db.entries.len() as u32;
        let test = match self.db.test_index(name) {
            Some(t) => t,
            None => self.add_test(name, n)?,
        };
        if std::mem::replace(&mut self.test_seen[test], entry_no) == entry_no {
            return Err(line_error(n, format!("test {name} is given twice in this Fingerprint")));
        }
        // Attributes mostly come in MatchPoints' order: look from the last one on.
        let mut hint = 0;
        for (a, v) in attrs {
            let slots = &self.db.tests[test].slots;
            let found = (0..slots.len())
                .map(|k| (hint + k) % slots.len())
                .find(|&i| self.db.slots[slots[i] as usize].attr == a)
                .map(|i| {
                    hint = i + 1;
                    slots[i] as usize
                });
            let slot = match found {
                Some(s) => s,
                None => self.add_slot(test, a, 0, false, n)?,
            };
            if std::mem::replace(&mut self.slot_seen[slot], entry_no) == entry_no {
                return Err(line_error(n, format!("{name}.{a} is given twice")));
            }
            let key = (slot as u16, v);
            let cond = match self.cond_ids.get(&key) {
                Some(&c) => c,
                None => {
                    let expr = match self.expr_ids.get(v) {
                        Some(&e) => e,
                        None => {
                            let parsed = Expr::parse(v).map_err(|e| line_error(n, format!("{name}.{a}: {e}")))?;
                            let id = self.db.exprs.len() as u32;
                            self.db.exprs.push(parsed);
                            self.expr_ids.insert(v, id);
                            id
                        }
                    };
                    let id = self.db.conds.len() as u32;
                    self.db.conds.push(Cond { slot: slot as u16, expr });
                    self.cond_ids.insert(key, id);
                    id
                }
            };
            self.db.entry_conds.push(cond);
        }
        Ok(())
    }

    fn close_entry(&mut self) {
        let end = self.db.entry_conds.len() as u32;
        if let Some(e) = self.db.entries.last_mut() {
            e.conds.1 = end;
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Top,
    MatchPoints,
    Entry,
}

impl OsDb {
    /// Parses the text of an nmap-os-db file. Errors name the line
    /// (counted from 1) and what is wrong with it. Stricter than nmap where nmap would
    /// only warn or fail later: a line outside an entry that is neither a
    /// comment nor a `Fingerprint`/`MatchPoints` line, a test or attribute
    /// given twice, and a decreasing range are errors; `MatchPoints` must
    /// come before the first entry.
    pub fn parse(text: &str) -> Result<OsDb> {
        let mut p = Parser {
            db: OsDb {
                tests: Vec::new(),
                slots: Vec::new(),
                exprs: Vec::new(),
                conds: Vec::new(),
                entry_conds: Vec::new(),
                entries: Vec::new(),
            },
            expr_ids: FxMap::default(),
            cond_ids: FxMap::default(),
            slot_seen: Vec::new(),
            test_seen: Vec::new(),
            match_points_line: None,
        };
        let mut state = State::Top;
        for (i, line) in text.lines().enumerate() {
            let n = i + 1;
            if line.starts_with('#') {
                continue;
            }
            if line.trim().is_empty() {
                state = State::Top;
                continue;
            }
            if line.contains('\0') {
                return Err(line_error(n, "a NUL byte"));
            }
            if let Some(rest) = keyword(line, "Fingerprint") {
                if p.match_points_line.is_none() {
                    return Err(line_error(n, "a Fingerprint before the MatchPoints section"));
                }
                p.close_entry();
                let name = rest.split('#').next().unwrap_or("").trim();
                if name.is_empty() {
                    return Err(line_error(n, "a Fingerprint line with no name"));
                }
                if p.db.entries.len() >= u32::MAX as usize - 1 {
                    return Err(line_error(n, "too many fingerprints"));
                }
                let start = p.db.entry_conds.len() as u32;
                p.db.entries.push(Entry {
                    name: name.to_string(),
                    line: n,
                    classes: Vec::new(),
                    conds: (start, start),
                });
                state = State::Entry;
                continue;
            }
            if let Some(rest) = keyword(line, "MatchPoints") {
                if let Some(first) = p.match_points_line {
                    return Err(line_error(n, format!("a second MatchPoints section (the first is on line {first})")));
                }
                if !p.db.entries.is_empty() {
                    return Err(line_error(n, "the MatchPoints section must come before the first Fingerprint"));
                }
                if !rest.trim().is_empty() {
                    return Err(line_error(n, format!("text after MatchPoints: {:?}", rest.trim())));
                }
                p.match_points_line = Some(n);
                state = State::MatchPoints;
                continue;
            }
            match state {
                State::Top => {
                    return Err(line_error(n, format!("expected a Fingerprint or MatchPoints line, found {line:?}")));
                }
                State::MatchPoints => p.match_points_line(line, n)?,
                State::Entry => {
                    if let Some(rest) = line.strip_prefix("Class ") {
                        p.class_line(rest, n)?;
                    } else if let Some(rest) = line.strip_prefix("CPE ") {
                        p.cpe_line(rest, n)?;
                    } else {
                        p.entry_test_line(line, n)?;
                    }
                }
            }
        }
        if p.match_points_line.is_none() {
            return Err(Error::new(ErrorKind::Config, "no MatchPoints section"));
        }
        p.close_entry();
        let mut db = p.db;
        db.exprs.shrink_to_fit();
        db.conds.shrink_to_fit();
        db.entry_conds.shrink_to_fit();
        db.entries.shrink_to_fit();
        Ok(db)
    }

    /// Reads and parses the database at `path`, or else nmap's own
    /// nmap-os-db (in one of nmap's folders `nmap_dirs`). A named file must
    /// exist and parse, and errors name it; without one, `Ok(None)` when
    /// nmap is not installed.
    pub fn load(path: Option<&Path>, nmap_dirs: &[std::path::PathBuf]) -> Result<Option<OsDb>> {
        match path {
            Some(path) => {
                let text = crate::files::read_text_capped(path, MAX_DB_BYTES, "nmap-os-db")?;
                OsDb::parse(&text).map(Some).map_err(|e| e.context(format_args!("nmap-os-db {}", path.display())))
            }
            None => match crate::files::nmap_data(nmap_dirs, "nmap-os-db", MAX_DB_BYTES) {
                Some(text) => OsDb::parse(&text).map(Some).map_err(|e| e.context("nmap's nmap-os-db")),
                None => Ok(None),
            },
        }
    }

    /// The entries, in the file's order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The points `MatchPoints` gives `test`.`attr`.
    pub fn weight(&self, test: &str, attr: &str) -> Option<u32> {
        self.slot(test, attr).map(|s| &self.slots[s]).filter(|s| s.weighted).map(|s| s.weight)
    }

    /// The conditions of entry `entry` (none for an index out of range),
    /// in the file's order.
    pub fn conditions(&self, entry: usize) -> impl Iterator<Item = Condition<'_>> + '_ {
        self.cond_ids(entry).iter().map(move |&c| {
            let cond = self.conds[c as usize];
            let slot = &self.slots[cond.slot as usize];
            Condition {
                test: &self.tests[slot.test as usize].name,
                attr: &slot.attr,
                weight: slot.weight,
                expr: &self.exprs[cond.expr as usize],
            }
        })
    }

    /// The slot of `test`.`attr`.
    pub(crate) fn slot(&self, test: &str, attr: &str) -> Option<usize> {
        self.slot_in(self.test_index(test)?, attr)
    }

    fn slot_in(&self, test: usize, attr: &str) -> Option<usize> {
        self.tests[test].slots.iter().map(|&s| s as usize).find(|&s| self.slots[s].attr == attr)
    }

    pub(crate) fn test_index(&self, test: &str) -> Option<usize> {
        self.tests.iter().position(|t| t.name == test)
    }

    pub(crate) fn slot_count(&self) -> usize {
        self.slots.len()
    }

    pub(crate) fn slot_weight(&self, slot: usize) -> u32 {
        self.slots[slot].weight
    }

    pub(crate) fn conds(&self) -> &[Cond] {
        &self.conds
    }

    pub(crate) fn expr(&self, id: u32) -> &Expr {
        &self.exprs[id as usize]
    }

    /// The condition ids of entry `entry` (empty when out of range).
    pub(crate) fn cond_ids(&self, entry: usize) -> &[u32] {
        self.entries.get(entry).map_or(&[], |e| &self.entry_conds[e.conds.0 as usize..e.conds.1 as usize])
    }
}

#[cfg(test)]
#[path = "db_tests.rs"]
pub(crate) mod tests;
