//! A script result's text as NSE renders a table no text came with: every
//! entry on a line of its own, indented two spaces a level, list items
//! first, then `key: value` for named entries (a nested table's entries on
//! the lines below its key). The text starts with a line break, so under a
//! port it reads `| id: ` and then the entries, as nmap prints them.

use serde_json::Value;

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
        Value::String(s) => out.push_str(s),
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
            for (k, item) in map {
                if item.is_null() {
                    continue;
                }
                out.push('\n');
                out.push_str(indent);
                out.push_str(k);
                out.push_str(": ");
                entry(out, item, &deeper);
            }
        }
    }
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
}
