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

use std::io::{self, Write};

use super::report::{Collected, Layout, Report};

/// nmap's grepable output, written to `writer` (`Grepable::new(writer)`).
pub type Grepable<W> = Report<GrepableLayout, W>;

/// The grepable output's layout.
#[derive(Default)]
pub struct GrepableLayout;

impl Layout for GrepableLayout {
    fn head(&self, scan: &Collected, out: &mut dyn Write) -> io::Result<()> {
        out.write_all(scan.initiated_line(&field(&scan.args_line())).as_bytes())
    }

    fn body(&self, scan: &Collected, out: &mut dyn Write) -> io::Result<()> {
        let version_scan = scan.version_scan();
        let mut text = String::new();
        for host in scan.hosts() {
            let ip = host.ip;
            let state = match host.state() {
                crate::findings::HostState::Up => "Up",
                crate::findings::HostState::Down => "Down",
                crate::findings::HostState::Unknown => "Unknown",
            };
            // nmap's is the reverse DNS name; moonscan gives the name the
            // host was given when it has none.
            let name = host.ptr.or(host.name).map(field).unwrap_or_default();
            text.push_str(&format!("Host: {ip} ({name})\tStatus: {state}\n"));
            // nmap's OS fields end the host's second line.
            let os = host.os.map(super::os_text::grepable_fields).unwrap_or_default();
            if host.ports.is_empty() {
                if !os.is_empty() {
                    text.push_str(&format!("Host: {ip} ({name}){os}\n"));
                }
                out.write_all(text.as_bytes())?;
                text.clear();
                continue;
            }
            text.push_str(&format!("Host: {ip} ({name})\tPorts: "));
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
            // nmap names the state most ports are in that it did not list.
            if let Some(u) = host.unshown.iter().max_by_key(|u| u.count) {
                let same: u64 = host.unshown.iter().filter(|v| v.state == u.state).map(|v| v.count).sum();
                text.push_str(&format!("\tIgnored State: {} ({same})", u.state.as_str()));
            }
            text.push_str(&os);
            text.push('\n');
            out.write_all(text.as_bytes())?;
            text.clear();
        }
        text.push_str(&scan.done_line());
        out.write_all(text.as_bytes())
    }
}

/// A field on one line: control characters (line breaks, tabs) as spaces.
fn field(s: &str) -> String {
    s.chars().map(|c| if c.is_control() || super::screen::is_format(c) { ' ' } else { c }).collect()
}

#[cfg(test)]
mod tests {
    use super::super::report::sample::*;
    use super::*;
    use crate::findings::PortState;
    use crate::findings::*;

    fn render(events: &[Event]) -> String {
        let mut buf = Vec::new();
        feed(&mut Grepable::new(&mut buf), events);
        String::from_utf8(buf).unwrap()
    }

    #[test]
    fn a_scan_greps_like_nmap() {
        let text = render(&scan());
        let want = "\
# moonscan 0.1.0 scan initiated Sat Nov 21 16:41:03 2026 as: moonscan -sV -sC -p 22,80,443,8080 198.18.0.2 198.18.0.10
Host: 198.18.0.2 ()\tStatus: Up
Host: 198.18.0.2 ()\tPorts: 22/open/tcp//ssh//OpenSSH 9.2p1 Debian 2+deb12u10 (protocol 2.0)/, 80/closed/tcp//http///, 443/open/tcp//ssl|http//nginx 1.22.1/\tIgnored State: filtered (1)
Host: 198.18.0.10 ()\tStatus: Up
Host: 198.18.0.10 ()\tPorts: 8080/open/tcp//http-proxy?///\tIgnored State: closed (2)
# moonscan done at Sat Nov 21 16:41:04 2026 -- 2 IP addresses (2 hosts up) scanned in 1.50 seconds
";
        assert_eq!(text, want);
    }

    #[test]
    fn slashes_and_line_breaks_cannot_break_the_fields() {
        let mut svc = service("198.18.0.2", 7005, "x/y", Some("Prod/uct\nline"), Some("1/2\t3"));
        svc.id.info = Some("a/b".into());
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
