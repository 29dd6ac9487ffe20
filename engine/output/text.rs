//! Text for people: one line per discovery as it happens, a summary at the end.

use std::io::{self, BufWriter, Write};

use super::Sink;
use crate::findings::{Event, PortState, ServiceMethod};

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
            Event::Service(s) => {
                let tunnel = if s.tunnel.is_some() { "ssl/" } else { "" };
                let guess = if s.method == ServiceMethod::Probed { "" } else { "?" };
                write!(o, "Service on {}/{} on {}: {tunnel}{}{guess}", s.port, s.proto, s.ip, s.service)?;
                let words: Vec<&str> = [&s.product, &s.version].iter().filter_map(|f| f.as_deref()).collect();
                if !words.is_empty() {
                    write!(o, " {}", words.join(" "))?;
                }
                if let Some(info) = &s.info {
                    write!(o, " ({info})")?;
                }
                for (label, v) in [("Host", &s.hostname), ("OS", &s.os), ("Device", &s.device)] {
                    if let Some(v) = v {
                        write!(o, "; {label}: {v}")?;
                    }
                }
                writeln!(o)?;
                if let Some(tls) = &s.tls {
                    write!(o, "  TLS: {} {}", tls.version, tls.cipher)?;
                    if let Some(alpn) = &tls.alpn {
                        write!(o, ", ALPN {alpn}")?;
                    }
                    writeln!(o, ", {} certificate(s)", tls.chain.len())?;
                    if let Some(c) = tls.chain.first() {
                        writeln!(o, "  Certificate: {}; issuer: {}", c.subject, c.issuer)?;
                        if !c.san.is_empty() {
                            writeln!(o, "  Subject Alternative Names: {}", c.san.join(", "))?;
                        }
                        writeln!(o, "  Not valid before: {}; not valid after: {}", c.not_before, c.not_after)?;
                    }
                }
                Ok(())
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
