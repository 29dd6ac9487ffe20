//! Lua values to JSON and back, with limits.
//!
//! In: whatever a plugin hands the host (finding data, return values), or
//! JSON the host gives a plugin (the TLS chain). Out: `serde_json::Value`,
//! or Lua tables. What always holds: tables are read raw (no metamethod is
//! ever called, so a table whose `__index` or `__pairs` loops or errors is
//! read like any other), depth, size and string length are bounded, and a
//! value JSON cannot hold (a function, a userdata, a cycle past the depth)
//! is an error naming where it was found. What leaves the VM is charged to
//! an allowance of bytes as it is built, before each allocation: a string
//! referenced a thousand times costs a thousand copies, and the conversion
//! stops at the allowance rather than after the copies are made.

use mlua::{Lua, Table, Value};
use serde_json::{Map, Value as Json};

use crate::findings::TlsInfo;

/// Deepest nesting of tables converted.
pub const MAX_DEPTH: usize = 16;
/// Most values (tables, strings, numbers...) in one converted value.
pub const MAX_NODES: usize = 10_000;
/// Longest string kept; longer ones are an error.
pub const MAX_STRING: usize = 64 * 1024;

/// What each converted value costs on top of its bytes (about what a JSON
/// node takes in memory), so a table of many small values is charged too.
const NODE_COST: u64 = 48;

/// Where the bytes of a conversion come from.
pub trait Allowance {
    /// Takes `n` bytes; false (taking nothing) when there are not enough.
    fn take(&mut self, n: u64) -> bool;
    /// The limit to name in an error.
    fn limit(&self) -> u64;
}

/// A plain count of bytes left.
impl Allowance for u64 {
    fn take(&mut self, n: u64) -> bool {
        match self.checked_sub(n) {
            Some(rest) => {
                *self = rest;
                true
            }
            None => false,
        }
    }

    fn limit(&self) -> u64 {
        *self
    }
}

/// Longest path named in an error (`value.a.b[3]`).
const MAX_PATH: usize = 200;

/// `at` with one more step, kept short: a plugin chooses the key names.
fn step(at: &str, key: impl std::fmt::Display, index: bool) -> String {
    if at.len() >= MAX_PATH {
        return at.to_string();
    }
    let key: String = key.to_string().chars().take(64).collect();
    let s = if index { format!("{at}[{key}]") } else { format!("{at}.{key}") };
    if s.len() >= MAX_PATH {
        format!("{}...", s.chars().take(MAX_PATH).collect::<String>())
    } else {
        s
    }
}

/// Why a conversion failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConvertError {
    /// The value is not data, or breaks a shape limit (depth, count, string length).
    NotData(String),
    /// Converting it would take more than the allowance (bytes).
    TooLarge(u64),
}

impl std::fmt::Display for ConvertError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConvertError::NotData(m) => f.write_str(m),
            ConvertError::TooLarge(n) => write!(f, "more than {n} bytes of data"),
        }
    }
}

/// Converts a Lua value to JSON, charging what it builds to `allowance`
/// (bytes left; what was used is subtracted on success).
pub fn to_json(v: &Value, allowance: &mut dyn Allowance) -> Result<Json, ConvertError> {
    let limit = allowance.limit();
    let mut st = State { nodes: 0, allowance, limit };
    convert(v, 0, &mut st, "value")
}

struct State<'a> {
    nodes: usize,
    allowance: &'a mut dyn Allowance,
    /// The allowance's limit when the conversion began (named in errors).
    limit: u64,
}

impl State<'_> {
    fn charge(&mut self, n: u64) -> Result<(), ConvertError> {
        if self.allowance.take(n) {
            Ok(())
        } else {
            Err(ConvertError::TooLarge(self.limit))
        }
    }
}

fn convert(v: &Value, depth: usize, st: &mut State, at: &str) -> Result<Json, ConvertError> {
    st.nodes += 1;
    if st.nodes > MAX_NODES {
        return Err(ConvertError::NotData(format!("more than {MAX_NODES} values")));
    }
    st.charge(NODE_COST)?;
    Ok(match v {
        Value::Nil => Json::Null,
        Value::Boolean(b) => Json::Bool(*b),
        Value::Integer(i) => Json::from(*i),
        Value::Number(n) if n.is_finite() && n.fract() == 0.0 && n.abs() < 9.0e15 => Json::from(*n as i64),
        Value::Number(n) => serde_json::Number::from_f64(*n)
            .map(Json::Number)
            .ok_or_else(|| ConvertError::NotData(format!("{at} is {n}")))?,
        Value::String(s) => {
            let b = s.as_bytes();
            if b.len() > MAX_STRING {
                return Err(ConvertError::NotData(format!("{at} is a string longer than {MAX_STRING} bytes")));
            }
            // Charged before the copy is made (bytes that are not UTF-8
            // become three-byte replacement characters).
            let valid = std::str::from_utf8(&b).is_ok();
            st.charge(b.len() as u64 * if valid { 1 } else { 3 })?;
            Json::String(String::from_utf8_lossy(&b).into_owned())
        }
        Value::Table(t) => {
            if depth >= MAX_DEPTH {
                return Err(ConvertError::NotData(format!("{at} is nested deeper than {MAX_DEPTH} tables")));
            }
            table(t, depth, st, at)?
        }
        // An error value is data as its message was (the host gave plugins
        // the message itself before errors had kinds).
        other => match super::failure::message_of(other) {
            Some(m) => {
                if m.len() > MAX_STRING {
                    return Err(ConvertError::NotData(format!("{at} is a string longer than {MAX_STRING} bytes")));
                }
                st.charge(m.len() as u64)?;
                Json::String(m)
            }
            None => return Err(ConvertError::NotData(format!("{at} is a {}, which is not data", other.type_name()))),
        },
    })
}

fn table(t: &Table, depth: usize, st: &mut State, at: &str) -> Result<Json, ConvertError> {
    // Raw iteration: pairs() uses lua_next and never calls __pairs or __index.
    let mut entries: Vec<(Value, Value)> = Vec::new();
    for pair in t.clone().pairs::<Value, Value>() {
        let pair = pair.map_err(|e| ConvertError::NotData(format!("{at}: {e}")))?;
        entries.push(pair);
        if entries.len() > MAX_NODES {
            return Err(ConvertError::NotData(format!("{at} has more than {MAX_NODES} entries")));
        }
    }
    let n = entries.len();
    // An empty table is an empty list: plugins build lists far more often than maps.
    let is_array = entries.iter().all(|(k, _)| matches!(k, Value::Integer(i) if *i >= 1 && (*i as usize) <= n));
    if is_array {
        let mut items = vec![Json::Null; n];
        for (k, v) in &entries {
            if let Value::Integer(i) = k {
                items[*i as usize - 1] = convert(v, depth + 1, st, &step(at, i, true))?;
            }
        }
        return Ok(Json::Array(items));
    }
    let mut map = Map::new();
    for (k, v) in &entries {
        let key = match k {
            Value::String(s) => s.to_string_lossy(),
            Value::Integer(i) => i.to_string(),
            Value::Number(x) => x.to_string(),
            Value::Boolean(b) => b.to_string(),
            other => return Err(ConvertError::NotData(format!("{at} has a {} as a key", other.type_name()))),
        };
        st.charge(key.len() as u64)?;
        let val = convert(v, depth + 1, st, &step(at, &key, false))?;
        map.insert(key, val);
    }
    Ok(Json::Object(map))
}

/// The keys of `t` not in `allowed`, quoted for a message (raw iteration;
/// at most 64 keys are looked at, and a table with more has an unknown one).
pub fn unknown_keys(t: &Table, allowed: &[&str]) -> mlua::Result<Vec<String>> {
    let mut unknown = Vec::new();
    for (n, pair) in t.clone().pairs::<Value, Value>().enumerate() {
        let (k, _) = pair?;
        let name = match &k {
            Value::String(s) => s.to_string_lossy(),
            other => format!("{other:?}"),
        };
        if !allowed.contains(&name.as_str()) {
            unknown.push(format!("'{}'", name.chars().take(64).collect::<String>()));
        }
        if n >= 64 {
            break;
        }
    }
    Ok(unknown)
}

/// Converts JSON to a Lua value (objects and arrays become tables).
pub fn from_json(lua: &Lua, j: &Json) -> mlua::Result<Value> {
    Ok(match j {
        Json::Null => Value::Nil,
        Json::Bool(b) => Value::Boolean(*b),
        Json::Number(n) => match n.as_i64() {
            Some(i) => Value::Integer(i),
            None => Value::Number(n.as_f64().unwrap_or(0.0)),
        },
        Json::String(s) => Value::String(lua.create_string(s)?),
        Json::Array(a) => {
            let t = lua.create_table_with_capacity(a.len(), 0)?;
            for (i, v) in a.iter().enumerate() {
                t.raw_set(i + 1, from_json(lua, v)?)?;
            }
            Value::Table(t)
        }
        Json::Object(o) => {
            let t = lua.create_table_with_capacity(0, o.len())?;
            for (k, v) in o {
                t.raw_set(k.as_str(), from_json(lua, v)?)?;
            }
            Value::Table(t)
        }
    })
}

/// Refuses a table with a key outside `allowed`, naming the keys.
pub fn known_keys(t: &Table, allowed: &[&str], what: &str) -> mlua::Result<()> {
    let unknown = unknown_keys(t, allowed)?;
    if unknown.is_empty() {
        return Ok(());
    }
    Err(mlua::Error::runtime(format!(
        "{what}: unknown key{} {} (known: {})",
        if unknown.len() == 1 { "" } else { "s" },
        unknown.join(", "),
        allowed.join(", ")
    )))
}

/// The certificate chain and session facts as a Lua table; each
/// certificate also has `pem`.
pub fn tls_table(lua: &Lua, tls: &TlsInfo) -> mlua::Result<Table> {
    let json = serde_json::to_value(tls).map_err(mlua::Error::external)?;
    let Value::Table(t) = from_json(lua, &json)? else { return Err(mlua::Error::runtime("tls is not a table")) };
    let chain: Table = t.raw_get("chain")?;
    for (i, der) in tls.der.iter().enumerate() {
        if let Ok(Value::Table(c)) = chain.raw_get::<Value>(i + 1) {
            c.raw_set("pem", pem(der))?;
            // nmap's view of it (subject_fields, pubkey, extensions, md5...).
            if let Some(serde_json::Value::Object(fields)) = crate::wire::x509_fields::fields(der) {
                for (k, v) in fields {
                    c.raw_set(k, from_json(lua, &v)?)?;
                }
            }
        }
    }
    Ok(t)
}

fn pem(der: &[u8]) -> String {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut s = String::from("-----BEGIN CERTIFICATE-----\n");
    for chunk in b64.as_bytes().chunks(64) {
        s.push_str(&String::from_utf8_lossy(chunk));
        s.push('\n');
    }
    s.push_str("-----END CERTIFICATE-----\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(code: &str) -> (Lua, Value) {
        let lua = Lua::new();
        let v = lua.load(code).eval::<Value>().unwrap();
        (lua, v)
    }

    #[test]
    fn tables_become_objects_and_arrays() {
        let lua = Lua::new();
        let v: Value =
            lua.load(r#"return { title = "x", n = 3, f = 1.5, list = {1, "two", true}, empty = {} }"#).eval().unwrap();
        let j = json(&v).unwrap();
        assert_eq!(j["title"], "x");
        assert_eq!(j["n"], 3);
        assert_eq!(j["f"], 1.5);
        assert_eq!(j["list"], serde_json::json!([1, "two", true]));
        assert_eq!(j["empty"], serde_json::json!([]));
        let back = from_json(&lua, &j).unwrap();
        assert_eq!(json(&back).unwrap(), j);
    }

    fn json(v: &Value) -> Result<Json, String> {
        to_json(v, &mut u64::MAX.clone()).map_err(|e| e.to_string())
    }

    #[test]
    fn garbage_is_refused_with_where_it_is() {
        let e = json(&eval("return { a = { b = function() end } }").1).unwrap_err();
        assert!(e.contains("value.a.b") && e.contains("function"), "{e}");
        let e = json(&eval("local t = {} t.self = t return t").1).unwrap_err();
        assert!(e.contains("deeper"), "{e}");
        let e = json(&eval("local t = {} for i = 1, 20000 do t[i] = i end return t").1).unwrap_err();
        assert!(e.contains("more than"), "{e}");
        assert!(json(&eval("return 0/0").1).is_err());
    }

    // Regression: one 64 KiB string referenced ten thousand times became
    // 655 MB of JSON; the allowance stops it after about 1 MiB of copies.
    #[test]
    fn repeated_references_are_charged_per_copy() {
        let (_lua, v) =
            eval(r#"local s = string.rep("x", 65536) local t = {} for i = 1, 9000 do t[i] = s end return t"#);
        let mut left = 1 << 20;
        assert_eq!(to_json(&v, &mut left), Err(ConvertError::TooLarge(1 << 20)));
        let (_lua, small) = eval(r#"return { a = string.rep("y", 1000), b = 2 }"#);
        let mut left = 1 << 20;
        let j = to_json(&small, &mut left).unwrap();
        assert_eq!(j["a"].as_str().unwrap().len(), 1000);
        let used = (1u64 << 20) - left;
        assert!((1000..1200).contains(&used), "charged {used}");
    }

    #[test]
    fn error_paths_stay_short_whatever_the_keys() {
        let (_lua, v) = eval(r#"return { [string.rep("k", 100000)] = { [string.rep("j", 100000)] = print } }"#);
        let e = json(&v).unwrap_err();
        assert!(e.len() < 400 && e.contains("not data"), "{} bytes: {}", e.len(), &e[..e.len().min(300)]);
    }

    #[test]
    fn metamethods_are_never_called() {
        let (_lua, v) = eval(
            r#"local t = setmetatable({ a = 1 }, {
                __index = function() while true do end end,
                __pairs = function() error("boom") end,
                __len = function() error("boom") end,
            })
            return t"#,
        );
        assert_eq!(json(&v).unwrap(), serde_json::json!({ "a": 1 }));
    }
}
