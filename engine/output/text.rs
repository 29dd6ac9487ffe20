//! Text for people: one line per discovery as it happens, a summary at the end.

use std::io::{self, BufWriter, Write};

use super::Sink;
use crate::findings::{Event, PortState};

pub struct Text<W: Write> {
    out: BufWriter<W>,
    reasons: bool,
}

impl<W: Write> Text<W> {
    pub fn new(writer: W) -> Text<W> {
        Text { out: BufWriter::new(writer), reasons: false }
    }

    /// Also say why each port has its state (nmap's `--reason`).
    pub fn with_reasons(mut self, on: bool) -> Text<W> {
        self.reasons = on;
        self
    }
}

impl<W: Write + Send> Sink for Text<W> {
    fn record(&mut self, event: &Event) -> io::Result<()> {
        let o = &mut self.out;
        match event {
            Event::ScanStart(s) => writeln!(
                o,
                "Starting moonscan {} at {} ({} probes planned, seed {})",
                env!("CARGO_PKG_VERSION"),
                s.started,
                s.probes_planned,
                s.seed
            ),
            Event::Port(p) => {
                let state = match p.state {
                    PortState::Open => "open",
                    PortState::Closed => "closed",
                    PortState::Filtered => "filtered",
                };
                write!(o, "Discovered {state} port {}/{} on {}", p.port, p.proto, p.ip)?;
                match (self.reasons, p.ttl) {
                    (true, Some(ttl)) => writeln!(o, " ({}, ttl {ttl})", p.reason),
                    (true, None) => writeln!(o, " ({})", p.reason),
                    (false, _) => writeln!(o),
                }
            }
            Event::Error(e) => {
                let at = match (e.ip, e.port) {
                    (Some(ip), Some(port)) => format!(" {}", std::net::SocketAddr::new(ip, port)),
                    (Some(ip), None) => format!(" {ip}"),
                    _ => String::new(),
                };
                writeln!(o, "Error{at}: {}", e.message)
            }
            Event::ScanEnd(e) => writeln!(
                o,
                "moonscan done{}: {} probes sent, {} open, {} closed, {} filtered, {} errors in {:.2} s",
                if e.interrupted { " (interrupted)" } else { "" },
                e.probes_sent,
                e.open,
                e.closed,
                e.filtered,
                e.errors,
                e.elapsed
            ),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}
