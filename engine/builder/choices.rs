//! The decisions `build` takes from the settings: which scan type runs
//! (and the fallbacks when raw sockets are not there), the timing, and the
//! host discovery asked for.

use std::time::Duration;

use super::{usage, ScanBuilder};
use crate::discovery::ping::HostPlan;
use crate::discovery::Timing;
use crate::error::Result;
use crate::findings::ScanType;

impl ScanBuilder {
    /// The scan type, given what was asked and whether raw sockets are
    /// there, and whether UDP is scanned and raw (a note for each fallback).
    pub(super) fn scan_kind(&self, raw_ok: bool, notes: &mut Vec<String>) -> Result<(ScanType, bool, bool)> {
        let udp = self.udp || self.scan_type == Some(ScanType::Udp);
        let tcp_type = self.scan_type.filter(|&t| t != ScanType::Udp);
        let udp_raw = udp && raw_ok && self.any_remote_target();
        if udp && !udp_raw {
            notes.push(if raw_ok {
                "raw UDP probes cannot reach this machine's own addresses; `udp` uses UDP sockets".into()
            } else {
                "raw sockets are not available (needs root or CAP_NET_RAW); `udp` uses UDP sockets".into()
            });
        }
        let scan_type = match tcp_type {
            // -sS -sU without raw sockets: the TCP part connect-scans, as -sS alone does.
            Some(ScanType::Syn) if !raw_ok && udp => {
                notes.push(
                    "raw sockets are not available (needs root or CAP_NET_RAW); doing a connect scan (`scan_type(Connect)`)".into(),
                );
                ScanType::Connect
            }
            Some(t) => t,
            None if udp => ScanType::Udp,
            None if raw_ok => ScanType::Syn,
            None => {
                notes.push(
                    "raw sockets are not available (needs root or CAP_NET_RAW); doing a connect scan (`scan_type(Connect)`)".into(),
                );
                ScanType::Connect
            }
        };
        let scan_type = if scan_type == ScanType::Syn && !self.any_remote_target() {
            notes.push(
                "raw SYN probes cannot reach this machine's own addresses; doing a connect scan (`scan_type(Connect)`)"
                    .into(),
            );
            ScanType::Connect
        } else {
            scan_type
        };
        // The other raw scans have no connect-scan equivalent to fall back on.
        if !matches!(scan_type, ScanType::Syn | ScanType::Connect | ScanType::Udp) {
            if !raw_ok {
                return Err(usage(format!(
                    "{} sends raw packets: it needs root or CAP_NET_RAW (`scan_type(Connect)` needs neither)",
                    scan_type.setting()
                )));
            }
            if !self.any_remote_target() {
                return Err(usage(format!(
                    "{} sends raw packets, which cannot reach this machine's own addresses",
                    scan_type.setting()
                )));
            }
        }
        if scan_type == ScanType::Connect && !udp_raw && (self.link.iface.is_some() || self.link.src.is_some()) {
            return Err(usage("`link.iface` and `link.src` apply to raw (SYN) scans only"));
        }
        Ok((scan_type, udp, udp_raw))
    }

    /// The timing template `level` with the limits set on top, checked.
    pub(super) fn timing(&self, level: u8) -> Result<Timing> {
        let mut timing = Timing::template(level)
            .ok_or_else(|| usage(format!("`timing_template`({level}): the templates are 0-5")))?;
        if let Some(rate) = self.max_rate {
            if !(rate.is_finite() && rate > 0.0) {
                return Err(usage(format!("`max_rate` must be a positive number of probes per second, not {rate}")));
            }
            timing.max_rate = Some(rate);
        }
        if let Some(min) = self.min_rate {
            if !(min.is_finite() && min > 0.0) {
                return Err(usage(format!("`min_rate` must be a positive number of probes per second, not {min}")));
            }
            if timing.max_rate.is_some_and(|max| min > max) {
                return Err(usage("`min_rate` is above `max_rate`"));
            }
            timing.min_rate = Some(min);
        }
        if let Some(r) = self.max_retries {
            timing.retries = timing.retries.min(r);
            timing.max_retries = r;
        }
        if let Some(w) = self.max_parallelism {
            if w == 0 {
                return Err(usage("`max_parallelism` must be at least 1"));
            }
            timing.window = w;
            timing.raw_window = w;
        }
        if let Some(t) = self.max_rtt_timeout {
            timing.timeout = t;
        }
        if let Some(t) = self.initial_rtt_timeout {
            if t > timing.timeout {
                return Err(usage("`initial_rtt_timeout` is above `max_rtt_timeout`"));
            }
            if t.is_zero() {
                return Err(usage("`initial_rtt_timeout` must be above 0"));
            }
            timing.initial_rtt_timeout = Some(t);
        }
        if let Some(d) = self.scan_delay {
            if d > Duration::from_secs(3600) {
                return Err(usage("`scan_delay` is at most 1h"));
            }
            timing.scan_delay = Some(d).filter(|d| !d.is_zero());
        }
        if let Some(min) = self.min_rate {
            // With nothing answering, a window of W probes sends W per timeout.
            let needed = (min * timing.timeout.as_secs_f64() * f64::from(timing.retries + 1)).ceil() as usize;
            timing.raw_window = timing.raw_window.max(needed);
            timing.window = timing.window.max(needed);
        }
        Ok(timing)
    }

    /// The host discovery asked for, checked.
    pub(super) fn discovery(&self) -> Result<Option<HostPlan>> {
        if self.list_only || self.ping_only {
            let flag = if self.list_only { "`list_only`" } else { "`ping_only`" };
            let conflict = [
                (self.list_only && self.ping_only, "`ping_only`"),
                (self.ports.is_some(), "`ports`/`top_ports`"),
                (
                    self.udp || self.scan_type.is_some(),
                    "a scan type (`scan_type(Syn)`, `scan_type(Connect)`, `udp`...)",
                ),
                (self.detect.is_some(), "`service_detection`"),
                (self.scripts.is_some(), "`scripts`"),
                (self.host_timeout.is_some(), "`host_timeout`"),
            ];
            if let Some((_, what)) = conflict.iter().find(|c| c.0) {
                return Err(usage(format!("{flag} scans no ports: it cannot be combined with {what}")));
            }
        }
        // -sL sends nothing.
        if self.list_only {
            return Ok(None);
        }
        let mut probes = Vec::new();
        for p in self.ping_probes.iter().filter(|p| !p.eq_ignore_ascii_case("R")) {
            HostPlan::add_option(&mut probes, p)?;
        }
        if self.no_ping {
            if self.ping_only {
                return Err(usage("`ping_only` `skip_discovery` would send nothing; `list_only` lists the targets"));
            }
            if !self.ping_probes.is_empty() {
                return Err(usage("`skip_discovery` and `ping_probe` discovery probes cannot be combined"));
            }
            return Ok(None);
        }
        let mut plan = HostPlan::nmap_default();
        if !probes.is_empty() {
            plan.probes = probes;
        }
        plan.ping_only = self.ping_only;
        plan.report_down = self.verbosity > 0;
        Ok(Some(plan))
    }
}
