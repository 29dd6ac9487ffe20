//! nmap's library-wide `--script-args` keys: which the engine honours for
//! every plugin, and which it refuses with the reason.
//!
//! In: a key given with `--script-args` that no selected plugin declares in
//! its `args`. Out: [`Known::Engine`] when the engine reads it itself (the
//! HTTP user agent of `ctx.http`), [`Known::Refused`] with a one-line reason
//! when nmap users pass it for a meaning moonscan does not have (a login no
//! plugin makes, a cache moonscan does not keep), `None` for a key nmap's
//! libraries do not read (the caller notes it as unread). A plugin that
//! declares a refused key reads it, and then it is not refused.

/// What the engine makes of an undeclared key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Known {
    /// Read by the engine for every plugin.
    Engine,
    /// Not honoured; the reason, said instead of ignoring it.
    Refused(&'static str),
}

/// The User-Agent `ctx.http` sends: `http.useragent`, as nmap's http library.
pub const USER_AGENT: &str = "http.useragent";

const NO_PIPELINE: &str = "ctx.http sends one request a connection and never pipelines";
const NO_MYSQL_LOGIN: &str =
    "no moonscan plugin logs in to MySQL (mysql-info reads the greeting, mysql-empty-password tries empty passwords only)";
const NO_SMB_LOGIN: &str = "no moonscan plugin logs in to SMB (smb-protocols and smb2-* only negotiate)";
const NO_BRUTE: &str = "moonscan has no brute-force plugins (nmap's brute and unpwdb libraries)";

/// Keys refused by name.
const REFUSED: &[(&str, &str)] = &[
    ("http.max-cache-size", "ctx.http keeps no cache (every request is sent), so there is nothing to size"),
    (
        "http.max-body-size",
        "ctx.http reads at most 1 MiB of a response (a plugin asks for less with `max`); the command line does not set it",
    ),
    ("http.truncated-ok", "ctx.http always hands a plugin what it read, cut at its limit"),
    ("http.pipeline", NO_PIPELINE),
    ("http.max-pipeline", NO_PIPELINE),
    ("mysqluser", NO_MYSQL_LOGIN),
    ("mysqlpass", NO_MYSQL_LOGIN),
    ("smbuser", NO_SMB_LOGIN),
    ("smbpass", NO_SMB_LOGIN),
    ("smbdomain", NO_SMB_LOGIN),
    ("smbhash", NO_SMB_LOGIN),
    ("smbtype", NO_SMB_LOGIN),
    ("smbnoguest", NO_SMB_LOGIN),
    ("userdb", NO_BRUTE),
    ("passdb", NO_BRUTE),
    ("newtargets", "plugins cannot add targets to a scan; give them on the command line"),
];

/// Key families refused by prefix.
const REFUSED_PREFIXES: &[(&str, &str)] = &[
    ("brute.", NO_BRUTE),
    ("unpwdb.", NO_BRUTE),
    ("creds.", "no moonscan plugin takes logins from nmap's creds library"),
    ("vulns.", "moonscan reports vulnerabilities as findings with a severity, not through nmap's vulns library"),
];

/// The `key=value` items of a `--script-args` text, as nmap splits them:
/// at commas and line breaks outside quotes and braces; a value in double
/// or single quotes loses them (and may hold commas: a browser's
/// User-Agent), a `{...}` table stays as written; `#` starts a comment line
/// (in a file). Errors name the bad item.
pub fn parse(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut items = Vec::new();
    let (mut depth, mut quote, mut start) = (0usize, None, 0usize);
    for (i, c) in text.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '{') => depth += 1,
            (None, '}') => depth = depth.saturating_sub(1),
            (None, ',' | '\n') if depth == 0 => {
                items.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if let Some(q) = quote {
        return Err(format!("'{}' has no closing {q}", text[start..].trim()));
    }
    items.push(&text[start..]);
    let mut out = Vec::new();
    for item in items.into_iter().map(str::trim).filter(|i| !i.is_empty() && !i.starts_with('#')) {
        let (k, v) = item.split_once('=').unwrap_or((item, ""));
        let (k, v) = (k.trim(), v.trim());
        if k.is_empty() {
            return Err(format!("'{item}' is not key=value"));
        }
        let unquoted = [('"', '"'), ('\'', '\'')]
            .iter()
            .find_map(|(a, b)| v.strip_prefix(*a).and_then(|v| v.strip_suffix(*b)))
            .filter(|_| v.len() >= 2)
            .unwrap_or(v);
        out.push((k.to_string(), unquoted.to_string()));
    }
    Ok(out)
}

/// What the engine makes of `key` when no selected plugin declares it.
pub fn known(key: &str) -> Option<Known> {
    if key == USER_AGENT {
        return Some(Known::Engine);
    }
    REFUSED
        .iter()
        .find(|(k, _)| *k == key)
        .or_else(|| REFUSED_PREFIXES.iter().find(|(p, _)| key.starts_with(p)))
        .map(|(_, why)| Known::Refused(why))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(text: &str) -> Vec<(String, String)> {
        parse(text).unwrap()
    }

    #[test]
    fn items_split_at_commas_outside_quotes_and_braces() {
        let p = |k: &str, v: &str| (k.to_string(), v.to_string());
        assert_eq!(pairs("a=1, b = 2 ,c"), [p("a", "1"), p("b", "2"), p("c", "")]);
        assert_eq!(
            pairs(r#"http.useragent="Mozilla/5.0 (KHTML, like Gecko)",x='1,2'"#),
            [p("http.useragent", "Mozilla/5.0 (KHTML, like Gecko)"), p("x", "1,2")]
        );
        assert_eq!(pairs("t={a,b},u=1\n# note\nv=2"), [p("t", "{a,b}"), p("u", "1"), p("v", "2")]);
        // A lone quote is a value, not an opening.
        assert_eq!(pairs("q=\"\"").len(), 1);
        assert!(parse("a=\"open").unwrap_err().contains("no closing \""));
        assert!(parse("=1").unwrap_err().contains("not key=value"));
    }

    #[test]
    fn nmaps_common_keys_are_honoured_or_refused_and_others_left_to_the_caller() {
        assert_eq!(known("http.useragent"), Some(Known::Engine));
        for k in ["mysqluser", "smbpass", "http.max-cache-size", "brute.firstonly", "creds.global", "unpwdb.timelimit"]
        {
            let Some(Known::Refused(why)) = known(k) else { panic!("{k} is not refused") };
            assert!(!why.is_empty() && !why.contains('\n'), "{k}: {why:?}");
        }
        // Keys of plugins (declared by them) and unknown ones: the caller's.
        for k in ["ssh_hostkey", "smtp.domain", "http", "brute", "mysqlusers", "xyz"] {
            assert_eq!(known(k), None, "{k}");
        }
    }
}
