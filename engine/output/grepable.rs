//! nmap's grepable output (`-oG`): one line per host for grep, awk and cut.
//!
//! In: the scan's events. Out: the `# moonscan VERSION scan initiated ...
//! as: ARGS` line at the first event; at close, per host (in address
//! order) `Host: IP ()\tStatus: Up` and `Host: IP ()\tPorts: ` with the
//! ports in number order, then `# moonscan done at ...`. Each port is
//! nmap's `port/state/protocol/owner/service/rpc info/version/` with the
//! owner and RPC fields empty, the service named as in the normal output
//! (`ssl/http` written `ssl|http`, `?` for a guess) and, as nmap does, `/`
//! inside the service and version fields replaced by `|` so the fields
//! still split on `/`. A field never holds a line break or tab (control
//! characters become spaces), so every host stays on its two lines. Times
//! are UTC.

use std::io::{self, BufWriter, Write};

use super::xml::{ctime, Collected};
use super::Sink;
use crate::findings::Event;

/// nmap's grepable output, written to `writer`.
pub struct Grepable<W: Write> {
    out: BufWriter<W>,
    scan: Collected,
    head: bool,
    closed: bool,
}

impl<W: Write> Grepable<W> {
    pub fn new(writer: W) -> Self {
        Grepable { out: BufWriter::new(writer), scan: Collected::default(), head: false, closed: false }
    }

    fn write_head(&mut self) -> io::Result<()> {
        self.head = true;
        writeln!(
            self.out,
            "# moonscan {} scan initiated {} as: {}",
            env!("CARGO_PKG_VERSION"),
            ctime(self.scan.start_secs() as i64),
            field(&self.scan.args_line())
        )
    }

    fn write_body(&mut self) -> io::Result<()> {
        let version_scan = self.scan.version_scan();
        let mut text = String::new();
        for host in self.scan.hosts() {
            let ip = host.ip;
            text.push_str(&format!("Host: {ip} ()\tStatus: Up\nHost: {ip} ()\tPorts: "));
            let ports: Vec<String> = host
                .ports
                .iter()
                .map(|p| {
                    let service =
                        if p.has_service_name() { field(&p.service_column(version_scan)) } else { String::new() };
                    format!(
                        "{}/{}/{}//{}//{}/",
                        p.port,
                        p.state_str(),
                        p.proto,
                        service.replace('/', "|"),
                        field(&p.full_version()).replace('/', "|")
                    )
                })
                .collect();
            text.push_str(&ports.join(", "));
            text.push('\n');
            self.out.write_all(text.as_bytes())?;
            text.clear();
        }
        text.push_str(&format!(
            "# moonscan done at {} -- {} scanned in {:.2} seconds\n",
            ctime(self.scan.end_secs() as i64),
            self.scan.hosts_phrase(),
            self.scan.elapsed()
        ));
        self.out.write_all(text.as_bytes())
    }
}

impl<W: Write + Send> Sink for Grepable<W> {
    fn record(&mut self, event: &Event) -> io::Result<()> {
        self.scan.record(event);
        if !self.head {
            self.write_head()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    fn close(&mut self) -> io::Result<()> {
        if !self.closed {
            self.closed = true;
            if !self.head {
                self.write_head()?;
            }
            self.write_body()?;
        }
        self.out.flush()
    }
}

/// A field on one line: control characters (line breaks, tabs) as spaces.
fn field(s: &str) -> String {
    s.chars().map(|c| if c.is_control() { ' ' } else { c }).collect()
}

#[cfg(test)]
mod tests {
    use super::super::xml::sample::*;
    use super::*;
    use crate::findings::PortState;

    fn render(events: &[Event]) -> String {
        let mut buf = Vec::new();
        {
            let mut sink = Grepable::new(&mut buf);
            for e in events {
                sink.record(e).unwrap();
            }
            sink.close().unwrap();
            sink.close().unwrap();
        }
        String::from_utf8(buf).unwrap()
    }

    #[test]
    fn a_scan_greps_like_nmap() {
        let text = render(&scan());
        let want = "\
# moonscan 0.1.0 scan initiated Sat Nov 21 16:41:03 2026 as: moonscan -sV -sC -p 22,80,443,8080 198.18.0.2 198.18.0.10
Host: 198.18.0.2 ()\tStatus: Up
Host: 198.18.0.2 ()\tPorts: 22/open/tcp//ssh//OpenSSH 9.2p1 Debian 2+deb12u10 (protocol 2.0)/, 80/closed/tcp//http///, 443/open/tcp//ssl|http//nginx 1.22.1/
Host: 198.18.0.10 ()\tStatus: Up
Host: 198.18.0.10 ()\tPorts: 8080/open/tcp//http-proxy?///
# moonscan done at Sat Nov 21 16:41:04 2026 -- 2 IP addresses (2 hosts up) scanned in 1.50 seconds
";
        assert_eq!(text, want);
    }

    #[test]
    fn slashes_and_line_breaks_cannot_break_the_fields() {
        let mut svc = service("198.18.0.2", 7005, "x/y", Some("Prod/uct\nline"), Some("1/2\t3"));
        svc.info = Some("a/b".into());
        let evs = vec![
            start("moonscan -sV -p 7005 198.18.0.2", 1),
            port("198.18.0.2", 7005, PortState::Open, 0.0),
            Event::Service(Box::new(svc)),
            end(0.1, 0),
        ];
        let text = render(&evs);
        assert!(
            text.contains("Host: 198.18.0.2 ()\tPorts: 7005/open/tcp//x|y//Prod|uct line 1|2 3 (a|b)/\n"),
            "{text}"
        );
        assert_eq!(text.lines().count(), 4);
    }

    #[test]
    fn an_unnamed_port_has_an_empty_service_field() {
        let evs =
            vec![start("moonscan -p 7005 198.18.0.2", 1), port("198.18.0.2", 7005, PortState::Open, 0.0), end(0.1, 0)];
        let text = render(&evs);
        assert!(text.contains("\tPorts: 7005/open/tcp/////\n"), "{text}");
        assert!(text.ends_with("-- 1 IP address (1 host up) scanned in 0.10 seconds\n"));
    }
}
