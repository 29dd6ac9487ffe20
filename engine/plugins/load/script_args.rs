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
/// nmap's name for SNI, over the target's own name (plugins' TLS only).
pub const SERVERNAME: &str = "tls.servername";

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
/// at commas and line breaks outside quotes and braces. A value that
/// starts with a double or single quote runs to the matching quote (and
/// may hold commas: a browser's User-Agent) and loses them; a quote
/// elsewhere is a character (`O'Reilly`). A value that starts with `{`
/// is a table, kept as written up to its matching `}`. A line that starts
/// with `#` is a comment (in a file). Errors name the bad item's key, never
/// its value (values may be secrets).
pub fn parse(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.trim_start().starts_with('#')) {
        let mut rest = line;
        loop {
            let (item, tail) = next_item(rest)?;
            let item = item.trim();
            if !item.is_empty() {
                let (k, v) = item.split_once('=').unwrap_or((item, ""));
                let (k, v) = (k.trim(), v.trim());
                if k.is_empty() {
                    return Err("an item has no key (key=value)".into());
                }
                let quoted = [('"', '"'), ('\'', '\'')]
                    .iter()
                    .find_map(|(a, b)| v.strip_prefix(*a).and_then(|v| v.strip_suffix(*b)))
                    .filter(|_| v.len() >= 2);
                out.push((k.to_string(), quoted.unwrap_or(v).to_string()));
            }
            match tail {
                Some(t) => rest = t,
                None => break,
            }
        }
    }
    Ok(out)
}

/// The first item of `s` (up to a comma outside a quoted or braced value)
/// and what follows the comma, if one came.
fn next_item(s: &str) -> Result<(&str, Option<&str>), String> {
    let key = |upto: usize| s[..upto].split('=').next().unwrap_or("").trim().to_string();
    let mut i = 0;
    let bytes = s.as_bytes();
    while i < bytes.len() {
        match bytes[i] {
            b',' => return Ok((&s[..i], Some(&s[i + 1..]))),
            b'=' => {
                // A value: quoted or braced when it starts so.
                let start = i + 1 + (s[i + 1..].len() - s[i + 1..].trim_start().len());
                match bytes.get(start) {
                    Some(&q @ (b'"' | b'\'')) => match s[start + 1..].find(q as char) {
                        Some(end) => i = start + 1 + end + 1,
                        None => return Err(format!("the value of {} has no closing {}", key(i), q as char)),
                    },
                    Some(b'{') => {
                        let mut depth = 0usize;
                        let mut j = start;
                        loop {
                            match bytes.get(j) {
                                Some(b'{') => depth += 1,
                                Some(b'}') => {
                                    depth -= 1;
                                    if depth == 0 {
                                        break;
                                    }
                                }
                                Some(_) => {}
                                None => return Err(format!("the value of {} has no closing }}", key(i))),
                            }
                            j += 1;
                        }
                        i = j + 1;
                    }
                    _ => i += 1,
                }
                continue;
            }
            _ => i += 1,
        }
    }
    Ok((s, None))
}

/// What the engine makes of `key` when no selected plugin declares it.
pub fn known(key: &str) -> Option<Known> {
    if key == USER_AGENT || key == SERVERNAME {
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
        assert_eq!(pairs("t={a,{b}},u=1\n# note, x=1\nv=2"), [p("t", "{a,{b}}"), p("u", "1"), p("v", "2")]);
        assert_eq!(pairs("q=\"\""), [p("q", "")]);
        // A quote or brace inside a value is a character; a comment line
        // is skipped whole, apostrophes and commas included.
        assert_eq!(pairs("ua=O'Reilly,b=x{y"), [p("ua", "O'Reilly"), p("b", "x{y")]);
        assert_eq!(pairs("# don't, b=1\nc=2"), [p("c", "2")]);
        // Errors name the key, never the value (it may be a secret).
        let e = parse("pass=\"s3cret,user=x").unwrap_err();
        assert!(e.contains("the value of pass has no closing \"") && !e.contains("s3cret"), "{e}");
        let e = parse("a={x,b=2").unwrap_err();
        assert!(e.contains("the value of a has no closing }"), "{e}");
        assert!(parse("=1").unwrap_err().contains("no key"));
    }

    #[test]
    fn nmaps_common_keys_are_honoured_or_refused_and_others_left_to_the_caller() {
        assert_eq!(known("http.useragent"), Some(Known::Engine));
        assert_eq!(known("tls.servername"), Some(Known::Engine));
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
