//! Lua values to JSON and back, with limits.
//!
//! In: whatever a plugin hands the host (finding data, return values), or
//! JSON the host gives a plugin (the TLS chain). Out: `serde_json::Value`,
//! or Lua tables. What always holds: tables are read raw (no metamethod is
//! ever called, so a table whose `__index` or `__pairs` loops or errors is
//! read like any other), depth, size and string length are bounded, and a
//! value JSON cannot hold (a function, a userdata, a cycle past the depth)
//! is an error naming where it was found.

use mlua::{Lua, Table, Value};
use serde_json::{Map, Value as Json};

/// Deepest nesting of tables converted.
pub const MAX_DEPTH: usize = 16;
/// Most values (tables, strings, numbers...) in one converted value.
pub const MAX_NODES: usize = 10_000;
/// Longest string kept; longer ones are an error.
pub const MAX_STRING: usize = 64 * 1024;

/// Converts a Lua value to JSON.
pub fn to_json(v: &Value) -> Result<Json, String> {
    let mut nodes = 0;
    convert(v, 0, &mut nodes, "value")
}

fn convert(v: &Value, depth: usize, nodes: &mut usize, at: &str) -> Result<Json, String> {
    *nodes += 1;
    if *nodes > MAX_NODES {
        return Err(format!("more than {MAX_NODES} values"));
    }
    Ok(match v {
        Value::Nil => Json::Null,
        Value::Boolean(b) => Json::Bool(*b),
        Value::Integer(i) => Json::from(*i),
        Value::Number(n) if n.is_finite() && n.fract() == 0.0 && n.abs() < 9.0e15 => Json::from(*n as i64),
        Value::Number(n) => serde_json::Number::from_f64(*n).map(Json::Number).ok_or(format!("{at} is {n}"))?,
        Value::String(s) => {
            let b = s.as_bytes();
            if b.len() > MAX_STRING {
                return Err(format!("{at} is a string longer than {MAX_STRING} bytes"));
            }
            Json::String(String::from_utf8_lossy(&b).into_owned())
        }
        Value::Table(t) => {
            if depth >= MAX_DEPTH {
                return Err(format!("{at} is nested deeper than {MAX_DEPTH} tables"));
            }
            table(t, depth, nodes, at)?
        }
        other => return Err(format!("{at} is a {}, which is not data", other.type_name())),
    })
}

fn table(t: &Table, depth: usize, nodes: &mut usize, at: &str) -> Result<Json, String> {
    // Raw iteration: pairs() uses lua_next and never calls __pairs or __index.
    let mut entries: Vec<(Value, Value)> = Vec::new();
    for pair in t.clone().pairs::<Value, Value>() {
        let pair = pair.map_err(|e| format!("{at}: {e}"))?;
        entries.push(pair);
        if entries.len() > MAX_NODES {
            return Err(format!("{at} has more than {MAX_NODES} entries"));
        }
    }
    let n = entries.len();
    // An empty table is an empty list: plugins build lists far more often than maps.
    let is_array = entries.iter().all(|(k, _)| matches!(k, Value::Integer(i) if *i >= 1 && (*i as usize) <= n));
    if is_array {
        let mut items = vec![Json::Null; n];
        for (k, v) in &entries {
            if let Value::Integer(i) = k {
                items[*i as usize - 1] = convert(v, depth + 1, nodes, &format!("{at}[{i}]"))?;
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
            other => return Err(format!("{at} has a {} as a key", other.type_name())),
        };
        let val = convert(v, depth + 1, nodes, &format!("{at}.{key}"))?;
        map.insert(key, val);
    }
    Ok(Json::Object(map))
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
        let j = to_json(&v).unwrap();
        assert_eq!(j["title"], "x");
        assert_eq!(j["n"], 3);
        assert_eq!(j["f"], 1.5);
        assert_eq!(j["list"], serde_json::json!([1, "two", true]));
        assert_eq!(j["empty"], serde_json::json!([]));
        let back = from_json(&lua, &j).unwrap();
        assert_eq!(to_json(&back).unwrap(), j);
    }

    #[test]
    fn garbage_is_refused_with_where_it_is() {
        let e = to_json(&eval("return { a = { b = function() end } }").1).unwrap_err();
        assert!(e.contains("value.a.b") && e.contains("function"), "{e}");
        let e = to_json(&eval("local t = {} t.self = t return t").1).unwrap_err();
        assert!(e.contains("deeper"), "{e}");
        let e = to_json(&eval("local t = {} for i = 1, 20000 do t[i] = i end return t").1).unwrap_err();
        assert!(e.contains("more than"), "{e}");
        assert!(to_json(&eval("return 0/0").1).is_err());
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
        assert_eq!(to_json(&v).unwrap(), serde_json::json!({ "a": 1 }));
    }
}
