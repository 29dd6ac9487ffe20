//! The `re` and `hash` modules plugins get: regular expressions on bytes
//! of bounded cost, and SHA-256, MD5 and base64.
//!
//! In: a plugin's calls. Out: values for the plugin. What always holds: a
//! subject is at most [`MAX_RE_SUBJECT`] bytes, a hash input at most
//! [`MAX_HASH_INPUT`], and a VM keeps at most 16 compiled patterns.

use std::sync::Arc;

use mlua::{Lua, Table, Value};

use crate::pattern::Bounded;

/// Longest subject `re.*` searches: with the compiled-size limit of the
/// patterns, one call costs at most a few milliseconds.
pub(super) const MAX_RE_SUBJECT: usize = 1 << 20;
/// Longest input `hash.*` takes (a few milliseconds of hashing).
pub(super) const MAX_HASH_INPUT: usize = 4 << 20;

/// `re.match(s, pattern)`, `re.find(s, pattern)`, `re.captures(s, pattern)`,
/// `re.gsub`-free by design: the regex crate's syntax on bytes, each
/// search of bounded cost ([`crate::pattern::Bounded`]).
pub(super) fn regex_module(lua: &Lua, cache: &Arc<PatternCache>) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    let (c1, c2, c3) = (cache.clone(), cache.clone(), cache.clone());
    t.raw_set(
        "match",
        lua.create_function(move |_, (s, p): (mlua::String, String)| {
            Ok(c1.get(&p)?.find(subject(&s.as_bytes(), "re.match")?).map_err(re_error)?.is_some())
        })?,
    )?;
    t.raw_set(
        "find",
        lua.create_function(move |_, (s, p): (mlua::String, String)| {
            Ok(match c2.get(&p)?.find(subject(&s.as_bytes(), "re.find")?).map_err(re_error)? {
                Some(m) => (Some(m.start + 1), Some(m.end)),
                None => (None, None),
            })
        })?,
    )?;
    t.raw_set(
        "captures",
        lua.create_function(move |lua, (s, p): (mlua::String, String)| {
            let re = c3.get(&p)?;
            let bytes = s.as_bytes();
            let bytes = subject(&bytes, "re.captures")?;
            let Some(groups) = re.captures(bytes).map_err(re_error)? else { return Ok(Value::Nil) };
            let out = lua.create_table()?;
            for (i, name, span) in groups {
                let v = lua.create_string(&bytes[span])?;
                out.raw_set(i, v.clone())?;
                if let Some(name) = name {
                    out.raw_set(name, v)?;
                }
            }
            Ok(Value::Table(out))
        })?,
    )?;
    Ok(t)
}

pub(super) fn re_error(e: crate::error::Error) -> mlua::Error {
    mlua::Error::runtime(format!("re: {e}"))
}

/// The input of a host call, refused past `max` bytes so that one call
/// cannot hold the thread for long.
fn capped<'a>(s: &'a [u8], max: usize, what: &str) -> mlua::Result<&'a [u8]> {
    if s.len() > max {
        return Err(mlua::Error::runtime(format!(
            "{what}: the string is {} bytes; it takes at most {max} (a part: string.sub)",
            s.len()
        )));
    }
    Ok(s)
}

/// The subject of a `re.*` call, at most [`MAX_RE_SUBJECT`] bytes.
fn subject<'a>(s: &'a [u8], what: &str) -> mlua::Result<&'a [u8]> {
    capped(s, MAX_RE_SUBJECT, what)
}

/// Compiled patterns of one VM, so a pattern used in a loop is compiled once.
#[derive(Default)]
pub(super) struct PatternCache(std::sync::Mutex<std::collections::HashMap<String, Arc<Bounded>>>);

/// Compiled size (and lazy-DFA cache) one plugin pattern may take.
pub(super) const PATTERN_LIMIT: usize = 256 * 1024;

impl PatternCache {
    /// Patterns kept per VM: with [`PATTERN_LIMIT`], at most 8 MiB.
    const MAX: usize = 16;

    pub(super) fn get(&self, p: &str) -> mlua::Result<Arc<Bounded>> {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(re) = m.get(p) {
            return Ok(re.clone());
        }
        let re = Bounded::new(p, PATTERN_LIMIT).map_err(re_error)?;
        let re = Arc::new(re);
        if m.len() >= Self::MAX {
            m.clear();
        }
        m.insert(p.to_string(), re.clone());
        Ok(re)
    }
}

/// The input of a `hash.*` call, at most [`MAX_HASH_INPUT`] bytes.
fn hash_input<'a>(s: &'a [u8], what: &str) -> mlua::Result<&'a [u8]> {
    capped(s, MAX_HASH_INPUT, what)
}

/// `hash.sha256(s)`, `hash.sha1(s)`, `hash.md5(s)` (hex), `hash.base64(s)`,
/// `hash.unbase64(s)`.
pub(super) fn hash_module(lua: &Lua) -> mlua::Result<Table> {
    use base64::Engine;
    use md5::Digest as _;
    let t = lua.create_table()?;
    let hex = crate::text::hex;
    t.raw_set(
        "sha256",
        lua.create_function(move |_, s: mlua::String| {
            Ok(hex(&sha2::Sha256::digest(hash_input(&s.as_bytes(), "hash.sha256")?)))
        })?,
    )?;
    t.raw_set(
        "sha1",
        lua.create_function(move |_, s: mlua::String| {
            Ok(hex(&sha1::Sha1::digest(hash_input(&s.as_bytes(), "hash.sha1")?)))
        })?,
    )?;
    t.raw_set(
        "md5",
        lua.create_function(move |_, s: mlua::String| {
            Ok(hex(&md5::Md5::digest(hash_input(&s.as_bytes(), "hash.md5")?)))
        })?,
    )?;
    t.raw_set(
        "base64",
        lua.create_function(|_, s: mlua::String| {
            Ok(base64::engine::general_purpose::STANDARD.encode(hash_input(&s.as_bytes(), "hash.base64")?))
        })?,
    )?;
    t.raw_set(
        "unbase64",
        lua.create_function(|lua, s: mlua::String| {
            match base64::engine::general_purpose::STANDARD.decode(hash_input(&s.as_bytes(), "hash.unbase64")?) {
                Ok(b) => Ok(Value::String(lua.create_string(b)?)),
                Err(_) => Ok(Value::Nil),
            }
        })?,
    )?;
    Ok(t)
}
