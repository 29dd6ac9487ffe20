//! Plugin metadata: what a plugin file's table declares (`Meta`), how it is
//! checked when it is loaded, and the ids a plugin may not take.

use mlua::{Table, Value};

pub use crate::findings::{About, ABOUT_MAX, MAX_REMEDIATION};

use crate::plugins::sandbox::value::unknown_keys;

/// Plugin metadata as the file's table gives it.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Meta {
    pub id: String,
    pub description: String,
    pub categories: Vec<String>,
    pub ports: Vec<u16>,
    pub services: Vec<String>,
    pub portrule: bool,
    /// The `--script-args` keys the plugin reads.
    #[serde(default)]
    pub args: Vec<String>,
    /// What its findings are about: references (URLs), CVE and CWE ids,
    /// how to fix it, and free tags (SARIF rule metadata).
    #[serde(default)]
    pub about: About,
    /// `scope = "host"`: its results are about the host, not the port it
    /// ran on (nmap's host scripts, shown under "Host script results").
    #[serde(default)]
    pub host_scope: bool,
    /// Keys of its result's data whose values change from run to run (a
    /// date, a counter): `db diff` ignores them.
    #[serde(default)]
    pub volatile: Vec<String>,
}

impl Meta {
    /// What a cached entry must hold to be used: what [`check_table`] lets
    /// through (an edited cache file cannot smuggle in a reserved id).
    pub(crate) fn plausible(&self) -> bool {
        let name = is_name;
        name(&self.id)
            && !RESERVED_IDS.iter().any(|r| r.eq_ignore_ascii_case(&self.id))
            && self.description.len() <= MAX_DESCRIPTION
            && !self.categories.is_empty()
            && self.categories.len() <= 64
            && self.categories.iter().all(|c| name(c))
            && self.services.len() <= 64
            && self.services.iter().all(|s| name(s))
            && self.ports.len() <= 1024
            && self.args.len() <= ABOUT_MAX
            && self.args.iter().all(|a| name(a))
            && self.volatile.len() <= ABOUT_MAX
            && self.volatile.iter().all(|v| is_key(v))
            && self.about.plausible()
            && (!self.ports.is_empty() || !self.services.is_empty() || self.portrule)
    }
}

/// Words a `--script` expression reads as a category or keyword (nmap's
/// categories, and moonscan's keywords): no plugin may take one as its id.
pub const RESERVED_IDS: &[&str] = &[
    "all",
    "and",
    "or",
    "not",
    "default",
    "safe",
    "intrusive",
    "discovery",
    "version",
    "vuln",
    "auth",
    "brute",
    "broadcast",
    "dos",
    "exploit",
    "external",
    "fuzzer",
    "malware",
];

/// Longest description a plugin may have.
pub const MAX_DESCRIPTION: usize = 2000;

/// Every field a plugin table may have.
const PLUGIN_FIELDS: &[&str] = &[
    "id",
    "description",
    "categories",
    "ports",
    "services",
    "portrule",
    "scope",
    "run",
    "args",
    "volatile",
    "references",
    "cve",
    "cwe",
    "remediation",
    "tags",
];

pub(crate) fn check_table(t: &Table) -> crate::error::Result<Meta> {
    let bad = |m: String| crate::error::Error::new(crate::error::ErrorKind::Config, m);
    let unknown = unknown_keys(t, PLUGIN_FIELDS).map_err(|e| {
        crate::error::Error::with_source(crate::error::ErrorKind::Config, "reading the plugin table", e)
    })?;
    if !unknown.is_empty() {
        return Err(bad(format!(
            "unknown field{} {} (a plugin table has only {})",
            if unknown.len() == 1 { "" } else { "s" },
            unknown.join(", "),
            PLUGIN_FIELDS.join(", ")
        )));
    }
    let field = |name: &str| t.raw_get::<Value>(name).unwrap_or(Value::Nil);
    let string = |name: &str, required: bool| -> crate::error::Result<Option<String>> {
        match field(name) {
            Value::String(s) => Ok(Some(s.to_string_lossy())),
            Value::Nil if !required => Ok(None),
            Value::Nil => Err(bad(format!("field '{name}' is missing (it must be a string)"))),
            other => Err(bad(format!("field '{name}' must be a string, not a {}", other.type_name()))),
        }
    };
    // Bounded so that the metadata always fits its cache file (see
    // plugins::load_source_cached): a plugin cannot opt out of the cache.
    let list = |name: &str, max: usize| -> crate::error::Result<Vec<Value>> {
        match field(name) {
            Value::Nil => Ok(Vec::new()),
            Value::Table(l) => {
                let n = l.raw_len();
                if n > max {
                    return Err(bad(format!("field '{name}' has more than {max} entries")));
                }
                (1..=n)
                    .map(|i| {
                        l.raw_get::<Value>(i).map_err(|e| {
                            crate::error::Error::with_source(
                                crate::error::ErrorKind::Config,
                                "reading the plugin table",
                                e,
                            )
                        })
                    })
                    .collect()
            }
            other => Err(bad(format!("field '{name}' must be a list, not a {}", other.type_name()))),
        }
    };
    let id = string("id", true)?.unwrap_or_default();
    let valid = is_name;
    if !valid(&id) {
        return Err(bad(format!("field 'id' must be 1-64 letters, digits, '-', '_' or '.', not {id:?}")));
    }
    if RESERVED_IDS.iter().any(|r| r.eq_ignore_ascii_case(&id)) {
        return Err(bad(format!(
            "field 'id' is {id:?}, a category or keyword of `scripts` expressions; plugin ids cannot be one"
        )));
    }
    let description = string("description", true)?.unwrap_or_default();
    if description.len() > MAX_DESCRIPTION {
        return Err(bad(format!("field 'description' is longer than {MAX_DESCRIPTION} bytes")));
    }
    let mut categories = Vec::new();
    for v in list("categories", 64)? {
        match v {
            Value::String(s) if valid(&s.to_string_lossy()) => {
                categories.push(s.to_string_lossy().to_ascii_lowercase())
            }
            other => return Err(bad(format!("field 'categories' must hold category names, found {other:?}"))),
        }
    }
    if categories.is_empty() {
        return Err(bad("field 'categories' is missing or empty (e.g. { \"safe\", \"discovery\" })".to_string()));
    }
    let mut ports = Vec::new();
    for v in list("ports", 1024)? {
        match v {
            Value::Integer(p) if (1..=65535).contains(&p) => ports.push(p as u16),
            Value::Number(p) if p.fract() == 0.0 && (1.0..=65535.0).contains(&p) => ports.push(p as u16),
            other => return Err(bad(format!("field 'ports' must hold port numbers 1-65535, found {other:?}"))),
        }
    }
    let mut services = Vec::new();
    for v in list("services", 64)? {
        match v {
            Value::String(s) if valid(&s.to_string_lossy()) => services.push(s.to_string_lossy()),
            other => return Err(bad(format!("field 'services' must hold service names, found {other:?}"))),
        }
    }
    let portrule = match field("portrule") {
        Value::Function(_) => true,
        Value::Nil => false,
        other => return Err(bad(format!("field 'portrule' must be a function, not a {}", other.type_name()))),
    };
    if ports.is_empty() && services.is_empty() && !portrule {
        return Err(bad("the plugin says nowhere to run: give 'ports', 'services' or 'portrule'".to_string()));
    }
    match field("run") {
        Value::Function(_) => {}
        Value::Nil => return Err(bad("field 'run' is missing (it must be a function)".to_string())),
        other => return Err(bad(format!("field 'run' must be a function, not a {}", other.type_name()))),
    }
    let mut args = Vec::new();
    for v in list("args", ABOUT_MAX)? {
        match v {
            Value::String(s) if valid(&s.to_string_lossy()) => args.push(s.to_string_lossy()),
            other => {
                return Err(bad(format!("field 'args' must hold `script_settings.args` key names, found {other:?}")))
            }
        }
    }
    let mut volatile = Vec::new();
    for v in list("volatile", ABOUT_MAX)? {
        match v {
            Value::String(s) if is_key(&s.to_string_lossy()) => volatile.push(s.to_string_lossy()),
            other => {
                return Err(bad(format!(
                    "field 'volatile' must hold keys of the result (1-64 printable bytes), found {other:?}"
                )))
            }
        }
    }
    let about = read_about(t).map_err(bad)?;
    let host_scope = match field("scope") {
        Value::Nil => false,
        Value::String(s) if s.as_bytes().as_ref() == b"port" => false,
        Value::String(s) if s.as_bytes().as_ref() == b"host" => true,
        other => return Err(bad(format!("field 'scope' must be \"port\" or \"host\", not {other:?}"))),
    };
    Ok(Meta { id, description, categories, ports, services, portrule, args, about, host_scope, volatile })
}

/// Reads the fields of [`About`] from a plugin's table or a `ctx:finding`
/// table, checked: each list at most [`ABOUT_MAX`] entries of at most 512
/// bytes, CVE and CWE ids in their forms, tags as names. What is wrong is
/// said with the field's name.
pub(crate) fn read_about(t: &Table) -> std::result::Result<About, String> {
    let strings = |name: &str, ok: &dyn Fn(&str) -> bool, want: &str| -> std::result::Result<Vec<String>, String> {
        let items = match t.raw_get::<Value>(name).unwrap_or(Value::Nil) {
            Value::Nil => return Ok(Vec::new()),
            Value::Table(l) => l,
            other => return Err(format!("field '{name}' must be a list, not a {}", other.type_name())),
        };
        let n = items.raw_len();
        if n > ABOUT_MAX {
            return Err(format!("field '{name}' has more than {ABOUT_MAX} entries"));
        }
        let mut out = Vec::with_capacity(n);
        for i in 1..=n {
            match items.raw_get::<Value>(i).unwrap_or(Value::Nil) {
                Value::String(s) if s.as_bytes().len() <= 512 && ok(&s.to_string_lossy()) => {
                    out.push(s.to_string_lossy())
                }
                other => return Err(format!("field '{name}' must hold {want}, found {other:?}")),
            }
        }
        Ok(out)
    };
    let remediation = match t.raw_get::<Value>("remediation").unwrap_or(Value::Nil) {
        Value::Nil => None,
        Value::String(s) if s.as_bytes().len() <= MAX_REMEDIATION => Some(s.to_string_lossy()),
        Value::String(_) => return Err(format!("field 'remediation' is longer than {MAX_REMEDIATION} bytes")),
        other => return Err(format!("field 'remediation' must be a string, not a {}", other.type_name())),
    };
    Ok(About {
        references: strings("references", &|s| !s.is_empty(), "references (URLs)")?,
        cve: strings("cve", &About::is_cve, "CVE ids (CVE-2021-44228)")?,
        cwe: strings("cwe", &About::is_cwe, "CWE ids (CWE-79)")?,
        remediation,
        tags: strings("tags", &is_name, "tags (letters, digits, - _ .)")?,
    })
}

/// A key of a plugin's result (`volatile`): 1-64 bytes, no control
/// characters (nmap's keys have spaces and brackets: `Used CPU (sys)`).
fn is_key(s: &str) -> bool {
    !s.is_empty() && s.len() <= 64 && !s.chars().any(char::is_control)
}

/// A plugin id, category, service, `--script-args` key or tag: 1-64
/// letters, digits, `-`, `_` or `.`.
fn is_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
}
