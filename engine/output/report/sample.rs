//! Events of a small scan for the three formats' tests.

use crate::findings::*;

/// Feeds `events` to `sink` and closes it twice (the second close must write nothing).
pub fn feed(sink: &mut dyn crate::output::Sink, events: &[Event]) {
    for e in events {
        sink.record(e).unwrap();
    }
    sink.close().unwrap();
    sink.close().unwrap();
}

pub fn ip(s: &str) -> std::net::IpAddr {
    s.parse().unwrap()
}

/// A scan_start whose settings are what the command line `args` asks
/// for (the fixtures' only reader of flags: `-p SPEC`, `-sV`, `-v`).
pub fn start(args: &str, planned: u64) -> Event {
    let words: Vec<&str> = args.split(' ').collect();
    let spec = words.iter().position(|w| *w == "-p").map(|i| words[i + 1]).unwrap_or("1-1000");
    Event::ScanStart(ScanStart {
        scan_id: "0123456789abcdef".into(),
        started: humantime::parse_rfc3339("2026-11-21T16:41:03.250Z").unwrap(),
        args: words.iter().map(|w| w.to_string()).collect(),
        scan_type: ScanType::Syn,
        seed: 1,
        probes_planned: planned,
        settings: ScanSettings {
            ports: crate::targets::parse_ports(spec).unwrap().tcp,
            service_detection: words.contains(&"-sV"),
            verbosity: words.iter().filter(|w| **w == "-v").count() as u8,
            ..ScanSettings::default()
        },
    })
}

pub fn port(addr: &str, port: u16, state: PortState, t: f64) -> Event {
    let reason = match state {
        PortState::Open => Reason::SynAck,
        PortState::Closed | PortState::Unfiltered => Reason::Reset,
        PortState::Filtered | PortState::OpenFiltered => Reason::NoResponse,
    };
    let scan_id = "0123456789abcdef".into();
    Event::Port(PortEvent { scan_id, ip: ip(addr), port, proto: Proto::Tcp, state, reason, ttl: Some(64), t })
}

pub fn service(addr: &str, port: u16, name: &str, product: Option<&str>, version: Option<&str>) -> Service {
    let mut s = Service::bare("0123456789abcdef".into(), ip(addr), port, Proto::Tcp);
    s.id = Identity {
        service: name.into(),
        product: product.map(String::from),
        version: version.map(String::from),
        ..Identity::default()
    };
    s.method = ServiceMethod::Probed;
    s.t = 0.5;
    s
}

pub fn finding(addr: &str, port: u16, plugin: &str, title: &str, data: serde_json::Value) -> Event {
    Event::Finding(Box::new(FindingEvent {
        scan_id: "0123456789abcdef".into(),
        ip: ip(addr),
        port,
        proto: Proto::Tcp,
        plugin: plugin.into(),
        severity: Severity::Info,
        title: title.into(),
        data,
        about: Default::default(),
        host: false,
        targetname: None,
        t: 0.75,
    }))
}

/// A plugin's script result: `data` and its `output` text.
pub fn result(addr: &str, port: u16, plugin: &str, output: &str, data: serde_json::Value) -> Event {
    Event::Script(Box::new(ScriptEvent {
        scan_id: "0123456789abcdef".into(),
        ip: ip(addr),
        port,
        proto: Proto::Tcp,
        plugin: plugin.into(),
        output: output.into(),
        data,
        volatile: Vec::new(),
        host: false,
        targetname: None,
        t: 0.75,
    }))
}

/// A host script result (a `scope = "host"` plugin's) found on `port`.
pub fn host_result(addr: &str, port: u16, plugin: &str, output: &str, data: serde_json::Value) -> Event {
    let Event::Script(mut r) = result(addr, port, plugin, output, data) else { unreachable!() };
    r.host = true;
    Event::Script(r)
}

pub fn end(elapsed: f64, errors: u64) -> Event {
    Event::ScanEnd(ScanEnd { scan_id: "0123456789abcdef".into(), elapsed, errors, ..ScanEnd::default() })
}

/// Two hosts, out of order, with services, scripts and a closed port.
pub fn scan() -> Vec<Event> {
    let mut ssh = service("198.18.0.2", 22, "ssh", Some("OpenSSH"), Some("9.2p1 Debian 2+deb12u10"));
    ssh.id.info = Some("protocol 2.0".into());
    ssh.id.os = Some("Linux".into());
    ssh.id.cpe = vec!["cpe:/a:openbsd:openssh:9.2p1".into(), "cpe:/o:linux:linux_kernel".into()];
    let mut https = service("198.18.0.2", 443, "http", Some("nginx"), Some("1.22.1"));
    https.tunnel = Some(Tunnel::Ssl);
    let mut odd = service("198.18.0.10", 8080, "http-proxy", None, None);
    odd.method = ServiceMethod::Table;
    vec![
        start("moonscan -sV -sC -p 22,80,443,8080 198.18.0.2 198.18.0.10", 8),
        port("198.18.0.10", 8080, PortState::Open, 0.01),
        port("198.18.0.2", 443, PortState::Open, 0.02),
        port("198.18.0.2", 22, PortState::Open, 0.03),
        port("198.18.0.2", 80, PortState::Closed, 0.04),
        Event::Service(Box::new(https)),
        Event::Service(Box::new(ssh)),
        Event::Service(Box::new(odd)),
        result("198.18.0.2", 443, "http-title", "moonscan lab", serde_json::json!({"title": "moonscan lab"})),
        result(
            "198.18.0.2",
            22,
            "ssh-hostkey",
            "\n  256 a554a7d33ea2e0bb3358c39d677e3dfa (ED25519)",
            serde_json::json!([{"type": "ssh-ed25519", "bits": "256", "fingerprint": "a554a7d33ea2e0bb3358c39d677e3dfa"}]),
        ),
        {
            let mut f = finding("198.18.0.2", 22, "ssh-hostkey", "SSH host key shared", serde_json::json!(null));
            if let Event::Finding(f) = &mut f {
                f.severity = Severity::Low;
            }
            f
        },
        finding(
            "198.18.0.2",
            443,
            "http-headers",
            "Missing X-Frame-Options header",
            serde_json::json!({"header": "X-Frame-Options"}),
        ),
        finding(
            "198.18.0.2",
            443,
            "http-headers",
            "Server version disclosed",
            serde_json::json!({"server": "nginx/1.22.1"}),
        ),
        Event::Extraports(ExtraportsEvent {
            scan_id: "0123456789abcdef".into(),
            ip: ip("198.18.0.10"),
            proto: Proto::Tcp,
            state: PortState::Closed,
            reason: Reason::Reset,
            count: 2,
            ports: Vec::new(),
        }),
        end(1.5, 0),
    ]
}

/// 198.18.0.12 given as `alpha.example`, `beta.example` and as an address,
/// with a site of its own under each name on 8443, a script result under
/// beta, and its reverse DNS name (`ptr`, if any) arriving last.
pub fn named_scan(ptr: Option<&str>) -> Vec<Event> {
    let mut start = start("moonscan -sV -sC -p 8443 alpha.example beta.example 198.18.0.12", 1);
    if let Event::ScanStart(s) = &mut start {
        let named =
            |name: &str, others: Vec<std::net::IpAddr>| Hostname { ip: ip("198.18.0.12"), name: name.into(), others };
        s.settings.hostnames = vec![named("alpha.example", vec![ip("198.18.0.13")]), named("beta.example", Vec::new())];
        s.settings.also_by_address = vec![ip("198.18.0.12")];
    }
    let site = |name: Option<&str>, product: &str| {
        let mut s = service("198.18.0.12", 8443, "https", Some(product), None);
        s.targetname = name.map(String::from);
        Event::Service(Box::new(s))
    };
    let Event::Script(mut title) =
        result("198.18.0.12", 8443, "http-title", "beta's own site", serde_json::Value::Null)
    else {
        unreachable!()
    };
    title.targetname = Some("beta.example".into());
    let mut evs = vec![
        start,
        port("198.18.0.12", 8443, PortState::Open, 0.01),
        site(None, "default-site"),
        site(Some("alpha.example"), "alpha-site"),
        site(Some("beta.example"), "beta-site"),
        Event::Script(title),
    ];
    if let Some(name) = ptr {
        let scan_id = "0123456789abcdef".into();
        evs.push(Event::Rdns(RdnsEvent { scan_id, ip: ip("198.18.0.12"), name: name.into(), t: 0.9 }));
    }
    evs.push(end(1.0, 0));
    evs
}
