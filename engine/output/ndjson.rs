//! NDJSON: one event a line, in the schema of DESIGN.md.
//!
//! JSON escapes C0 controls itself; C1 controls (CSI is U+009B) and the
//! Unicode characters that reorder text are written as `\uXXXX` escapes
//! too, so a line printed on a terminal (`-oJ -`) cannot drive it, and it
//! still parses to the same strings.

use std::io::{self, BufWriter, Write};

use super::Sink;
use crate::findings::Event;

pub struct Ndjson<W: Write> {
    out: BufWriter<W>,
}

impl<W: Write> Ndjson<W> {
    pub fn new(writer: W) -> Ndjson<W> {
        Ndjson { out: BufWriter::new(writer) }
    }
}

/// Characters left raw by JSON that a terminal acts on (outside strings
/// they cannot occur: JSON's own syntax is ASCII).
fn needs_escape(c: char) -> bool {
    matches!(c, '\u{7f}'..='\u{9f}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

impl<W: Write + Send> Sink for Ndjson<W> {
    fn record(&mut self, event: &Event) -> io::Result<()> {
        // The whole line goes to the writer in one piece, so a file cut off
        // by a kill ends at a line boundary.
        let mut line = serde_json::to_string(event).map_err(io::Error::from)?;
        if line.chars().any(needs_escape) {
            line = line.chars().fold(String::with_capacity(line.len() + 16), |mut s, c| {
                if needs_escape(c) {
                    s.push_str(&format!("\\u{:04x}", c as u32));
                } else {
                    s.push(c);
                }
                s
            });
        }
        line.push('\n');
        self.out.write_all(line.as_bytes())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::LogEvent;

    #[test]
    fn terminal_controls_left_raw_by_json_are_escaped() {
        let mut sink = Ndjson::new(Vec::new());
        let message = "\u{1b}[2J \u{9b}31m \u{202e}x \u{7f} é".to_string();
        let ev = Event::Log(LogEvent {
            scan_id: "s".into(),
            ip: [127, 0, 0, 1].into(),
            port: 1,
            plugin: "p".into(),
            message: message.clone(),
        });
        sink.record(&ev).unwrap();
        sink.flush().unwrap();
        let text = String::from_utf8(sink.out.into_inner().unwrap()).unwrap();
        assert!(text.is_ascii() || !text.chars().any(|c| c.is_control() && c != '\n'), "{text:?}");
        assert!(text.contains("\\u009b") && text.contains("\\u202e") && text.contains("\\u001b"), "{text}");
        let back: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
        assert_eq!(back["message"], message.as_str());
    }

    /// OS detection's and traceroute's events go out as `"type":"os"` and
    /// `"type":"trace"` lines and read back as they were.
    #[test]
    fn os_and_trace_events_make_a_round_trip() {
        use crate::output::report::sample::{lab_os, os_scan};
        let mut events: Vec<Event> =
            os_scan().into_iter().filter(|e| matches!(e, Event::Os(_) | Event::Trace(_))).collect();
        let fp = "SCAN(V=7.93%E=4)\nSEQ(CI=Z%II=I)";
        events.push(Event::Os(Box::new(lab_os("198.18.1.2", 37226, 2, Some(fp)))));
        assert_eq!(events.len(), 4);
        let mut sink = Ndjson::new(Vec::new());
        for e in &events {
            sink.record(e).unwrap();
        }
        sink.flush().unwrap();
        let text = String::from_utf8(sink.out.into_inner().unwrap()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(lines[0].starts_with("{\"type\":\"os\"") && lines[1].starts_with("{\"type\":\"trace\""), "{text}");
        assert!(lines[1].contains("\"hops\":[{\"ttl\":1},"), "a silent hop has only its TTL: {text}");
        assert!(lines[2].contains("\"hint\":{\"family\":\"Linux\""), "{text}");
        let back: Vec<Event> = lines.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(back, events);
    }
}
