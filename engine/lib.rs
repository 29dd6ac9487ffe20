//! moonscan: a Lua-scriptable network scanner, as a library.
//!
//! The scan is a streaming pipeline of stages joined by bounded channels
//! ([`pipeline`]): [`targets`] gives the scan order, [`discovery`] finds
//! open ports, [`service`] identifies what runs on them, [`plugins`] look at
//! each one, and [`output`] sinks consume the [`findings`] events. A slow
//! stage slows the one before it. The library never prints, parses no
//! command-line flags and keeps no global state.
//!
//! Describe a scan with [`Scan::builder`], start it on a tokio runtime, and
//! read its events as they come:
//!
//! ```no_run
//! use moonscan::findings::Event;
//!
//! #[tokio::main]
//! async fn main() -> moonscan::Result<()> {
//!     let mut scan = moonscan::Scan::builder()
//!         .targets(["198.18.0.2"])
//!         .ports("22,80,443")
//!         .service_detection(true)
//!         .scripts("default")
//!         .start()?;
//!     while let Some(event) = scan.next_event().await {
//!         match event {
//!             Event::Script(r) => println!("{}:{} {}: {}", r.ip, r.port, r.plugin, r.output.trim()),
//!             Event::Finding(f) => println!("{}:{} {} [{}]: {}", f.ip, f.port, f.plugin, f.severity, f.title),
//!             _ => {}
//!         }
//!     }
//!     let end = scan.finish().await?;
//!     println!("{} open ports in {:.2} s", end.open, end.elapsed);
//!     Ok(())
//! }
//! ```

#![deny(unsafe_code)]

pub mod builder;
pub mod core_files;
pub mod discovery;
pub mod error;
pub mod files;
pub mod findings;
pub mod net;
pub mod os;
pub mod output;
pub mod packs;
pub mod pattern;
pub mod pipeline;
pub mod places;
pub mod plugins;
pub mod rdns;
pub mod scan;
pub mod service;
pub mod targets;

pub use builder::{Scan, ScanBuilder, ScanHandle};
pub use error::{Error, ErrorKind, Result};
pub use scan::ScanConfig;

/// Entry points for the fuzz targets in fuzz/ (one line each there).
#[doc(hidden)]
pub mod fuzz {
    /// Parses a received frame as the SYN scanner does, with and without checksum checks.
    pub fn syn_reply(frame: &[u8]) {
        use crate::discovery::syn::reply::parse;
        use crate::net::packet::Checksum;
        for sum in [Checksum::Unchecked, Checksum::Unfinished, Checksum::Valid] {
            let _ = parse(frame, sum);
        }
    }

    /// Reads a frame as the UDP scan's receiver does: parsed, its echoed
    /// transaction id taken at an offset and length the input's first two
    /// bytes choose (as a probe file's `txid` would), then judged by a
    /// UDP scan's cookie.
    pub fn udp_reply(data: &[u8]) {
        use crate::discovery::syn::{reply::parse, Cookie};
        use crate::net::packet::Checksum;
        let [at, len, frame @ ..] = data else { return };
        let cookie = Cookie::new(1, 2, 2).for_scan(crate::findings::ScanType::Udp);
        if let Some(mut r) = parse(frame, Checksum::Unfinished) {
            let _ = r.echo(frame, usize::from(*at), usize::from(*len % 6));
            let _ = cookie.accepts(&r);
            let payloads = crate::discovery::payloads::Payloads::default();
            let _ = crate::discovery::syn::accept_udp(cookie, &payloads, r, frame);
        }
    }

    /// Host discovery's receiver: any frame parsed (ICMP echo, timestamp
    /// and mask replies among the rest), judged by a discovery cookie with
    /// every kind of probe, and read as a host's answer.
    pub fn ping_reply(data: &[u8]) {
        use crate::discovery::ping::{up_reason, HostPlan, PingCookie};
        use crate::discovery::syn::reply::parse;
        use crate::net::packet::Checksum;
        let mut probes = HostPlan::nmap_default().probes;
        for o in ["M", "U", "S22"] {
            let _ = HostPlan::add_option(&mut probes, o);
        }
        let cookie = PingCookie::new(3, 4, 2, &probes);
        if let Some(r) = parse(data, Checksum::Unfinished) {
            if let Some((_, a)) = cookie.accepts(&r) {
                let _ = up_reason(&a);
            }
        }
    }

    /// On-link discovery's receiver: any frame read as an ARP reply or a
    /// neighbour advertisement, with and without the checksum checked, and
    /// judged against a request from one source of each family.
    pub fn neighbour_reply(frame: &[u8]) {
        use crate::discovery::syn::{neighbour::parse, Hop};
        use crate::net::packet::Checksum;
        for sum in [Checksum::Unchecked, Checksum::Valid] {
            if let Some(a) = parse(frame, sum) {
                for src in [[198, 18, 0, 1].into(), std::net::Ipv6Addr::LOCALHOST.into()] {
                    let _ = a.answers(&Hop { src_mac: [2, 0, 0, 0, 0, 1], dst_mac: [0; 6], src });
                }
            }
        }
    }

    /// A server's first flight as the TLS first-flight reader takes it:
    /// whole, then in pieces whose sizes the input's first byte sets; a
    /// flight that is read is turned into the `tls` object.
    pub fn server_flight(data: &[u8]) {
        use crate::net::hello::{info, FlightReader};
        let Some((&step, bytes)) = data.split_first() else { return };
        if let Ok(Some(f)) = FlightReader::new().push(bytes) {
            let _ = info(&f, "hello");
        }
        let mut r = FlightReader::new();
        for piece in bytes.chunks(usize::from(step).max(1)) {
            match r.push(piece) {
                Ok(None) => {}
                Ok(Some(f)) => {
                    let _ = info(&f, "hello");
                    break;
                }
                Err(_) => break,
            }
        }
        let _ = r.closed();
    }

    /// An RPC reply as the grinder reads it (engine/service/rpc.rs): to any
    /// call, with the xid it carries, and a DUMP's list in what follows.
    pub fn rpc_reply(data: &[u8]) {
        use crate::service::rpc::{parse_dump, parse_reply, Reply};
        let xid = data.get(..4).map_or(0, |w| u32::from_be_bytes([w[0], w[1], w[2], w[3]]));
        let _ = parse_reply(data, xid ^ 1);
        if let Ok(Reply::Success(body)) = parse_reply(data, xid) {
            let _ = parse_dump(body);
        }
        let _ = parse_dump(data);
    }

    /// Every STARTTLS exchange against a server whose replies are `data`.
    pub fn starttls_reply(data: &[u8]) {
        use crate::net::starttls::Starttls;
        for name in Starttls::NAMES {
            if let Some(p) = Starttls::parse(name) {
                let _ = p.replay(data);
            }
        }
    }

    /// Loads arbitrary text as a probe file (invalid UTF-8 replaced); a file
    /// that loads has its rules tried on the text itself.
    pub fn probe_yaml(data: &[u8]) {
        use crate::service::ProbeDb;
        let text = String::from_utf8_lossy(data);
        let mut db = ProbeDb::default();
        if db.add_str(&text, std::path::Path::new("fuzz.yaml")).is_ok() {
            for probe in db.probes() {
                for rule in probe.matches.iter().chain(&probe.soft_matches) {
                    let _ = rule.apply(data);
                }
            }
        }
    }

    /// The shipped probes/ (the fuzz target loads it once and keeps it).
    pub fn shipped_probes() -> crate::service::ProbeDb {
        let dir = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/probes"));
        crate::service::ProbeDb::load_dir(dir)
            .unwrap_or_else(|e| panic!("fuzz setup: cannot load {}: {e}", dir.display()))
    }

    /// `pattern 0xff response` (no 0xff: all response, empty pattern): the
    /// pattern compiled as a rule with templates, applied to the response;
    /// then every rule of the shipped probes/ applied to the response.
    pub fn match_rules(shipped: &crate::service::ProbeDb, data: &[u8]) {
        use crate::service::rules::{compile, Identity, Rule};

        let (pattern, response) = match data.iter().position(|&b| b == 0xff) {
            Some(i) => (&data[..i], &data[i + 1..]),
            None => (&[][..], data),
        };
        let pattern = String::from_utf8_lossy(pattern);
        let template = Identity {
            service: "x".into(),
            product: Some("$P(9)$".into()),
            version: Some("$1 $P(2)".into()),
            info: Some("$$4$0$P($P(1)".into()),
            cpe: vec!["a:$3".into(), "$P(3):$9".into()],
            ..Identity::default()
        };
        let _ = compile(&pattern);
        if let Ok(rule) = Rule::new(&pattern, template) {
            let _ = rule.apply(response);
        }
        for probe in shipped.probes() {
            for rule in probe.matches.iter().chain(&probe.soft_matches) {
                let _ = rule.apply(response);
            }
        }
    }

    /// Summarises arbitrary bytes as a certificate's DER.
    pub fn cert_summary(der: &[u8]) {
        let s = crate::service::tls::summarise(der);
        assert_eq!(s.sha256.len(), 64, "fingerprint {:?}", s.sha256);
    }
}
