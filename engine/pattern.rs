//! Regular expressions the engine compiles from text it does not control
//! (probe files, plugins): the regex crate's syntax on bytes, in linear
//! time, with limits on program size, DFA cache and nesting, and without
//! Unicode classes (as nmap's PCRE patterns: `\w`, `\d` and case folding
//! work on bytes, which keeps each compiled pattern small).

use regex::bytes::{Regex, RegexBuilder};

use crate::error::{Error, ErrorKind, Result};

/// Largest compiled program of one pattern.
const REGEX_SIZE_LIMIT: usize = 1 << 20;
/// Deepest nesting of groups and repetitions in one pattern.
const REGEX_NEST_LIMIT: u32 = 64;
/// Longest pattern text.
pub const MAX_PATTERN: usize = 8 * 1024;

/// What a match of a pattern must start with: one of `literals`, at the
/// start of the subject when `anchored`, anywhere otherwise. A subject that
/// holds none of them cannot match, which is known without compiling.
#[derive(Clone, Debug)]
pub struct Prefixes {
    pub anchored: bool,
    pub literals: Vec<Box<[u8]>>,
}

impl Prefixes {
    /// False when `subject` cannot match.
    pub fn admit(&self, subject: &[u8]) -> bool {
        self.literals.iter().any(|l| {
            if self.anchored {
                subject.starts_with(l)
            } else {
                l.is_empty() || subject.windows(l.len()).any(|w| w == &l[..])
            }
        })
    }
}

/// Parses a pattern with the engine's syntax and nesting limit, without
/// compiling it (what a rule checks when it is loaded), and returns the
/// literal prefixes every match starts with, when there are few of them.
pub fn parse(pattern: &str) -> Result<Option<Prefixes>> {
    use regex_automata::util::syntax;
    use regex_syntax::hir::literal::{ExtractKind, Extractor};
    use regex_syntax::hir::Look;
    if pattern.len() > MAX_PATTERN {
        return Err(Error::new(ErrorKind::Config, format!("pattern longer than {MAX_PATTERN} bytes")));
    }
    let config = syntax::Config::new().unicode(false).utf8(false).nest_limit(REGEX_NEST_LIMIT);
    let hir = syntax::parse_with(pattern, &config)
        .map_err(|e| Error::with_source(ErrorKind::Config, format!("bad pattern: {e}"), e))?;
    // `^` only when it holds at the start of the subject (not per line).
    let anchored = hir.properties().look_set_prefix().contains(Look::Start);
    let mut extractor = Extractor::new();
    extractor.kind(ExtractKind::Prefix).limit_total(16);
    let seq = extractor.extract(&hir);
    let Some(lits) = seq.literals() else { return Ok(None) };
    if lits.is_empty() || lits.iter().any(|l| l.as_bytes().is_empty()) {
        return Ok(None);
    }
    Ok(Some(Prefixes { anchored, literals: lits.iter().map(|l| l.as_bytes().into()).collect() }))
}

/// Lazy-DFA cache of one probe rule: responses are at most a few KiB, and
/// a database holds thousands of rules.
const RULE_DFA_LIMIT: usize = 64 * 1024;

/// Compiles a pattern with the engine's limits (a probe rule's).
pub fn compile(pattern: &str) -> Result<Regex> {
    build(pattern, REGEX_SIZE_LIMIT, RULE_DFA_LIMIT)
}

/// As [`compile`], with `limit` bytes for the compiled program and as many
/// for its lazy DFA's cache (what one pattern can hold).
pub fn compile_within(pattern: &str, limit: usize) -> Result<Regex> {
    build(pattern, limit, limit)
}

fn build(pattern: &str, size: usize, dfa: usize) -> Result<Regex> {
    if pattern.len() > MAX_PATTERN {
        return Err(Error::new(ErrorKind::Config, format!("pattern longer than {MAX_PATTERN} bytes")));
    }
    RegexBuilder::new(pattern)
        .unicode(false)
        .size_limit(size)
        .dfa_size_limit(dfa)
        .nest_limit(REGEX_NEST_LIMIT)
        .build()
        .map_err(|e| Error::with_source(ErrorKind::Config, format!("bad pattern: {e}"), e))
}

/// A pattern whose every search has a bounded cost, for plugins, which
/// choose both the pattern and the subject.
///
/// The regex crate is linear in the subject, but with a factor of the
/// pattern's size: when its lazy DFA thrashes it falls back to the PikeVM,
/// and `[ab]*b[ab]{2000}[cd]` then takes seconds on 1 MiB. Here the lazy DFA
/// runs alone and gives up (an error, never a slow path) once it rebuilds
/// its cache too often for too little progress; captures are read with the
/// full engine only inside the span the DFA found, and only while pattern
/// size times span length stays under [`Bounded::CAPTURE_WORK`].
pub struct Bounded {
    dfa: regex_automata::hybrid::regex::Regex,
    cache: std::sync::Mutex<regex_automata::hybrid::regex::Cache>,
    full: regex_automata::meta::Regex,
    /// NFA states: what one step of a PikeVM over one byte can cost.
    states: usize,
}

/// A capture group: its index, its name if it has one, and its span.
pub type Group<'n> = (usize, Option<&'n str>, std::ops::Range<usize>);

impl Bounded {
    /// Most (NFA states x span bytes) a captures search may take: about
    /// 0.1 s for the PikeVM's worst case.
    pub const CAPTURE_WORK: usize = 16 << 20;

    /// Compiles `pattern` with `limit` bytes for its program and its lazy
    /// DFA's cache, as [`compile_within`].
    pub fn new(pattern: &str, limit: usize) -> Result<Bounded> {
        use regex_automata::{hybrid, meta, nfa::thompson, util::syntax};
        if pattern.len() > MAX_PATTERN {
            return Err(Error::new(ErrorKind::Config, format!("pattern longer than {MAX_PATTERN} bytes")));
        }
        let bad = |e: &dyn std::fmt::Display| Error::new(ErrorKind::Config, format!("bad pattern: {e}"));
        let syntax = syntax::Config::new().unicode(false).utf8(false).nest_limit(REGEX_NEST_LIMIT);
        let dfa = hybrid::regex::Builder::new()
            .syntax(syntax)
            .thompson(thompson::Config::new().utf8(false).nfa_size_limit(Some(limit)))
            .dfa(
                hybrid::dfa::Config::new()
                    .cache_capacity(limit)
                    .minimum_cache_clear_count(Some(3))
                    .minimum_bytes_per_state(Some(64)),
            )
            .build(pattern)
            .map_err(|e| bad(&e))?;
        let full = meta::Regex::builder()
            .syntax(syntax)
            .configure(meta::Config::new().utf8_empty(false).nfa_size_limit(Some(limit)).hybrid_cache_capacity(limit))
            .build(pattern)
            .map_err(|e| bad(&e))?;
        let states = dfa.forward().get_nfa().states().len();
        let cache = std::sync::Mutex::new(dfa.create_cache());
        Ok(Bounded { dfa, cache, full, states })
    }

    /// The first match's span, or an error when the search would cost too much.
    pub fn find(&self, hay: &[u8]) -> Result<Option<std::ops::Range<usize>>> {
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        match self.dfa.try_search(&mut cache, &regex_automata::Input::new(hay)) {
            Ok(m) => Ok(m.map(|m| m.range())),
            Err(_) => Err(Error::new(
                ErrorKind::Budget,
                format!("the pattern is too costly on {} bytes (its DFA gave up); search a smaller part", hay.len()),
            )),
        }
    }

    /// The first match's groups, or an error when the search would cost too much.
    pub fn captures(&self, hay: &[u8]) -> Result<Option<Vec<Group<'_>>>> {
        use regex_automata::{Anchored, Input, PatternID};
        let Some(span) = self.find(hay)? else { return Ok(None) };
        if self.states.saturating_mul(span.len()) > Self::CAPTURE_WORK {
            return Err(Error::new(
                ErrorKind::Budget,
                format!("captures over a {}-byte match of a {}-state pattern cost too much", span.len(), self.states),
            ));
        }
        // Look-around at the span's edges still sees the whole subject.
        let input = Input::new(hay).range(span).anchored(Anchored::Yes);
        let mut caps = self.full.create_captures();
        self.full.search_captures(&input, &mut caps);
        if !caps.is_match() {
            return Ok(None);
        }
        let names = self.full.group_info().pattern_names(PatternID::ZERO);
        Ok(Some(names.enumerate().filter_map(|(i, name)| caps.get_group(i).map(|s| (i, name, s.range()))).collect()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_prefixes_are_what_every_match_starts_with() {
        let p = parse(r"^SSH-([\d.]+)-OpenSSH").unwrap().unwrap();
        assert!(p.anchored && p.admit(b"SSH-2.0-OpenSSH_9") && !p.admit(b"xSSH-2.0"));
        let p = parse(r"Server: nginx/").unwrap().unwrap();
        assert!(!p.anchored && p.admit(b"HTTP/1.1 200\r\nServer: nginx/1.2") && !p.admit(b"Server: Apache"));
        // Case folding makes variants (or shorter prefixes): still admitted.
        let p = parse(r"(?i)server: nginx").unwrap().unwrap();
        assert!(p.admit(b"SERVER: NGINX") && p.admit(b"server: nginx"));
        let p = parse(r"^(?:220|421) ").unwrap().unwrap();
        assert!(p.admit(b"421 busy") && !p.admit(b"500 no"));
        // Per-line anchors, classes up front, and empty matches give no check.
        assert!(parse(r"(?m)^x").unwrap().is_none_or(|p| !p.anchored));
        assert!(parse(r"\w+").unwrap().is_none());
        assert!(parse(r"a*").unwrap().is_none());
    }

    #[test]
    fn bounded_patterns_match_as_the_regex_crate_does() {
        let re = Bounded::new(r"(?P<k>\w+)=(\d+)\b", 256 * 1024).unwrap();
        let hay = b"x; key=42; y=7";
        assert_eq!(re.find(hay).unwrap(), Some(3..9));
        let groups = re.captures(hay).unwrap().unwrap();
        let spans: Vec<_> = groups.iter().map(|(i, n, s)| (*i, *n, &hay[s.clone()])).collect();
        assert_eq!(spans, [(0, None, &b"key=42"[..]), (1, Some("k"), b"key"), (2, None, b"42")]);
        // An optional group that did not take part is left out.
        let re = Bounded::new(r"a(b)?c", 4096).unwrap();
        assert_eq!(re.captures(b"zac").unwrap().unwrap().len(), 1);
        assert_eq!(re.find(b"zzz").unwrap(), None);
    }

    /// A pattern the regex crate searches in seconds (its lazy DFA thrashes
    /// and it falls back to the PikeVM) is refused quickly instead.
    #[test]
    fn a_thrashing_pattern_is_refused_quickly() {
        let re = Bounded::new(r"[ab]*b[ab]{2000}[cd]", 256 * 1024).unwrap();
        let hay: Vec<u8> = b"ab".iter().cycle().take(1 << 20).copied().collect();
        let t = std::time::Instant::now();
        let err = re.find(&hay).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Budget);
        assert!(t.elapsed() < std::time::Duration::from_millis(500), "{:?}", t.elapsed());
        // The same pattern on a short subject still works.
        assert_eq!(re.find(b"ab").unwrap(), None);
    }

    #[test]
    fn captures_over_a_long_match_of_a_large_pattern_are_refused() {
        let re = Bounded::new(r"(a)[ab]{1000}", 256 * 1024).unwrap();
        let hay: Vec<u8> = std::iter::repeat_n(b'a', 2000).collect();
        assert!(re.captures(&hay[..1001]).unwrap().is_some());
        let re = Bounded::new(r"(a)(?:[ab]{100})*", 256 * 1024).unwrap();
        let hay: Vec<u8> = std::iter::repeat_n(b'a', 1 << 20).collect();
        assert_eq!(re.captures(&hay).unwrap_err().kind(), ErrorKind::Budget);
    }
}
