//! Match rules: a bytes regex over a response, and templates that turn its
//! captures into a service identity.
//!
//! Patterns use the regex crate's syntax (linear time, no backreferences or
//! lookaround), compiled with limits on program size and nesting so a hostile
//! probe file cannot exhaust memory. Unicode is off, as in nmap's PCRE
//! patterns: `\w`, `\d`, `.` and case folding work on bytes, which also keeps
//! each compiled rule small (Unicode `\w` alone is tens of kilobytes). Templates substitute `$1`..`$9` with the
//! capture (non-printable bytes as `\xHH`) and `$P(n)` with only its printable
//! bytes, as nmap's do.
//!
//! A rule marked `backtrack` (what `probes import` makes of nmap's few
//! patterns with lookaround or backreferences) runs on fancy-regex instead:
//! the response is read one char per byte (Latin-1), so `\xHH` still means
//! the byte HH, and every match attempt stops after [`BACKTRACK_LIMIT`]
//! steps (a failed attempt is no match, never a slow scan).

use std::borrow::Cow;

use regex::bytes::Regex;

use crate::error::{Error, ErrorKind, Result};

pub use crate::findings::Identity;
pub use crate::pattern::{compile, compile_within, MAX_PATTERN};

/// Most backtracking steps one match attempt of a `backtrack` rule may take.
pub const BACKTRACK_LIMIT: usize = 100_000;

/// How a rule's pattern runs.
#[derive(Clone, Debug)]
enum Matcher {
    /// The regex crate on bytes, in linear time.
    Linear(Regex),
    /// fancy-regex on the response read as Latin-1, with a step limit.
    Backtrack(Box<fancy_regex::Regex>),
}

/// A match rule. Its pattern is parsed (syntax, nesting) when the rule is
/// made and compiled the first time a response is tried against it: an
/// imported nmap database holds some 12,000 rules, most of which a scan
/// never reaches, and compiled all at once they took 0.8 s and 345 MB.
#[derive(Clone, Debug)]
pub struct Rule {
    pattern: Box<str>,
    backtrack: bool,
    /// What a matching response must start with (see [`crate::pattern::Prefixes`]).
    prefixes: Option<crate::pattern::Prefixes>,
    /// The compiled pattern; `None` inside when it failed to compile (past
    /// the size limits), which [`Rule::compiles`] reports.
    matcher: std::sync::OnceLock<Option<Matcher>>,
    template: Identity,
}

/// The groups of one match, as bytes of the response.
type Groups<'a> = Vec<Option<Cow<'a, [u8]>>>;

impl Rule {
    /// A rule that gives `template` (its service set, its other fields
    /// templates) to responses matching `pattern`.
    pub fn new(pattern: &str, template: Identity) -> Result<Rule> {
        Rule::check(pattern, &template)?;
        let prefixes = crate::pattern::parse(pattern)?;
        Ok(Rule { prefixes, ..Rule::lazy(pattern, false, template) })
    }

    /// As [`Rule::new`] for a pattern that needs backtracking (lookaround,
    /// backreferences, atomic groups), in fancy-regex's syntax.
    pub fn backtracking(pattern: &str, template: Identity) -> Result<Rule> {
        Rule::check(pattern, &template)?;
        fancy_regex::Expr::parse_tree(pattern)
            .map_err(|e| Error::with_source(ErrorKind::Config, format!("bad pattern: {e}"), e))?;
        Ok(Rule::lazy(pattern, true, template))
    }

    fn lazy(pattern: &str, backtrack: bool, template: Identity) -> Rule {
        Rule { pattern: pattern.into(), backtrack, prefixes: None, matcher: std::sync::OnceLock::new(), template }
    }

    fn check(pattern: &str, template: &Identity) -> Result<()> {
        if template.service.is_empty() {
            return Err(Error::new(ErrorKind::Config, "a rule needs a service name"));
        }
        if pattern.len() > MAX_PATTERN {
            return Err(Error::new(ErrorKind::Config, format!("pattern longer than {MAX_PATTERN} bytes")));
        }
        Ok(())
    }

    fn build(&self) -> Result<Matcher> {
        if !self.backtrack {
            return Ok(Matcher::Linear(compile(&self.pattern)?));
        }
        let re = fancy_regex::RegexBuilder::new(&self.pattern)
            .backtrack_limit(BACKTRACK_LIMIT)
            .delegate_size_limit(1 << 20)
            .delegate_dfa_size_limit(1 << 20)
            .build()
            .map_err(|e| Error::with_source(ErrorKind::Config, format!("bad pattern: {e}"), e))?;
        Ok(Matcher::Backtrack(Box::new(re)))
    }

    fn matcher(&self) -> Option<&Matcher> {
        self.matcher.get_or_init(|| self.build().ok()).as_ref()
    }

    /// Compiles the pattern now (if it was not yet); the error says why it
    /// cannot be (past the size limits), for `probes list` and tests.
    pub fn compiles(&self) -> Result<()> {
        match self.matcher() {
            Some(_) => Ok(()),
            None => self.build().map(|_| ()),
        }
    }

    /// The pattern as written.
    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    pub fn service(&self) -> &str {
        &self.template.service
    }

    /// Whether the pattern runs on the backtracking engine.
    pub fn backtracks(&self) -> bool {
        self.backtrack
    }

    fn groups<'a>(&self, response: &'a [u8]) -> Option<Groups<'a>> {
        if self.prefixes.as_ref().is_some_and(|p| !p.admit(response)) {
            return None;
        }
        match self.matcher()? {
            Matcher::Linear(re) => {
                let caps = re.captures(response)?;
                Some(caps.iter().map(|m| m.map(|m| Cow::Borrowed(m.as_bytes()))).collect())
            }
            Matcher::Backtrack(re) => {
                let text: String = response.iter().map(|&b| char::from(b)).collect();
                // Past the step limit, or any other failure: no match.
                let caps = re.captures(&text).ok()??;
                let latin1 = |s: &str| -> Cow<'a, [u8]> { Cow::Owned(s.chars().map(|c| c as u32 as u8).collect()) };
                Some(caps.iter().map(|m| m.map(|m| latin1(m.as_str()))).collect())
            }
        }
    }

    /// The identity this rule gives `response`, if its pattern matches.
    pub fn apply(&self, response: &[u8]) -> Option<Identity> {
        let caps = self.groups(response)?;
        let fill = |t: &Option<String>| t.as_deref().map(|t| substitute(t, &caps)).filter(|s| !s.is_empty());
        let t = &self.template;
        Some(Identity {
            service: t.service.clone(),
            product: fill(&t.product),
            version: fill(&t.version),
            info: fill(&t.info),
            os: fill(&t.os),
            hostname: fill(&t.hostname),
            device: fill(&t.device),
            cpe: t.cpe.iter().map(|c| substitute(c, &caps)).collect(),
        })
    }
}

/// Fills `$1`..`$9` and `$P(n)` from the captures; an absent group is empty.
fn substitute(template: &str, caps: &Groups<'_>) -> String {
    let group = |n: usize| caps.get(n).and_then(|g| g.as_deref()).unwrap_or(&[]);
    let mut out = String::new();
    let mut rest = template;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let b = after.as_bytes();
        if let Some(d) = b.first().filter(|c| c.is_ascii_digit() && **c != b'0') {
            escape_into(&mut out, group(usize::from(d - b'0')));
            rest = &after[1..];
        } else if b.len() >= 4 && &b[..2] == b"P(" && b[2].is_ascii_digit() && b[3] == b')' {
            out.extend(
                group(usize::from(b[2] - b'0'))
                    .iter()
                    .filter(|c| c.is_ascii_graphic() || **c == b' ')
                    .map(|&c| c as char),
            );
            rest = &after[4..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

fn escape_into(out: &mut String, bytes: &[u8]) {
    for &c in bytes {
        if c.is_ascii_graphic() || c == b' ' {
            out.push(c as char);
        } else {
            out.push_str(&format!("\\x{c:02x}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(pattern: &str, version: &str, cpe: &str) -> Rule {
        let t = Identity {
            service: "ssh".into(),
            product: Some("OpenSSH".into()),
            version: Some(version.into()),
            cpe: vec![cpe.into()],
            ..Identity::default()
        };
        Rule::new(pattern, t).unwrap()
    }

    #[test]
    fn captures_fill_the_templates() {
        let r = rule(r"^SSH-2\.0-OpenSSH_([\w._-]+)[ -]", "$1", "cpe:/a:openbsd:openssh:$1");
        let id = r.apply(b"SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\r\n").unwrap();
        assert_eq!(id.service, "ssh");
        assert_eq!(id.product.as_deref(), Some("OpenSSH"));
        assert_eq!(id.version.as_deref(), Some("9.2p1"));
        assert_eq!(id.cpe, ["cpe:/a:openbsd:openssh:9.2p1"]);
        assert!(r.apply(b"220 ftp ready\r\n").is_none());
    }

    #[test]
    fn binary_captures_are_escaped_or_filtered() {
        let r = rule(r"(?s-u)^x(.{3})", "$1", "v$P(1)");
        let id = r.apply(b"x\x01A\xff").unwrap();
        assert_eq!(id.version.as_deref(), Some("\\x01A\\xff"));
        assert_eq!(id.cpe, ["vA"]);
    }

    #[test]
    fn absent_groups_and_stray_dollars() {
        let r = rule(r"^a(b)?", "$1 $2 $0 $ $x", "");
        assert_eq!(r.apply(b"a").unwrap().version.as_deref(), Some("  $0 $ $x"));
    }

    #[test]
    fn hostile_patterns_are_refused() {
        assert!(compile("(").is_err());
        assert!(compile(r"(a)\1").is_err(), "backreferences are not supported");
        assert!(compile(&format!("{}a{}", "(".repeat(100), ")".repeat(100))).is_err(), "nesting limit");
        assert!(compile(r"\w{1000}{1000}").is_err(), "size limit");
        assert!(compile(&"a".repeat(MAX_PATTERN + 1)).is_err());
        // A rule is parsed when made: syntax and nesting errors at once.
        assert!(Rule::new("(", Identity { service: "x".into(), ..Identity::default() }).is_err());
        assert!(Rule::new(&format!("{}a{}", "(".repeat(100), ")".repeat(100)), Identity::default()).is_err());
        // Past the size limit it compiles never: no match, and `compiles` says why.
        let bomb = Rule::new(r"\w{1000}{1000}", Identity { service: "x".into(), ..Identity::default() }).unwrap();
        assert!(bomb.apply(b"aaaa").is_none());
        assert!(bomb.compiles().unwrap_err().to_string().contains("size"), "{:?}", bomb.compiles());
    }
}
