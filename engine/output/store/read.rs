//! Reading stored scans back: the list of scans and a scan's events rebuilt
//! in the event schema (for `moonscan db show`, `export`); the difference
//! between two scans' events is diff.rs's.

use std::collections::BTreeMap;
use std::net::IpAddr;

use super::{connect, display_name, Backend, Cell};
use crate::error::{Error, ErrorKind};
use crate::findings::{
    banner_text, CertSummary, ErrorEvent, Event, ExtraportsEvent, FindingEvent, HostEvent, HostState, Identity,
    OsClass, OsEvent, OsHint, OsMatch, PortEvent, PortState, Proto, RdnsEvent, Reason, ScanEnd, ScanId, ScanStart,
    ScanType, ScriptEvent, Sequence, Service, ServiceMethod, Severity, TlsInfo, TraceEvent, TraceHop, Tunnel, Uptime,
};

/// A stored database, opened for reading.
pub struct Db {
    db: Box<dyn Backend>,
    label: String,
}

/// One stored scan, as `moonscan db list` shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct ScanSummary {
    pub id: String,
    pub started: String,
    /// The command line (the program name first).
    pub args: Vec<String>,
    pub scan_type: String,
    pub seed: String,
    pub shard: Option<String>,
    /// RFC 3339; `None` while the scan runs (or if it died before its end).
    pub ended: Option<String>,
    pub elapsed: Option<f64>,
    pub interrupted: bool,
    /// Open ports stored.
    pub open_ports: u64,
    /// Findings stored.
    pub findings: u64,
}

impl Db {
    /// Opens the database at `target` (a file path or a `postgres://` URL).
    /// A SQLite file must exist already. As for [`super::open`], the error
    /// does not name `target`. A PostgreSQL URL without a password takes
    /// one from `pg`.
    pub fn open(target: &str, pg: &crate::places::PgPasswords) -> crate::error::Result<Db> {
        Ok(Db { db: connect(target, false, pg)?, label: display_name(target) })
    }

    #[cfg(test)]
    pub(crate) fn from_backend(db: Box<dyn Backend>, label: String) -> Db {
        Db { db, label }
    }

    pub(crate) fn query(&mut self, sql: &str, params: &[&str]) -> std::io::Result<Vec<Vec<Cell>>> {
        self.db.query(sql, params).map_err(|e| std::io::Error::other(format!("{}: {e}", self.label)))
    }

    /// Every scan, oldest first.
    pub fn scans(&mut self) -> std::io::Result<Vec<ScanSummary>> {
        self.summaries(None)
    }

    /// One scan by its full id.
    pub fn scan(&mut self, id: &str) -> std::io::Result<Option<ScanSummary>> {
        Ok(self.summaries(Some(id))?.pop())
    }

    fn summaries(&mut self, id: Option<&str>) -> std::io::Result<Vec<ScanSummary>> {
        let sql = format!(
            "SELECT s.id, s.started, CAST(s.args AS TEXT), s.scan_type, s.seed, s.shard, s.ended, s.elapsed, \
             s.interrupted, \
             (SELECT count(*) FROM ports p WHERE p.scan_id = s.id AND p.state = 'open'), \
             (SELECT count(*) FROM findings f WHERE f.scan_id = s.id) \
             FROM scans s {} ORDER BY s.started, s.id",
            if id.is_some() { "WHERE s.id = ?" } else { "" }
        );
        let params: Vec<&str> = id.into_iter().collect();
        let rows = self.query(&sql, &params)?;
        Ok(rows
            .into_iter()
            .map(|r| {
                let mut r = Row(r.into_iter());
                ScanSummary {
                    id: r.text(),
                    started: r.text(),
                    args: serde_json::from_str(&r.text()).unwrap_or_default(),
                    scan_type: r.text(),
                    seed: r.text(),
                    shard: r.opt(),
                    ended: r.opt(),
                    elapsed: r.real(),
                    interrupted: r.int().unwrap_or(0) != 0,
                    open_ports: r.int().unwrap_or(0).max(0) as u64,
                    findings: r.int().unwrap_or(0).max(0) as u64,
                }
            })
            .collect())
    }

    /// The one scan whose id starts with `prefix`. Unknown and ambiguous
    /// prefixes are usage errors.
    pub fn resolve(&mut self, prefix: &str) -> crate::error::Result<String> {
        let rows = self
            .query("SELECT id FROM scans ORDER BY id", &[])
            .map_err(|e| Error::with_source(ErrorKind::Io, e.to_string(), e))?;
        let ids: Vec<String> = rows
            .into_iter()
            .filter_map(|r| match r.into_iter().next() {
                Some(Cell::Text(s)) => Some(s),
                _ => None,
            })
            .filter(|id| id.starts_with(prefix))
            .collect();
        match ids.len() {
            _ if prefix.is_empty() => Err(Error::new(ErrorKind::Config, "empty scan id")),
            0 => Err(Error::new(ErrorKind::Config, format!("no scan {prefix:?} in {}", self.label))),
            1 => Ok(ids.into_iter().next().unwrap_or_default()),
            n => Err(Error::new(
                ErrorKind::Config,
                format!(
                    "scan id {prefix:?} is ambiguous in {}: {n} scans start with it ({})",
                    self.label,
                    ids.join(", ")
                ),
            )),
        }
    }

    /// The scan's events rebuilt from the tables, in the order the scan
    /// emitted them: `scan_start`, hosts, ports, services, findings,
    /// errors and the counts of ports not shown, and `scan_end` if the
    /// scan finished. Log lines and timing events are not stored.
    pub fn events(&mut self, id: &str) -> std::io::Result<Vec<Event>> {
        let scan_id: ScanId = id.into();
        let (start, end, ended) = self.head(id, &scan_id)?;
        // The store keeps no column for it: the command line tells whether
        // OS guesses were asked for.
        let os_guess = start.args.iter().any(|a| a == "--osscan-guess" || a == "--fuzzy");

        let mut body: Vec<(i64, Event)> = Vec::new();
        self.port_events(id, &scan_id, &mut body)?;
        let chains = self.cert_chains(id)?;
        self.service_events(id, &scan_id, chains, &mut body)?;
        self.finding_events(id, &scan_id, &mut body)?;
        self.script_events(id, &scan_id, &mut body)?;
        self.host_events(id, &scan_id, &mut body)?;
        self.rdns_events(id, &scan_id, &mut body)?;
        self.extraports_events(id, &scan_id, &mut body)?;
        self.error_events(id, &scan_id, &mut body)?;
        self.os_events(id, &scan_id, os_guess, &mut body)?;
        self.trace_events(id, &scan_id, &mut body)?;

        body.sort_by_key(|(seq, _)| *seq);
        let mut events = Vec::with_capacity(body.len() + 2);
        events.push(Event::ScanStart(start));
        events.extend(body.into_iter().map(|(_, e)| e));
        if ended {
            events.push(Event::ScanEnd(end));
        }
        Ok(events)
    }
}

impl Db {
    /// The scan's `scan_start` and `scan_end` from its row in `scans`, and
    /// whether it ended (an unfinished scan has no `scan_end`).
    fn head(&mut self, id: &str, scan_id: &ScanId) -> std::io::Result<(ScanStart, ScanEnd, bool)> {
        let head = self.query(
            "SELECT id, started, CAST(args AS TEXT), scan_type, seed, probes_planned, CAST(settings AS TEXT), \
             elapsed, probes_sent, open, closed, filtered, errors, findings, interrupted, ended, scripts FROM scans \
             WHERE id = ?",
            &[id],
        )?;
        let Some(head) = head.into_iter().next() else {
            return Err(std::io::Error::new(std::io::ErrorKind::NotFound, format!("{}: no scan {id}", self.label)));
        };
        let mut h = Row(head.into_iter());
        let start = ScanStart {
            scan_id: h.text().into(),
            started: humantime::parse_rfc3339_weak(&h.text()).unwrap_or(std::time::UNIX_EPOCH),
            args: serde_json::from_str(&h.text()).unwrap_or_default(),
            scan_type: {
                let t = h.text();
                ScanType::ALL.into_iter().find(|s| s.as_str() == t).unwrap_or(ScanType::Connect)
            },
            seed: h.text().parse().unwrap_or(0),
            probes_planned: h.uint(),
            // A scan stored by schema version 1 has no settings: defaults.
            settings: h.opt().and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_default(),
        };
        let elapsed = h.real();
        let end = ScanEnd {
            scan_id: scan_id.clone(),
            elapsed: elapsed.unwrap_or(0.0),
            probes_sent: h.uint(),
            open: h.uint(),
            closed: h.uint(),
            filtered: h.uint(),
            errors: h.uint(),
            findings: h.uint(),
            scripts: 0,
            // Host counts are not stored.
            hosts_up: 0,
            hosts_down: 0,
            interrupted: h.int().unwrap_or(0) != 0,
            // Not stored (the counts themselves are).
            unshown_capped: false,
            // Nor the pace it went at.
            slowdowns: 0,
            slowed: None,
        };
        let ended = h.opt().is_some();
        let mut end = end;
        end.scripts = h.uint();
        Ok((start, end, ended))
    }

    /// The `port` events.
    fn port_events(&mut self, id: &str, scan_id: &ScanId, body: &mut Vec<(i64, Event)>) -> std::io::Result<()> {
        for r in self.query("SELECT ip, port, proto, state, reason, ttl, t, seq FROM ports WHERE scan_id = ?", &[id])? {
            let mut r = Row(r.into_iter());
            let (Some(ip), port, Some(proto)) = (r.ip(), r.port(), Proto::parse(&r.text())) else { continue };
            let state = PortState::parse(&r.text()).unwrap_or(PortState::Filtered);
            let ev = PortEvent {
                scan_id: scan_id.clone(),
                ip,
                port,
                proto,
                state,
                reason: Reason::parse(&r.text()),
                ttl: r.int().and_then(|t| u8::try_from(t).ok()),
                t: r.real().unwrap_or(0.0),
            };
            body.push((r.int().unwrap_or(0), Event::Port(ev)));
        }
        Ok(())
    }

    /// The certificate chains of the TLS services, by (ip, seq), each in
    /// its order.
    fn cert_chains(&mut self, id: &str) -> std::io::Result<BTreeMap<(String, i64), Vec<CertSummary>>> {
        let mut chains: BTreeMap<(String, i64), Vec<CertSummary>> = BTreeMap::new();
        for r in self.query(
            "SELECT ip, port, seq, subject, issuer, CAST(san AS TEXT), not_before, not_after, serial, key_type, \
             key_bits, curve, signature_algorithm, self_signed, sha256, error FROM tls_certs WHERE scan_id = ? \
             ORDER BY seq, position",
            &[id],
        )? {
            let mut r = Row(r.into_iter());
            let (ip, _port, seq) = (r.text(), r.int(), r.int().unwrap_or(0));
            let cert = CertSummary {
                subject: r.text(),
                issuer: r.text(),
                san: serde_json::from_str(&r.text()).unwrap_or_default(),
                san_cut: 0,
                not_before: r.text(),
                not_after: r.text(),
                serial: r.text(),
                key_type: r.text(),
                key_bits: r.int().and_then(|b| u32::try_from(b).ok()).unwrap_or(0),
                curve: r.opt(),
                signature_algorithm: r.text(),
                self_signed: r.int().unwrap_or(0) != 0,
                sha256: r.text(),
                error: r.opt(),
            };
            chains.entry((ip, seq)).or_default().push(cert);
        }
        Ok(chains)
    }

    /// The `service` events, each TLS one with its chain from `chains`.
    fn service_events(
        &mut self,
        id: &str,
        scan_id: &ScanId,
        mut chains: BTreeMap<(String, i64), Vec<CertSummary>>,
        body: &mut Vec<(i64, Event)>,
    ) -> std::io::Result<()> {
        for r in self.query(
            "SELECT ip, port, proto, service, product, version, info, os, hostname, device, tunnel, method, \
             CAST(cpe AS TEXT), banner, probe, tls_version, tls_cipher, tls_alpn, CAST(tls_session AS TEXT), t, seq, targetname, \
             CAST(replies AS TEXT) FROM services \
             WHERE scan_id = ?",
            &[id],
        )? {
            let mut r = Row(r.into_iter());
            let (Some(ip), port, Some(proto)) = (r.ip(), r.port(), Proto::parse(&r.text())) else { continue };
            let mut ev = Service::bare(scan_id.clone(), ip, port, proto);
            ev.id = Identity {
                service: r.text(),
                product: r.opt(),
                version: r.opt(),
                info: r.opt(),
                os: r.opt(),
                hostname: r.opt(),
                device: r.opt(),
                cpe: Vec::new(),
            };
            ev.tunnel = r.opt().and_then(|t| Tunnel::parse(&t));
            ev.method = match r.text().as_str() {
                "probed" => ServiceMethod::Probed,
                "soft" => ServiceMethod::Soft,
                _ => ServiceMethod::Table,
            };
            ev.id.cpe = serde_json::from_str(&r.text()).unwrap_or_default();
            ev.banner = banner_text::from_text(&r.opt().unwrap_or_default());
            ev.probe = r.opt();
            let (version, cipher, alpn) = (r.opt(), r.opt(), r.opt());
            let session: super::TlsSession = r.opt().and_then(|j| serde_json::from_str(&j).ok()).unwrap_or_default();
            ev.t = r.real().unwrap_or(0.0);
            let seq = r.int().unwrap_or(0);
            ev.targetname = r.opt();
            ev.replies = r.opt().and_then(|j| serde_json::from_str(&j).ok()).unwrap_or_default();
            if let Some(version) = version {
                let chain = chains.remove(&(ip.to_string(), seq)).unwrap_or_default();
                ev.tls = Some(Box::new(TlsInfo {
                    path: session.path,
                    version,
                    cipher: cipher.unwrap_or_default(),
                    alpn,
                    kx: session.kx,
                    group: session.group,
                    kx_bits: session.kx_bits,
                    ja3s: session.ja3s,
                    ja4s: session.ja4s,
                    starttls: session.starttls,
                    chain,
                    chain_cut: session.chain_cut,
                    der: Vec::new(),
                }));
            }
            body.push((seq, Event::Service(Box::new(ev))));
        }
        Ok(())
    }

    /// The `finding` events.
    fn finding_events(&mut self, id: &str, scan_id: &ScanId, body: &mut Vec<(i64, Event)>) -> std::io::Result<()> {
        for r in self.query(
            "SELECT ip, port, proto, plugin, severity, title, CAST(data AS TEXT), CAST(about AS TEXT), host, t, seq, targetname FROM findings \
             WHERE scan_id = ?",
            &[id],
        )? {
            let mut r = Row(r.into_iter());
            let (Some(ip), port, Some(proto)) = (r.ip(), r.port(), Proto::parse(&r.text())) else { continue };
            let mut ev = FindingEvent {
                scan_id: scan_id.clone(),
                ip,
                port,
                proto,
                plugin: r.text(),
                severity: Severity::parse(&r.text()).unwrap_or_default(),
                title: r.text(),
                data: r.opt().and_then(|d| serde_json::from_str(&d).ok()).unwrap_or_default(),
                about: r.opt().and_then(|a| serde_json::from_str(&a).ok()).unwrap_or_default(),
                host: r.int() == Some(1),
                targetname: None,
                t: r.real().unwrap_or(0.0),
            };
            let seq = r.int().unwrap_or(0);
            ev.targetname = r.opt();
            body.push((seq, Event::Finding(Box::new(ev))));
        }
        Ok(())
    }

    /// The `script` events.
    fn script_events(&mut self, id: &str, scan_id: &ScanId, body: &mut Vec<(i64, Event)>) -> std::io::Result<()> {
        for r in self.query(
            "SELECT ip, port, proto, plugin, output, CAST(data AS TEXT), CAST(volatile AS TEXT), host, t, seq, targetname \
             FROM scripts WHERE scan_id = ?",
            &[id],
        )? {
            let mut r = Row(r.into_iter());
            let (Some(ip), port, Some(proto)) = (r.ip(), r.port(), Proto::parse(&r.text())) else { continue };
            let mut ev = ScriptEvent {
                scan_id: scan_id.clone(),
                ip,
                port,
                proto,
                plugin: r.text(),
                output: r.text(),
                data: r.opt().and_then(|d| serde_json::from_str(&d).ok()).unwrap_or_default(),
                volatile: r.opt().and_then(|v| serde_json::from_str(&v).ok()).unwrap_or_default(),
                host: r.int() == Some(1),
                targetname: None,
                t: r.real().unwrap_or(0.0),
            };
            let seq = r.int().unwrap_or(0);
            ev.targetname = r.opt();
            body.push((seq, Event::Script(Box::new(ev))));
        }
        Ok(())
    }

    /// The `host` events.
    fn host_events(&mut self, id: &str, scan_id: &ScanId, body: &mut Vec<(i64, Event)>) -> std::io::Result<()> {
        for r in
            self.query("SELECT ip, state, reason, ttl, latency, mac, t, seq FROM hosts WHERE scan_id = ?", &[id])?
        {
            let mut r = Row(r.into_iter());
            let Some(ip) = r.ip() else { continue };
            let state = match r.text().as_str() {
                "up" => HostState::Up,
                "down" => HostState::Down,
                _ => HostState::Unknown,
            };
            let ev = HostEvent {
                scan_id: scan_id.clone(),
                ip,
                state,
                reason: Reason::parse(&r.text()),
                ttl: r.int().and_then(|t| u8::try_from(t).ok()),
                latency: r.real(),
                mac: r.opt(),
                t: r.real().unwrap_or(0.0),
            };
            body.push((r.int().unwrap_or(0), Event::Host(ev)));
        }
        Ok(())
    }

    /// The `rdns` events.
    fn rdns_events(&mut self, id: &str, scan_id: &ScanId, body: &mut Vec<(i64, Event)>) -> std::io::Result<()> {
        for r in self.query("SELECT ip, name, t, seq FROM rdns WHERE scan_id = ?", &[id])? {
            let mut r = Row(r.into_iter());
            let Some(ip) = r.ip() else { continue };
            let ev = RdnsEvent { scan_id: scan_id.clone(), ip, name: r.text(), t: r.real().unwrap_or(0.0) };
            body.push((r.int().unwrap_or(0), Event::Rdns(ev)));
        }
        Ok(())
    }

    /// The `extraports` events (the counts of ports not shown).
    fn extraports_events(&mut self, id: &str, scan_id: &ScanId, body: &mut Vec<(i64, Event)>) -> std::io::Result<()> {
        for r in self.query(
            "SELECT ip, proto, state, reason, count, CAST(ports AS TEXT), seq FROM extraports WHERE scan_id = ?",
            &[id],
        )? {
            let mut r = Row(r.into_iter());
            let (Some(ip), Some(proto)) = (r.ip(), Proto::parse(&r.text())) else { continue };
            let ev = ExtraportsEvent {
                scan_id: scan_id.clone(),
                ip,
                proto,
                state: PortState::parse(&r.text()).unwrap_or(PortState::Filtered),
                reason: Reason::parse(&r.text()),
                count: r.int().and_then(|c| u32::try_from(c).ok()).unwrap_or(0),
                ports: r.opt().and_then(|p| serde_json::from_str(&p).ok()).unwrap_or_default(),
            };
            body.push((r.int().unwrap_or(0), Event::Extraports(ev)));
        }
        Ok(())
    }

    /// The `error` events.
    fn error_events(&mut self, id: &str, scan_id: &ScanId, body: &mut Vec<(i64, Event)>) -> std::io::Result<()> {
        for r in self.query("SELECT ip, port, plugin, kind, message, seq FROM errors WHERE scan_id = ?", &[id])? {
            let mut r = Row(r.into_iter());
            let ev = ErrorEvent {
                scan_id: scan_id.clone(),
                ip: r.ip(),
                port: r.int().and_then(|p| u16::try_from(p).ok()),
                plugin: r.opt(),
                kind: ErrorKind::parse(&r.text()).unwrap_or(ErrorKind::Io),
                message: r.text(),
            };
            body.push((r.int().unwrap_or(0), Event::Error(ev)));
        }
        Ok(())
    }

    /// The `os` events of a scan, with their matches and classes.
    /// `guess`: the scan asked for OS guesses (`--osscan-guess`). nmap's
    /// classification is not stored: the summary is made from the matches.
    fn os_events(
        &mut self,
        id: &str,
        scan_id: &ScanId,
        guess: bool,
        body: &mut Vec<(i64, Event)>,
    ) -> std::io::Result<()> {
        // Classes by (seq, match position), in order.
        let mut classes: BTreeMap<(i64, i64), Vec<OsClass>> = BTreeMap::new();
        for r in self.query(
            "SELECT seq, match_position, vendor, family, generation, device_type, accuracy, CAST(cpe AS TEXT)              FROM os_classes WHERE scan_id = ? ORDER BY seq, match_position, position",
            &[id],
        )? {
            let mut r = Row(r.into_iter());
            let key = (r.int().unwrap_or(0), r.int().unwrap_or(0));
            let class = OsClass {
                vendor: r.text(),
                family: r.text(),
                generation: r.opt(),
                device_type: r.text(),
                accuracy: r.int().and_then(|a| u8::try_from(a).ok()).unwrap_or(0),
                cpe: r.opt().and_then(|c| serde_json::from_str(&c).ok()).unwrap_or_default(),
            };
            classes.entry(key).or_default().push(class);
        }
        let mut matches: BTreeMap<i64, Vec<OsMatch>> = BTreeMap::new();
        for r in self.query(
            "SELECT seq, position, name, accuracy, line FROM os_matches WHERE scan_id = ? ORDER BY seq, position",
            &[id],
        )? {
            let mut r = Row(r.into_iter());
            let (seq, position) = (r.int().unwrap_or(0), r.int().unwrap_or(0));
            let m = OsMatch {
                name: r.text(),
                accuracy: r.int().and_then(|a| u8::try_from(a).ok()).unwrap_or(0),
                line: r.int().and_then(|l| usize::try_from(l).ok()).unwrap_or(0),
                classes: classes.remove(&(seq, position)).unwrap_or_default(),
            };
            matches.entry(seq).or_default().push(m);
        }
        for r in self.query(
            "SELECT ip, exact, too_many, fingerprint, not_ideal, distance, uptime, lastboot, CAST(ports_used AS TEXT), \
             CAST(tcp_sequence AS TEXT), CAST(ip_id_sequence AS TEXT), CAST(tcp_ts_sequence AS TEXT), hint_family, \
             hint_evidence, t, seq FROM os WHERE scan_id = ?",
            &[id],
        )? {
            let mut r = Row(r.into_iter());
            let Some(ip) = r.ip() else { continue };
            let json = |t: Option<String>| t.and_then(|t| serde_json::from_str::<Sequence>(&t).ok());
            let (exact, too_many) = (r.int().unwrap_or(0) != 0, r.int().unwrap_or(0) != 0);
            let (fingerprint, not_ideal) = (r.opt(), r.opt());
            let distance = r.int().and_then(|d| u8::try_from(d).ok());
            let (seconds, lastboot) = (r.int(), r.opt());
            let uptime = seconds.map(|s| Uptime { seconds: s.max(0) as u64, lastboot: lastboot.unwrap_or_default() });
            let ports_used = r.opt().and_then(|p| serde_json::from_str(&p).ok()).unwrap_or_default();
            let (tcp_sequence, ip_id_sequence, tcp_ts_sequence) = (json(r.opt()), json(r.opt()), json(r.opt()));
            let hint = match (r.opt(), r.opt()) {
                (Some(family), evidence) => Some(OsHint { family, evidence: evidence.unwrap_or_default() }),
                (None, _) => None,
            };
            let t = r.real().unwrap_or(0.0);
            let seq = r.int().unwrap_or(0);
            let ev = OsEvent {
                scan_id: scan_id.clone(),
                ip,
                ports_used,
                matches: matches.remove(&seq).unwrap_or_default(),
                exact,
                too_many,
                guess,
                classification: Vec::new(),
                fingerprint,
                not_ideal,
                distance,
                uptime,
                tcp_sequence,
                ip_id_sequence,
                tcp_ts_sequence,
                hint,
                t,
            };
            body.push((seq, Event::Os(Box::new(ev))));
        }
        Ok(())
    }

    /// The `trace` events of a scan, with their hops.
    fn trace_events(&mut self, id: &str, scan_id: &ScanId, body: &mut Vec<(i64, Event)>) -> std::io::Result<()> {
        let mut hops: BTreeMap<i64, Vec<TraceHop>> = BTreeMap::new();
        for r in self
            .query("SELECT seq, ttl, hop_ip, rtt_ms, host FROM trace_hops WHERE scan_id = ? ORDER BY seq, ttl", &[id])?
        {
            let mut r = Row(r.into_iter());
            let seq = r.int().unwrap_or(0);
            let hop = TraceHop {
                ttl: r.int().and_then(|t| u8::try_from(t).ok()).unwrap_or(0),
                ip: r.ip(),
                rtt_ms: r.real(),
                host: r.opt(),
            };
            hops.entry(seq).or_default().push(hop);
        }
        for r in self.query("SELECT ip, port, proto, t, seq FROM traces WHERE scan_id = ?", &[id])? {
            let mut r = Row(r.into_iter());
            let (Some(ip), port, Some(proto)) = (r.ip(), r.port(), Proto::parse(&r.text())) else { continue };
            let t = r.real().unwrap_or(0.0);
            let seq = r.int().unwrap_or(0);
            let ev = TraceEvent {
                scan_id: scan_id.clone(),
                ip,
                port,
                proto,
                hops: hops.remove(&seq).unwrap_or_default(),
                t,
            };
            body.push((seq, Event::Trace(Box::new(ev))));
        }
        Ok(())
    }
}

/// Reads a row's cells left to right.
struct Row(std::vec::IntoIter<Cell>);

impl Row {
    fn next(&mut self) -> Cell {
        self.0.next().unwrap_or(Cell::Null)
    }

    fn opt(&mut self) -> Option<String> {
        match self.next() {
            Cell::Text(s) => Some(s),
            Cell::Int(n) => Some(n.to_string()),
            Cell::Real(x) => Some(x.to_string()),
            Cell::Null => None,
        }
    }

    fn text(&mut self) -> String {
        self.opt().unwrap_or_default()
    }

    fn int(&mut self) -> Option<i64> {
        match self.next() {
            Cell::Int(n) => Some(n),
            Cell::Real(x) => Some(x as i64),
            Cell::Text(s) => s.parse().ok(),
            Cell::Null => None,
        }
    }

    fn uint(&mut self) -> u64 {
        self.int().unwrap_or(0).max(0) as u64
    }

    fn real(&mut self) -> Option<f64> {
        match self.next() {
            Cell::Real(x) => Some(x),
            Cell::Int(n) => Some(n as f64),
            Cell::Text(s) => s.parse().ok(),
            Cell::Null => None,
        }
    }

    fn ip(&mut self) -> Option<IpAddr> {
        self.opt()?.parse().ok()
    }

    fn port(&mut self) -> u16 {
        self.int().and_then(|p| u16::try_from(p).ok()).unwrap_or(0)
    }
}
