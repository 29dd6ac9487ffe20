//! Text made safe for nmap's XML: element content, attribute values and
//! comments.
//!
//! In: any string a plugin or a server put in an event. Out: the same text
//! as XML 1.0 takes it. What always holds: markup characters, line breaks
//! and tabs become references; the characters XML 1.0 forbids even escaped
//! are dropped; DEL, C1 controls and the characters that reorder text become
//! references, so `-oX -` on a terminal cannot drive it; no `--` is left in
//! the document. A leaf of output/ (it takes only screen.rs's list of
//! format characters), shared by the XML report and the OS and trace parts
//! written into it.

use std::borrow::Cow;
use std::fmt::Write as _;

use super::screen::is_format;

/// Text for an XML attribute value or element content: markup characters,
/// line breaks and tabs as references; characters XML 1.0 forbids dropped;
/// DEL, C1 controls and the characters that reorder text as references, so
/// `-oX -` on a terminal cannot drive it.
pub(super) fn esc(s: &str) -> Cow<'_, str> {
    let plain =
        |c: char| !matches!(c, '&' | '<' | '>' | '"' | '\'') && !c.is_control() && !forbidden(c) && !is_format(c);
    if s.chars().all(plain) && !s.contains("--") {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        match c {
            // No "--" in the document, as nmap writes it (it cannot end
            // a comment then): a '-' right after one written is a reference.
            '-' if out.ends_with('-') => out.push_str("&#45;"),
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#xa;"),
            '\r' => out.push_str("&#xd;"),
            '\t' => out.push_str("&#x9;"),
            c if forbidden(c) => {}
            c if c.is_control() || is_format(c) => {
                let _ = write!(out, "&#x{:x};", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Characters XML 1.0 does not allow anywhere, not even as references.
pub(super) fn forbidden(c: char) -> bool {
    matches!(c, '\u{0}'..='\u{8}' | '\u{b}' | '\u{c}' | '\u{e}'..='\u{1f}' | '\u{fffe}' | '\u{ffff}')
}

/// Text for inside `<!-- -->`: references mean nothing there, so this only
/// keeps the comment legal (no `--`, no forbidden characters), as nmap does
/// by writing the second `-` of a pair as `&#45;`.
pub(super) fn comment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut prev = ' ';
    for c in s.chars() {
        if forbidden(c) {
            continue;
        }
        if c == '-' && prev == '-' {
            out.push_str("&#45;");
        } else {
            out.push(c);
        }
        prev = c;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_controls_are_references() {
        assert_eq!(esc("a\u{9b}31m\u{7f}\u{202e}b\u{1b}"), "a&#x9b;31m&#x7f;&#x202e;b");
        assert_eq!(esc("-rw-r--r-- a---b"), "-rw-r-&#45;r-&#45; a-&#45;-b");
        assert_eq!(esc("-\u{0}-"), "-&#45;", "a character left out does not part two dashes");
    }
}
