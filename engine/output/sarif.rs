//! SARIF 2.1.0 (`--sarif FILE`), the format code-scanning dashboards read:
//! one run of the tool `moonscan`, one rule per selected plugin (its
//! description and finding metadata), one result per finding.
//!
//! A result's location is the port as a URI (`tcp://198.18.0.2:443`,
//! `udp://[2001:2::2]:53`); its level follows the severity (info `none`,
//! low `note`, medium `warning`, high and critical `error`), which it also
//! keeps in its properties with the finding's data and metadata. The
//! document is written whole at close (also when a scan is interrupted);
//! findings are held until then, within the scan's output budget. Its
//! text fields (a result's message, a rule's descriptions and help) hold
//! no control character but line feeds and tabs: the others are written
//! `\xNN`, so `jq -r` cannot print an escape sequence to a terminal.

use std::collections::HashMap;
use std::io::{self, BufWriter, Write};
use std::time::SystemTime;

use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use super::screen::{screen, screen_text};
use super::Sink;
use crate::findings::{About, Event, FindingEvent, ScanEnd, Severity};

/// What SARIF says of one plugin (a rule).
#[derive(Clone, Debug, Default)]
pub struct Rule {
    pub id: String,
    pub description: String,
    pub categories: Vec<String>,
    /// The pack it came from (`core` for plugins/).
    pub pack: Option<String>,
    pub about: About,
}

/// A sink writing one SARIF log at close.
pub struct Sarif<W: Write> {
    out: BufWriter<W>,
    rules: Vec<Rule>,
    index: HashMap<String, usize>,
    results: Vec<Value>,
    args: Vec<String>,
    started: Option<SystemTime>,
    end: Option<ScanEnd>,
    closed: bool,
}

impl<W: Write> Sarif<W> {
    /// A sink whose rules are `rules` (the plugins selected).
    pub fn new(writer: W, rules: Vec<Rule>) -> Self {
        let index = rules.iter().enumerate().map(|(i, r)| (r.id.clone(), i)).collect();
        Sarif {
            out: BufWriter::new(writer),
            rules,
            index,
            results: Vec::new(),
            args: Vec::new(),
            started: None,
            end: None,
            closed: false,
        }
    }

    fn result(&self, f: &FindingEvent) -> Value {
        let host = match f.ip {
            std::net::IpAddr::V4(a) => a.to_string(),
            std::net::IpAddr::V6(a) => format!("[{a}]"),
        };
        let proto = f.proto.as_str();
        // Text fields are read with `jq -r` on terminals: their control
        // characters are written as `\xNN` (line feeds and tabs of a result's
        // text kept; a title is one line).
        let message = screen(&f.title).into_owned();
        let mut fp = Sha256::new();
        for part in [f.plugin.as_str(), &f.ip.to_string(), proto, &f.port.to_string(), &f.title] {
            fp.update(part.as_bytes());
            fp.update([0]);
        }
        let mut props = Map::new();
        props.insert("severity".into(), json!(f.severity));
        props.insert("ip".into(), json!(f.ip));
        props.insert("port".into(), json!(f.port));
        props.insert("proto".into(), json!(proto));
        if !f.data.is_null() {
            props.insert("data".into(), f.data.clone());
        }
        about_props(&f.about, &[], &mut props);
        let mut r = json!({
            "ruleId": f.plugin,
            "level": level(f.severity),
            "rank": rank(f.severity),
            "message": { "text": message },
            "locations": [{
                "physicalLocation": { "artifactLocation": { "uri": format!("{proto}://{host}:{}", f.port) } }
            }],
            "partialFingerprints": { "moonscanFinding/v1": crate::text::hex(&fp.finalize()) },
            "properties": props,
        });
        if let Some(&i) = self.index.get(&f.plugin) {
            r["ruleIndex"] = json!(i);
        }
        r
    }

    fn document(&self) -> Value {
        let rules: Vec<Value> = self.rules.iter().map(rule).collect();
        let mut invocation = json!({
            "executionSuccessful": self.end.as_ref().is_some_and(|e| !e.interrupted),
            "commandLine": command_line(&self.args),
        });
        if let Some(t) = self.started {
            invocation["startTimeUtc"] = json!(humantime::format_rfc3339_millis(t).to_string());
        }
        if let (Some(t), Some(end)) = (self.started, &self.end) {
            let done = t + std::time::Duration::from_secs_f64(end.elapsed.max(0.0));
            invocation["endTimeUtc"] = json!(humantime::format_rfc3339_millis(done).to_string());
        }
        json!({
            "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
            "version": "2.1.0",
            "runs": [{
                "tool": { "driver": {
                    "name": "moonscan",
                    "version": env!("CARGO_PKG_VERSION"),
                    "rules": rules,
                } },
                "invocations": [invocation],
                "results": self.results,
            }],
        })
    }
}

/// The command line, `--script-args` values and URL passwords left out
/// (SARIF files are uploaded to dashboards): already so when the builder
/// recorded it, and again here for a `scan_start` made some other way.
fn command_line(args: &[String]) -> String {
    super::redact::command_line(args).join(" ")
}

/// Info is no problem (`none`); low a `note`; medium a `warning`; high and
/// critical an `error`.
fn level(s: Severity) -> &'static str {
    match s {
        Severity::Info => "none",
        Severity::Low => "note",
        Severity::Medium => "warning",
        Severity::High | Severity::Critical => "error",
    }
}

/// SARIF's 0-100 priority.
fn rank(s: Severity) -> f64 {
    match s {
        Severity::Info => 0.0,
        Severity::Low => 25.0,
        Severity::Medium => 50.0,
        Severity::High => 75.0,
        Severity::Critical => 95.0,
    }
}

/// `about`'s lists into a property bag; `tags` joins `extra_tags` (unique,
/// as SARIF's property bag wants them).
fn about_props(about: &About, extra_tags: &[String], props: &mut Map<String, Value>) {
    let mut tags: Vec<&String> = Vec::new();
    for t in extra_tags.iter().chain(&about.tags) {
        if !tags.contains(&t) {
            tags.push(t);
        }
    }
    if !tags.is_empty() {
        props.insert("tags".into(), json!(tags));
    }
    for (k, v) in [("cve", &about.cve), ("cwe", &about.cwe), ("references", &about.references)] {
        if !v.is_empty() {
            props.insert(k.into(), json!(v));
        }
    }
    if let Some(r) = &about.remediation {
        props.insert("remediation".into(), json!(r));
    }
}

fn rule(r: &Rule) -> Value {
    let short = r.description.split(['\n', '.']).next().unwrap_or("").trim();
    let mut props = Map::new();
    about_props(&r.about, &r.categories, &mut props);
    if let Some(p) = &r.pack {
        props.insert("pack".into(), json!(p));
    }
    let mut v = json!({
        "id": r.id,
        "name": r.id,
        "shortDescription": { "text": screen(if short.is_empty() { r.id.as_str() } else { short }) },
        "fullDescription": {
            "text": screen_text(if r.description.is_empty() { r.id.as_str() } else { r.description.as_str() })
        },
        "properties": props,
    });
    if let Some(uri) = r.about.references.iter().find(|u| u.starts_with("https://") || u.starts_with("http://")) {
        v["helpUri"] = json!(uri);
    }
    if let Some(fix) = &r.about.remediation {
        v["help"] = json!({ "text": screen_text(fix) });
    }
    v
}

impl<W: Write + Send> Sink for Sarif<W> {
    fn record(&mut self, event: &Event) -> io::Result<()> {
        match event {
            Event::ScanStart(s) => {
                self.args = s.args.clone();
                self.started = Some(s.started);
            }
            Event::Finding(f) => {
                let r = self.result(f);
                self.results.push(r);
            }
            Event::ScanEnd(e) => self.end = Some(e.clone()),
            _ => {}
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }

    fn close(&mut self) -> io::Result<()> {
        if !self.closed {
            self.closed = true;
            let doc = self.document();
            serde_json::to_writer_pretty(&mut self.out, &doc)?;
            self.out.write_all(b"\n")?;
        }
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::Proto;

    fn finding(plugin: &str, severity: Severity, cve: &[&str]) -> Event {
        Event::Finding(Box::new(FindingEvent {
            scan_id: "5c".into(),
            ip: "2001:2::2".parse().unwrap(),
            port: 443,
            proto: Proto::Tcp,
            plugin: plugin.into(),
            severity,
            title: "weak".into(),
            data: json!({"bits": 1024}),
            about: About { cve: cve.iter().map(|s| s.to_string()).collect(), ..Default::default() },
            host: false,
            targetname: None,
            t: 0.5,
        }))
    }

    #[test]
    fn one_result_per_finding_with_its_rule_and_level() {
        let rules = vec![
            Rule { id: "a".into(), description: "Says a. More.".into(), ..Default::default() },
            Rule {
                id: "b".into(),
                description: "Says b".into(),
                categories: vec!["safe".into()],
                pack: Some("core".into()),
                about: About {
                    references: vec!["see the book".into(), "https://example.org/b".into()],
                    tags: vec!["safe".into(), "tls".into()],
                    remediation: Some("Turn it off.".into()),
                    ..Default::default()
                },
            },
        ];
        let mut buf = Vec::new();
        {
            let mut s = Sarif::new(&mut buf, rules);
            s.record(&finding("b", Severity::High, &["CVE-2014-0160"])).unwrap();
            s.record(&finding("a", Severity::Info, &[])).unwrap();
            s.record(&finding("z", Severity::Medium, &[])).unwrap();
            s.close().unwrap();
        }
        let v: Value = serde_json::from_slice(&buf).unwrap();
        let run = &v["runs"][0];
        assert_eq!(v["version"], "2.1.0");
        let results = run["results"].as_array().unwrap();
        assert_eq!(results.len(), 3);
        assert_eq!(results[0]["ruleId"], "b");
        assert_eq!(results[0]["ruleIndex"], 1);
        assert_eq!(results[0]["level"], "error");
        assert_eq!(results[0]["properties"]["cve"], json!(["CVE-2014-0160"]));
        assert_eq!(results[0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"], "tcp://[2001:2::2]:443");
        assert_eq!(results[1]["level"], "none");
        // A plugin not among the rules still has its result, without an index.
        assert!(results[2].get("ruleIndex").is_none());
        let rule_b = &run["tool"]["driver"]["rules"][1];
        assert_eq!(rule_b["helpUri"], "https://example.org/b");
        assert_eq!(rule_b["help"]["text"], "Turn it off.");
        assert_eq!(rule_b["properties"]["tags"], json!(["safe", "tls"]));
        assert_eq!(run["tool"]["driver"]["rules"][0]["shortDescription"]["text"], "Says a");
        // No scan_end (interrupted before it): the run did not succeed.
        assert_eq!(run["invocations"][0]["executionSuccessful"], false);
        let argv = ["moonscan", "--script-args", "user=a,pass=s3cret", "--script-args=pass=x", "-p", "22"];
        let line = command_line(&argv.map(String::from));
        assert_eq!(line, "moonscan --script-args <redacted> --script-args=<redacted> -p 22");
    }
}
