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
            ports: crate::ports::parse_ports(spec).unwrap().tcp,
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

/// What OS detection found on a lab host, as nmap 7.93 printed it
/// (`tests/data/nmap-os/`): too many fingerprints match (no open port in
/// the lab to probe), probes sent to closed TCP 1 and closed UDP `udp`,
/// `hops` away, and with `-vv` the fingerprint nmap printed.
pub fn lab_os(addr: &str, udp: u16, hops: u8, fingerprint: Option<&str>) -> OsEvent {
    OsEvent {
        scan_id: "0123456789abcdef".into(),
        ip: ip(addr),
        ports_used: vec![
            PortUsed { state: "closed".into(), proto: Proto::Tcp, port: 1 },
            PortUsed { state: "closed".into(), proto: Proto::Udp, port: udp },
        ],
        matches: Vec::new(),
        exact: false,
        too_many: true,
        guess: false,
        classification: Vec::new(),
        fingerprint: fingerprint.map(String::from),
        not_ideal: None,
        distance: Some(hops),
        uptime: None,
        tcp_sequence: None,
        ip_id_sequence: None,
        tcp_ts_sequence: None,
        hint: None,
        t: 1.25,
    }
}

/// One of nmap 7.93's runs in the lab (`tests/data/nmap-os/NAME.*`,
/// `nmap -O [-v|-vv] -p 22,80,443,6379,1 ADDR`; 198.18.0.5 with `-p
/// 21,22,25,80,443,1`) as moonscan's events: the host (its discovery
/// reason, latency and MAC as nmap saw them), its closed ports and its OS.
pub fn lab_os_scan(name: &str) -> Vec<Event> {
    const FP: &str = "SEQ(CI=Z%II=I)\nT5(R=Y%DF=Y%T=40%W=0%S=Z%A=S+%F=AR%O=%RD=0%Q=)\n\
                      T6(R=Y%DF=Y%T=40%W=0%S=A%A=Z%F=R%O=%RD=0%Q=)\nT7(R=Y%DF=Y%T=40%W=0%S=Z%A=S+%F=AR%O=%RD=0%Q=)\n\
                      U1(R=Y%DF=N%T=40%IPL=164%UN=0%RIPL=G%RID=G%RIPCK=G%RUCK=G%RUD=G)\nIE(R=Y%DFI=N%T=40%CD=S)";
    let (addr, verbose, udp, latency, fp) = match name {
        "lab2-O" => ("198.18.0.2", "", 42223, 0.000081, None),
        "lab2-Ov" => ("198.18.0.2", "-v ", 37128, 0.000078, None),
        "lab12-Ov" => ("198.18.1.2", "-v ", 30203, 0.000072, None),
        "lab12-Ovv" => (
            "198.18.1.2",
            "-v -v ",
            37226,
            0.000069,
            Some("SCAN(V=7.93%E=4%D=11/28%OT=%CT=1%CU=37226%PV=N%DS=2%DC=I%G=N%TM=6B0A8061%P=x86_64-pc-linux-gnu)"),
        ),
        "lab5-Ov" => ("198.18.0.5", "-v ", 36105, 0.000069, None),
        "lab5-Ovv" => (
            "198.18.0.5",
            "-v -v ",
            31883,
            0.000072,
            Some(
                "SCAN(V=7.93%E=4%D=11/28%OT=%CT=1%CU=31883%PV=N%DS=1%DC=D%G=N%M=6E4E7E%TM=6B0A80B0%P=x86_64-pc-linux-gnu)",
            ),
        ),
        _ => panic!("no recording {name}"),
    };
    let remote = addr == "198.18.1.2";
    let ports: &[u16] = if addr == "198.18.0.5" { &[1, 21, 22, 25, 80, 443] } else { &[1, 22, 80, 443, 6379] };
    let spec: Vec<String> = ports.iter().map(u16::to_string).collect();
    let mut evs = vec![
        start(&format!("moonscan -O {verbose}-p {} {addr}", spec.join(",")), ports.len() as u64),
        Event::Host(HostEvent {
            scan_id: "0123456789abcdef".into(),
            ip: ip(addr),
            state: HostState::Up,
            reason: if remote { Reason::EchoReply } else { Reason::ArpResponse },
            ttl: remote.then_some(63),
            latency: Some(latency),
            mac: (!remote).then(|| "6E:4E:7E:1D:FA:D1".to_string()),
            t: 0.01,
        }),
    ];
    for &p in ports {
        let Event::Port(mut e) = port(addr, p, PortState::Closed, 0.02) else { unreachable!() };
        e.ttl = Some(if remote { 63 } else { 64 });
        evs.push(Event::Port(e));
    }
    // nmap made a fingerprint in every run and printed it with -vv only:
    // the quieter runs' events hold one too (their SCAN line made up).
    let hops = if remote { 2 } else { 1 };
    let scan = fp.map_or_else(|| format!("SCAN(V=7.93%E=4%D=11/28%OT=%CT=1%CU={udp}%PV=N%DS={hops})"), String::from);
    let fp = Some(format!("{scan}\n{FP}"));
    evs.push(Event::Os(Box::new(lab_os(addr, udp, hops, fp.as_deref()))));
    evs.push(end(14.67, 0));
    evs
}

/// An OS that matched exactly: two Linux fingerprints of nmap-os-db (as
/// nmap 7.93 names them), with uptime and the sequence classes.
pub fn linux_os(addr: &str) -> OsEvent {
    let class = |gen: &str, cpe: &str| OsClass {
        vendor: "Linux".into(),
        family: "Linux".into(),
        generation: Some(gen.into()),
        device_type: "general purpose".into(),
        accuracy: 100,
        cpe: vec![cpe.into()],
    };
    OsEvent {
        scan_id: "0123456789abcdef".into(),
        ip: ip(addr),
        ports_used: vec![
            PortUsed { state: "open".into(), proto: Proto::Tcp, port: 22 },
            PortUsed { state: "closed".into(), proto: Proto::Tcp, port: 80 },
            PortUsed { state: "closed".into(), proto: Proto::Udp, port: 40125 },
        ],
        matches: vec![OsMatch {
            name: "Linux 4.15 - 5.8".into(),
            accuracy: 100,
            line: 69748,
            classes: vec![
                class("4.X", "cpe:/o:linux:linux_kernel:4"),
                class("5.X", "cpe:/o:linux:linux_kernel:5"),
            ],
        }],
        exact: true,
        too_many: false,
        guess: false,
        classification: Vec::new(),
        fingerprint: Some("OS:SCAN(V=7.93%E=4%D=11/28%OT=22%CT=80%CU=40125%PV=Y%DS=1%DC=D%G=Y%TM=6B0A8061%P=x\nOS:86_64-pc-linux-gnu)".into()),
        not_ideal: None,
        distance: Some(1),
        uptime: Some(Uptime { seconds: 1_066_210, lastboot: "Sun Nov 15 23:10:53 2026".into() }),
        tcp_sequence: Some(Sequence {
            class: "Good luck!".into(),
            index: Some(262),
            values: "A1B2C3D4,1F2E3D4C,55AA55AA,12345678,9ABCDEF0,0FEDCBA9".into(),
        }),
        ip_id_sequence: Some(Sequence { class: "All zeros".into(), index: None, values: "0,0,0,0,0,0".into() }),
        tcp_ts_sequence: Some(Sequence {
            class: "1000HZ".into(),
            index: None,
            values: "3F8A1C20,3F8A1C84,3F8A1CE8,3F8A1D4C,3F8A1DB0,3F8A1E14".into(),
        }),
        hint: None,
        t: 2.5,
    }
}

/// A traceroute of two hops, the first silent.
pub fn trace(addr: &str) -> TraceEvent {
    TraceEvent {
        scan_id: "0123456789abcdef".into(),
        ip: ip(addr),
        port: 80,
        proto: Proto::Tcp,
        hops: vec![
            TraceHop { ttl: 1, ip: None, rtt_ms: None, host: None },
            TraceHop { ttl: 2, ip: Some(ip(addr)), rtt_ms: Some(0.21), host: Some("target.lab".into()) },
        ],
        t: 2.75,
    }
}

/// [`scan`] with -O's result and a traceroute for 198.18.0.2, and a
/// passive hint alone for 198.18.0.10.
pub fn os_scan() -> Vec<Event> {
    let mut evs = scan();
    let end = evs.pop().unwrap();
    evs.push(Event::Os(Box::new(linux_os("198.18.0.2"))));
    evs.push(Event::Trace(Box::new(trace("198.18.0.2"))));
    let mut hint = lab_os("198.18.0.10", 0, 0, None);
    hint.ports_used.clear();
    hint.too_many = false;
    hint.distance = None;
    hint.hint = Some(OsHint { family: "Linux".into(), evidence: "ttl=64 win=65160 mss=1460 opts=M,S,T,N,W7".into() });
    evs.push(Event::Os(Box::new(hint)));
    evs.push(end);
    evs
}
