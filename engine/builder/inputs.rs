//! What a scan reads from its settings and files: target terms and lists
//! (hostnames resolved once), port specs, and the plugins it can select.

use std::net::IpAddr;
use std::path::Path;

use super::{PortNumbers, Ports, ScanBuilder};
use crate::error::{Error, ErrorKind, Result};
use crate::findings::Hostname;
use crate::plugins::Plugin;
use crate::targets::addrs::AddrSetBuilder;
use crate::targets::{self, AddrSet, Family, Term};

impl ScanBuilder {
    /// The targets and the excluded addresses (hostnames resolved now),
    /// and the targets given by name with the address each resolved to.
    pub(super) fn address_sets(&self) -> Result<(AddrSet, AddrSet, Vec<Hostname>)> {
        let family = if self.ipv6 { Family::OnlyV6 } else { Family::PreferV4 };
        let mut include = AddrSetBuilder::default();
        let mut names = Vec::new();
        for t in &self.targets {
            add_term(&mut include, t, self.no_dns, family, Some(&mut names))?;
        }
        for path in &self.target_files {
            read_list(path, "-iL", |t| add_term(&mut include, t, self.no_dns, family, Some(&mut names)))?;
        }
        if include.is_empty() {
            return Err(Error::new(ErrorKind::TargetSpec, "no targets given (see moonscan --help)"));
        }
        let include = include.finish()?;
        let mut exclude = AddrSetBuilder::default();
        for t in self.exclude.iter().filter(|t| !t.trim().is_empty()) {
            add_term(&mut exclude, t, self.no_dns, family, None)?;
        }
        for path in &self.exclude_files {
            read_list(path, "--excludefile", |t| add_term(&mut exclude, t, self.no_dns, family, None))?;
        }
        let exclude = exclude.finish()?;
        names.sort();
        names.dedup();
        Ok((include, exclude, names))
    }

    /// False when every target named is a loopback address or `localhost`
    /// (the SYN engine cannot probe those).
    pub(super) fn any_remote_target(&self) -> bool {
        let loopback = |t: &str| {
            t == "localhost"
                || t.split('/').next().and_then(|a| a.parse::<IpAddr>().ok()).is_some_and(|a| a.is_loopback())
        };
        self.targets.is_empty() || !self.target_files.is_empty() || !self.targets.iter().all(|t| loopback(t))
    }

    /// Whether the port spec names UDP ports with `U:`.
    pub(super) fn ports_name_udp(&self) -> bool {
        let udp = |t: &str| t.trim_start().get(..2).is_some_and(|p| p.eq_ignore_ascii_case("u:"));
        matches!(&self.ports, Some(Ports::Spec(s)) if s.split(',').any(udp))
    }

    /// The TCP and the UDP ports to scan, for the protocols asked.
    pub(super) fn port_list(&self, tcp: bool, udp: bool) -> Result<(Option<PortNumbers>, Option<PortNumbers>)> {
        let one = |proto: targets::Proto| -> Result<Vec<u16>> {
            let pick = |l: targets::PortList| if proto == targets::Proto::Tcp { l.tcp } else { l.udp };
            let list = match &self.ports {
                Some(Ports::Spec(spec)) => pick(targets::parse_ports(spec)?),
                Some(Ports::Top(0)) => {
                    return Err(Error::new(ErrorKind::PortSpec, "--top-ports needs a number above 0"))
                }
                Some(Ports::Top(n)) => targets::top_ports(proto, *n),
                None => targets::top_ports(proto, 1000),
            };
            let name = if proto == targets::Proto::Tcp { "TCP" } else { "UDP" };
            if list.is_empty() {
                return Err(Error::new(ErrorKind::PortSpec, format!("the port spec names no {name} ports")));
            }
            let mut skip = Vec::new();
            for spec in &self.exclude_ports {
                skip.extend(pick(targets::parse_ports(spec)?));
            }
            let list: Vec<u16> = list.into_iter().filter(|p| !skip.contains(p)).collect();
            if list.is_empty() {
                return Err(Error::new(ErrorKind::PortSpec, "--exclude-ports leaves no port to scan"));
            }
            Ok(list)
        };
        match (tcp, udp) {
            // Both asked: a protocol the spec names no port of is left out,
            // so long as the other has some.
            (true, true) => match (one(targets::Proto::Tcp), one(targets::Proto::Udp)) {
                (Ok(t), Ok(u)) => Ok((Some(t), Some(u))),
                (Ok(t), Err(_)) => Ok((Some(t), None)),
                (Err(_), Ok(u)) => Ok((None, Some(u))),
                (Err(e), Err(_)) => Err(e),
            },
            (tcp, udp) => Ok((
                tcp.then(|| one(targets::Proto::Tcp)).transpose()?,
                udp.then(|| one(targets::Proto::Udp)).transpose()?,
            )),
        }
    }
}

/// Every plugin a scan can select: the plugin folder (plugins/, the pack
/// core) and the installed packs' plugins, compiled from the bytes their
/// verification checked.
pub fn available_plugins(plugin_dir: &Path, packs: Vec<crate::packs::InstalledPack>) -> Result<Vec<Plugin>> {
    // Metadata cached as for installed packs: a scan runs only the plugins
    // it selects, not every file of the folder to read its table.
    let cache = crate::packs::meta_cache_dir(&crate::packs::data_dir()?);
    let mut plugins =
        if plugin_dir.is_dir() { crate::plugins::load_pack_dir_cached(plugin_dir, Some(&cache))? } else { Vec::new() };
    for pack in packs {
        for p in pack.plugins {
            crate::plugins::add_unique(&mut plugins, p.in_pack(&pack.name, pack.trusted))?;
        }
    }
    Ok(plugins)
}

/// Longest line of a target list.
const MAX_LIST_LINE: usize = 4096;
/// Largest target list read (it is read as a stream, a line at a time).
const MAX_LIST: u64 = 1 << 30;

/// Calls `f` with each target term of a file (`-` for stdin), read as a
/// stream: whitespace-separated, `#` starts a comment.
fn read_list(path: &Path, flag: &str, mut f: impl FnMut(&str) -> Result<()>) -> Result<()> {
    let each = |line: &str| -> Result<()> {
        for t in line.split('#').next().unwrap_or("").split_whitespace() {
            f(t)?;
        }
        Ok(())
    };
    if path.as_os_str() == "-" {
        return crate::files::for_each_line(std::io::stdin().lock(), path, flag, MAX_LIST_LINE, MAX_LIST, each);
    }
    let file = std::fs::File::open(path)
        .map_err(|e| Error::with_source(ErrorKind::Config, format!("{flag} {}: {e}", path.display()), e))?;
    crate::files::for_each_line(file, path, flag, MAX_LIST_LINE, MAX_LIST, each)
}

/// Adds one target term's addresses (a hostname is resolved now, and
/// noted in `names` with its address).
fn add_term(
    set: &mut AddrSetBuilder,
    t: &str,
    no_dns: bool,
    family: Family,
    names: Option<&mut Vec<Hostname>>,
) -> Result<()> {
    match targets::parse_term(t)? {
        Term::Ranges(r) => {
            if family == Family::OnlyV6 && r.iter().any(|&(lo, _)| targets::addrs::addr(lo).is_ipv4()) {
                return Err(Error::new(ErrorKind::TargetSpec, format!("-6 was given but '{t}' is an IPv4 target")));
            }
            for range in r {
                set.push(range)?;
            }
        }
        Term::Host(name) if no_dns => {
            return Err(Error::new(
                ErrorKind::Resolve,
                format!("'{name}' is a hostname, and -n disables DNS resolution"),
            ));
        }
        Term::Host(name) => {
            let ip = targets::resolve(&name, family)?;
            let k = targets::addrs::key(ip);
            set.push((k, k))?;
            if let Some(names) = names {
                names.push(Hostname { ip, name });
            }
        }
    }
    Ok(())
}
