//! Text safe for a terminal.
//!
//! In: strings and bytes that may come from servers, plugins or file names.
//! Out: the same text with every character a terminal acts on written as a
//! visible escape (`\x1B`, `\u{202E}`). What always holds: nothing that
//! passes through [`screen`] or [`Screened`] can move the cursor, clear the
//! screen, set the window title, ring the bell or reorder text: C0 controls
//! (ESC, CR, BEL, backspace...), DEL, C1 controls (CSI is U+009B) and the
//! Unicode bidirectional and zero-width format characters are all escaped.
//! [`screen`] also escapes line breaks, so one value cannot fake a line.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::{self, Write};

/// Unicode format characters that reorder or hide text.
pub(super) fn is_format(c: char) -> bool {
    matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}')
}

fn escape(c: char, out: &mut String) {
    if (c as u32) < 0x100 {
        let _ = write!(out, "\\x{:02X}", c as u32);
    } else {
        let _ = write!(out, "\\u{{{:04X}}}", c as u32);
    }
}

fn screened(s: &str, keep: impl Fn(char) -> bool) -> Cow<'_, str> {
    let unsafe_char = |c: char| (c.is_control() || is_format(c)) && !keep(c);
    if !s.chars().any(unsafe_char) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if unsafe_char(c) {
            escape(c, &mut out);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// One value on one line: every control and format character escaped,
/// line breaks and tabs included.
pub fn screen(s: &str) -> Cow<'_, str> {
    screened(s, |_| false)
}

/// A block of text: as [`screen`], but line feeds and tabs are kept.
pub fn screen_text(s: &str) -> Cow<'_, str> {
    screened(s, |c| c == '\n' || c == '\t')
}

/// A writer that escapes, as [`screen_text`] does, whatever is written
/// through it: for messages and listings whose parts are not screened one
/// by one. Bytes that are not UTF-8 are escaped as `\xNN`.
pub struct Screened<W: Write>(pub W);

impl<W: Write> Write for Screened<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut out = String::with_capacity(buf.len());
        for chunk in buf.utf8_chunks() {
            out.push_str(&screen_text(chunk.valid()));
            for b in chunk.invalid() {
                let _ = write!(out, "\\x{b:02X}");
            }
        }
        self.0.write_all(out.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

/// Prints a line on stderr through [`Screened`].
#[macro_export]
macro_rules! tell {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!($crate::output::Screened(std::io::stderr().lock()), $($t)*);
    }};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_controls_are_escaped() {
        assert_eq!(screen("plain text: ok"), "plain text: ok");
        assert_eq!(screen("\x1b]0;owned\x07\x1b[2J"), "\\x1B]0;owned\\x07\\x1B[2J");
        assert_eq!(screen("a\r\nDiscovered open port 31337"), "a\\x0D\\x0ADiscovered open port 31337");
        assert_eq!(screen("\u{9b}31m red \u{7f}"), "\\x9B31m red \\x7F");
        assert_eq!(screen("evil\u{202E}txt.exe"), "evil\\u{202E}txt.exe");
        assert_eq!(screen_text("line\n\tnext\x1b"), "line\n\tnext\\x1B");
        let mut w = Screened(Vec::new());
        w.write_all(b"x\x1b[31my\n\xff").unwrap();
        assert_eq!(String::from_utf8(w.0).unwrap(), "x\\x1B[31my\n\\xFF");
    }
}
