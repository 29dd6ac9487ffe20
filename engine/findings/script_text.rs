//! A script result's text as NSE renders a table no text came with: every
//! entry on a line of its own, indented two spaces a level, list items
//! first, then `key: value` for named entries (a nested table's entries on
//! the lines below its key). The text starts with a line break, so under a
//! port it reads `| id: ` and then the entries, as nmap prints them.
//! What always holds: each key and each string value is one line (its
//! control characters, line breaks included, written as `\xNN`), so a
//! value from a server cannot start a line of its own in any output.

use serde_json::Value;

pub use crate::text::one_line;

/// NSE's rendering of `v` (a scalar is its text alone).
pub fn render(v: &Value) -> String {
    let mut out = String::new();
    entry(&mut out, v, "  ");
    out
}

fn entry(out: &mut String, v: &Value, indent: &str) {
    match v {
        Value::Null => {}
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => out.push_str(&one_line(s)),
        Value::Array(items) => {
            let deeper = format!("{indent}  ");
            for item in items {
                out.push('\n');
                out.push_str(indent);
                entry(out, item, &deeper);
            }
        }
        Value::Object(map) => {
            let deeper = format!("{indent}  ");
            for (k, item) in nse_entries(map) {
                if item.is_null() {
                    continue;
                }
                out.push('\n');
                out.push_str(indent);
                if let Some(k) = k {
                    out.push_str(&one_line(k));
                    out.push_str(": ");
                }
                entry(out, item, &deeper);
            }
        }
    }
}

/// A table's entries as NSE shows them: a Lua table with both list items and
/// named keys reaches JSON as an object whose list keys are "1", "2"...;
/// the list (keys 1 to n, each there, as Lua's length counts them) comes
/// first, in order and without keys, as nmap writes a table's array part,
/// then every other key by name (rpcinfo's program number 100000 keeps its
/// key, as in nmap's output). A plugin's own string keys "1", "2"... read
/// the same way: JSON cannot tell them apart.
pub fn nse_entries(map: &serde_json::Map<String, Value>) -> Vec<(Option<&str>, &Value)> {
    let mut listed = Vec::new();
    while let Some(v) = map.get(&(listed.len() + 1).to_string()) {
        listed.push((None, v));
    }
    let n = listed.len();
    // "1" to "n" as written from an integer: no sign, no leading zero.
    let in_list = |k: &str| {
        n > 0
            && !k.starts_with('0')
            && k.bytes().all(|b| b.is_ascii_digit())
            && k.parse::<usize>().is_ok_and(|i| i <= n)
    };
    listed.extend(map.iter().filter(|(k, _)| !in_list(k)).map(|(k, v)| (Some(k.as_str()), v)));
    listed
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tables_render_as_nse_renders_them() {
        assert_eq!(render(&json!("plain")), "plain");
        assert_eq!(
            render(&json!({"Version": "7.0.15", "Mode": "standalone"})),
            "\n  Mode: standalone\n  Version: 7.0.15"
        );
        assert_eq!(render(&json!(["GET", "HEAD"])), "\n  GET\n  HEAD");
        assert_eq!(
            render(&json!({"clients": {"connected": 1, "tls": false}, "list": ["a", {"k": 2}]})),
            "\n  clients: \n    connected: 1\n    tls: false\n  list: \n    a\n    \n      k: 2"
        );
        assert_eq!(render(&json!({"gone": null, "x": 1.5})), "\n  x: 1.5");
    }

    #[test]
    fn a_value_or_key_with_a_line_break_stays_on_its_line() {
        let v = json!({"cn": "a\n|Discovered open port 31337/tcp\r\x1b", "k\ney": ["b\nc"]});
        assert_eq!(render(&v), "\n  cn: a\\x0A|Discovered open port 31337/tcp\\x0D\\x1B\n  k\\x0Aey: \n    b\\x0Ac");
        assert_eq!(one_line("plain"), "plain");
        assert_eq!(one_line("\u{9b}\0\t"), "\\x9B\\x00\\x09");
    }

    #[test]
    fn list_items_of_a_mixed_table_come_first_without_keys() {
        // {"STARTTLS Failed", info = {...}} in Lua: keys 1 to 3 are the list
        // (in order: "3" after "2"); 5 is past a gap, "01" and "x1" are names.
        let v = json!({"info": {"lang": "en"}, "1": "first", "3": "third", "2": "second", "5": "fifth", "01": "a", "x1": "b"});
        assert_eq!(render(&v), "\n  first\n  second\n  third\n  01: a\n  5: fifth\n  info: \n    lang: en\n  x1: b");
        let map = v.as_object().unwrap();
        let keys: Vec<_> = nse_entries(map).into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, [None, None, None, Some("01"), Some("5"), Some("info"), Some("x1")]);
        // A table keyed by numbers alone, none of them 1 (rpcinfo's programs), keeps its keys.
        let rpc = json!({"100000": {"tcp": 111}, "100003": {"tcp": 2049}});
        assert_eq!(render(&rpc), "\n  100000: \n    tcp: 111\n  100003: \n    tcp: 2049");
    }
}
