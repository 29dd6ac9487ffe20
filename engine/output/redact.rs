//! Secrets left out of the command line the outputs record.
//!
//! In: a command line as typed (program name first). Out: the same words
//! with two kinds of value replaced: what follows `--script-args` (plugin
//! arguments hold user names and passwords; it becomes `<redacted>`), and
//! the password of any URL (`--db postgres://user:secret@host/db` becomes
//! `postgres://user:***@host/db`, and a `password=` query parameter
//! `password=***`), whichever flag it follows or is joined to with `=`.
//!
//! What always holds: the builder's `command_line` passes what it is given
//! through [`command_line`], so every output and store (XML, normal,
//! grepable, NDJSON, SARIF, SQLite, PostgreSQL) records the redacted words;
//! redacting twice is redacting once; a URL whose password holds an `@`
//! (not percent-encoded) loses everything up to its last `@`, more than the
//! password rather than less.

use std::borrow::Cow;

/// What stands for a `--script-args` value.
pub const SCRIPT_ARGS: &str = "<redacted>";
/// What stands for a URL's password.
pub const PASSWORD: &str = "***";

/// The command line with `--script-args` values and URL passwords replaced.
pub fn command_line(args: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut hide = false;
    for a in args {
        if hide {
            out.push(SCRIPT_ARGS.to_string());
            hide = false;
        } else if a == "--script-args" {
            out.push(a.clone());
            hide = true;
        } else if a.starts_with("--script-args=") {
            out.push(format!("--script-args={SCRIPT_ARGS}"));
        } else {
            out.push(url(a).into_owned());
        }
    }
    out
}

/// `s` with the password of the URL in it (if any) replaced: the userinfo's
/// after its first `:`, and the value of each `password` query parameter.
/// A word without `://` is returned as it is.
pub fn url(s: &str) -> Cow<'_, str> {
    let Some(at) = s.find("://") else { return Cow::Borrowed(s) };
    let (head, rest) = s.split_at(at + 3);
    let mut rest = rest.to_string();
    // The userinfo ends at the last `@`: a password with a bare `@` in it is
    // hidden whole (PostgreSQL's own parser would split it at the first).
    if let Some(end) = rest.rfind('@') {
        if let Some(colon) = rest[..end].find(':') {
            if rest[colon + 1..end] != *PASSWORD {
                rest.replace_range(colon + 1..end, PASSWORD);
            }
        }
    }
    // The query: after the first `?` that follows the userinfo.
    let from = rest.rfind('@').map_or(0, |i| i + 1);
    let query_from = rest[from..].find('?').map(|i| from + i + 1).or_else(|| rest.find('?').map(|i| i + 1));
    if let Some(q) = query_from {
        let (before, query) = rest.split_at(q);
        let params: Vec<String> = query
            .split('&')
            .map(|p| match p.split_once('=') {
                Some((k, _)) if is_password_key(k) => format!("{k}={PASSWORD}"),
                _ => p.to_string(),
            })
            .collect();
        rest = format!("{before}{}", params.join("&"));
    }
    let out = format!("{head}{rest}");
    if out == s {
        Cow::Borrowed(s)
    } else {
        Cow::Owned(out)
    }
}

/// `password`, in any case and percent-encoded or not.
fn is_password_key(k: &str) -> bool {
    let mut decoded = Vec::with_capacity(k.len());
    let b = k.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let hex =
            b.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok()).and_then(|h| u8::from_str_radix(h, 16).ok());
        match (b[i], hex) {
            (b'%', Some(byte)) => {
                decoded.push(byte);
                i += 3;
            }
            (c, _) => {
                decoded.push(c);
                i += 1;
            }
        }
    }
    decoded.eq_ignore_ascii_case(b"password")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(words: &[&str]) -> Vec<String> {
        command_line(&words.iter().map(|w| w.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn url_passwords_are_hidden() {
        let cases = [
            ("postgres://u:hunter2@h/db", "postgres://u:***@h/db"),
            ("postgresql://u:hunter2@h:5432/db?sslmode=disable", "postgresql://u:***@h:5432/db?sslmode=disable"),
            ("--db=postgres://u:hunter2@h/db", "--db=postgres://u:***@h/db"),
            // A bare @ in the password: hidden up to the last @.
            ("postgres://u:hun@ter2@h/db", "postgres://u:***@h/db"),
            // A / or ? in the password.
            ("postgres://u:hu/n?ter2@h/db", "postgres://u:***@h/db"),
            ("postgres://u@h/db?password=hunter2", "postgres://u@h/db?password=***"),
            (
                "postgres://u@h/db?sslmode=disable&Pass%77ord=hunter2&x=1",
                "postgres://u@h/db?sslmode=disable&Pass%77ord=***&x=1",
            ),
            ("postgres://u@h/db?password=hun@ter2", "postgres://u@h/db?password=***"),
            ("postgres://u:a@h/db?password=hunter2", "postgres://u:***@h/db?password=***"),
            // Nothing to hide.
            ("postgres://u@h/db", "postgres://u@h/db"),
            ("postgres://h:5432/db", "postgres://h:5432/db"),
            ("scan.db", "scan.db"),
            ("198.18.0.2", "198.18.0.2"),
            ("u:p@h", "u:p@h"),
        ];
        for (given, want) in cases {
            assert_eq!(url(given), want, "{given}");
            assert_eq!(url(want), want, "redacting twice is redacting once: {want}");
        }
    }

    #[test]
    fn script_args_values_and_url_passwords_leave_the_command_line() {
        let got = line(&[
            "moonscan",
            "--script-args",
            "user=a,pass=hunter2",
            "--script-args=pass=hunter2",
            "--db",
            "postgres://u:hunter2@127.0.0.1/x",
            "--db=postgresql://u:hunter2@h/x",
            "-p",
            "22",
            "127.0.0.1",
        ]);
        assert!(got.iter().all(|w| !w.contains("hunter2")), "{got:?}");
        assert_eq!(
            got.join(" "),
            "moonscan --script-args <redacted> --script-args=<redacted> --db postgres://u:***@127.0.0.1/x \
             --db=postgresql://u:***@h/x -p 22 127.0.0.1"
        );
        assert_eq!(command_line(&got), got, "redacting twice is redacting once");
        // A trailing --script-args with no value hides nothing else.
        assert_eq!(line(&["moonscan", "--script-args"]), ["moonscan", "--script-args"]);
    }
}
