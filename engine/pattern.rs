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

/// Compiles a pattern with the engine's limits.
pub fn compile(pattern: &str) -> Result<Regex> {
    compile_within(pattern, REGEX_SIZE_LIMIT)
}

/// As [`compile`], with `limit` bytes for the compiled program and as many
/// for its lazy DFA's cache (what one pattern can hold).
pub fn compile_within(pattern: &str, limit: usize) -> Result<Regex> {
    if pattern.len() > MAX_PATTERN {
        return Err(Error::new(ErrorKind::Config, format!("pattern longer than {MAX_PATTERN} bytes")));
    }
    RegexBuilder::new(pattern)
        .unicode(false)
        .size_limit(limit)
        .dfa_size_limit(limit)
        .nest_limit(REGEX_NEST_LIMIT)
        .build()
        .map_err(|e| Error::new(ErrorKind::Config, format!("bad pattern: {e}")))
}
