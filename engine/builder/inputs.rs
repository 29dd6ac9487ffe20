//! What a scan reads from its settings and files: target terms and lists
//! (hostnames resolved once), port specs, and the plugins it can select.

use std::net::IpAddr;
use std::path::Path;

use super::{PortNumbers, Ports, ScanBuilder};
use crate::error::{Error, ErrorKind, Result};
use crate::findings::Hostname;
use crate::plugins::Plugin;
use crate::ports;
use crate::targets::addrs::AddrSetBuilder;
use crate::targets::{self, AddrSet, Family, Term};

impl ScanBuilder {
    /// The targets and the excluded addresses (hostnames resolved now), the
    /// targets given by name with the address each resolved to, and the
    /// named addresses that were also given as addresses (each a target of
    /// its own, as nmap scans it).
    pub(super) fn address_sets(&self) -> Result<Targets> {
        self.address_sets_with(&targets::system_addresses)
    }

    /// As [`ScanBuilder::address_sets`], with names resolved by `lookup`
    /// (every address a name has).
    fn address_sets_with(&self, lookup: &dyn Fn(&str) -> Result<Vec<IpAddr>>) -> Result<Targets> {
        let family = if self.ipv6 { Family::OnlyV6 } else { Family::PreferV4 };
        let how = Resolve { family, all: self.resolve_all, lookup };
        let mut include = AddrSetBuilder::default();
        let mut names = Vec::new();
        for t in &self.targets {
            add_term(&mut include, t, how, Some(&mut names))?;
        }
        for path in &self.target_files {
            read_list(path, "`target_file`", |t| add_term(&mut include, t, how, Some(&mut names)))?;
        }
        if include.is_empty() && names.is_empty() {
            return Err(Error::new(ErrorKind::TargetSpec, "no targets given (see `targets`)"));
        }
        // The addresses given as addresses, before the names' join them.
        let by_address = include.finish()?;
        let also_by_address: Vec<IpAddr> = {
            let mut a: Vec<IpAddr> =
                names.iter().map(|h: &Hostname| h.ip).filter(|&ip| by_address.contains(ip)).collect();
            a.sort();
            a.dedup();
            a
        };
        let mut include = AddrSetBuilder::default();
        for &r in by_address.ranges() {
            include.push(r)?;
        }
        for h in &names {
            let k = targets::addrs::key(h.ip);
            include.push((k, k))?;
        }
        let include = include.finish()?;
        let mut exclude = AddrSetBuilder::default();
        for t in self.exclude.iter().filter(|t| !t.trim().is_empty()) {
            add_term(&mut exclude, t, how, None)?;
        }
        for path in &self.exclude_files {
            read_list(path, "`exclude_file`", |t| add_term(&mut exclude, t, how, None))?;
        }
        let exclude = exclude.finish()?;
        names.sort();
        names.dedup_by(|a, b| a.ip == b.ip && a.name == b.name);
        Ok(Targets { include, exclude, names, also_by_address })
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
        let one = |proto: ports::Proto| -> Result<Vec<u16>> {
            let pick = |l: ports::PortList| if proto == ports::Proto::Tcp { l.tcp } else { l.udp };
            let list = match &self.ports {
                Some(Ports::Spec(spec)) => pick(ports::parse_ports(spec)?),
                Some(Ports::Top(0)) => {
                    return Err(Error::new(ErrorKind::PortSpec, "`top_ports` needs a number above 0"))
                }
                Some(Ports::Top(n)) => ports::top_ports(proto, *n),
                None => ports::top_ports(proto, 1000),
            };
            let name = if proto == ports::Proto::Tcp { "TCP" } else { "UDP" };
            if list.is_empty() {
                return Err(Error::new(ErrorKind::PortSpec, format!("the port spec names no {name} ports")));
            }
            let mut skip = Vec::new();
            for spec in &self.exclude_ports {
                skip.extend(pick(ports::parse_ports(spec)?));
            }
            let list: Vec<u16> = list.into_iter().filter(|p| !skip.contains(p)).collect();
            if list.is_empty() {
                return Err(Error::new(ErrorKind::PortSpec, "`exclude_ports` leaves no port to scan"));
            }
            Ok(list)
        };
        match (tcp, udp) {
            // Both asked: a protocol the spec names no port of is left out,
            // so long as the other has some.
            (true, true) => match (one(ports::Proto::Tcp), one(ports::Proto::Udp)) {
                (Ok(t), Ok(u)) => Ok((Some(t), Some(u))),
                (Ok(t), Err(_)) => Ok((Some(t), None)),
                (Err(_), Ok(u)) => Ok((None, Some(u))),
                (Err(e), Err(_)) => Err(e),
            },
            (tcp, udp) => {
                Ok((tcp.then(|| one(ports::Proto::Tcp)).transpose()?, udp.then(|| one(ports::Proto::Udp)).transpose()?))
            }
        }
    }
}

/// Every plugin a scan can select: the plugin folder (plugins/, the pack
/// core) and the installed packs' plugins, compiled from the bytes their
/// verification checked.
/// The metadata cache is in the data folder `places` names (none without one).
pub fn available_plugins(
    plugin_dir: &Path,
    packs: Vec<crate::packs::InstalledPack>,
    places: &crate::places::Places,
) -> Result<Vec<Plugin>> {
    // Metadata cached as for installed packs: a scan runs only the plugins
    // it selects, not every file of the folder to read its table.
    let cache = match places.data {
        crate::places::DataDir::None => None,
        _ => Some(crate::packs::meta_cache_dir(&crate::packs::data_dir(places)?)),
    };
    let mut plugins = if plugin_dir.is_dir() {
        crate::plugins::load_pack_dir_cached(plugin_dir, cache.as_deref())?
    } else {
        Vec::new()
    };
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
fn read_list(path: &Path, setting: &str, mut f: impl FnMut(&str) -> Result<()>) -> Result<()> {
    let each = |line: &str| -> Result<()> {
        for t in line.split('#').next().unwrap_or("").split_whitespace() {
            f(t)?;
        }
        Ok(())
    };
    if path.as_os_str() == "-" {
        return crate::files::for_each_line(std::io::stdin().lock(), path, setting, MAX_LIST_LINE, MAX_LIST, each);
    }
    let file = std::fs::File::open(path)
        .map_err(|e| Error::with_source(ErrorKind::Config, format!("{setting} {}: {e}", path.display()), e))?;
    crate::files::for_each_line(file, path, setting, MAX_LIST_LINE, MAX_LIST, each)
}

/// What the address sets are, once the names are resolved.
pub(super) struct Targets {
    pub include: AddrSet,
    pub exclude: AddrSet,
    /// The targets given by name, each with its address.
    pub names: Vec<Hostname>,
    /// Named addresses also given as addresses.
    pub also_by_address: Vec<IpAddr>,
}

/// How names are resolved: the family (`-6`), and every address or the
/// first (`--resolve-all`).
#[derive(Clone, Copy)]
struct Resolve<'a> {
    family: Family,
    all: bool,
    lookup: &'a dyn Fn(&str) -> Result<Vec<IpAddr>>,
}

/// Adds one target term's addresses to `set`; a hostname is resolved now
/// and, for targets, noted in `names` with each address it is scanned at
/// (and the others it has), or, for exclusions, every address it has
/// added to `set`.
fn add_term(set: &mut AddrSetBuilder, t: &str, how: Resolve<'_>, names: Option<&mut Vec<Hostname>>) -> Result<()> {
    match targets::parse_term(t)? {
        Term::Ranges(r) => {
            if how.family == Family::OnlyV6 && r.iter().any(|&(lo, _)| targets::addrs::addr(lo).is_ipv4()) {
                return Err(Error::new(ErrorKind::TargetSpec, format!("-6 was given but '{t}' is an IPv4 target")));
            }
            for range in r {
                set.push(range)?;
            }
        }
        // An excluded name: every address it has, of either family.
        Term::Host(name) if names.is_none() => {
            for ip in (how.lookup)(&name)? {
                let k = targets::addrs::key(ip);
                set.push((k, k))?;
            }
        }
        Term::Host(name) => {
            let (wanted, others) = targets::pick_family(&name, (how.lookup)(&name)?, how.family)?;
            if let Some(names) = names {
                names.extend(scanned_at(&name, wanted, others, how.all));
            }
        }
    }
    Ok(())
}

/// The targets one name makes: its first address, with the rest noted as
/// not scanned, or (`--resolve-all`) every address of the wanted family.
fn scanned_at(name: &str, wanted: Vec<IpAddr>, others: Vec<IpAddr>, all: bool) -> Vec<Hostname> {
    if all {
        return wanted.into_iter().map(|ip| Hostname { ip, name: name.to_string(), others: Vec::new() }).collect();
    }
    let mut rest = wanted[1..].to_vec();
    rest.extend(others);
    vec![Hostname { ip: wanted[0], name: name.to_string(), others: rest }]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_name_is_scanned_at_its_first_address_or_at_every_one() {
        let wanted = vec![ip("198.18.0.2"), ip("198.18.0.3")];
        let others = vec![ip("2001:2::2")];
        let one = scanned_at("n.example", wanted.clone(), others.clone(), false);
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].ip, ip("198.18.0.2"));
        assert_eq!(one[0].others, [ip("198.18.0.3"), ip("2001:2::2")], "the rest, said as not scanned");
        let all = scanned_at("n.example", wanted, others, true);
        assert_eq!(all.iter().map(|h| h.ip).collect::<Vec<_>>(), [ip("198.18.0.2"), ip("198.18.0.3")]);
        assert!(all.iter().all(|h| h.name == "n.example" && h.others.is_empty()));
    }

    /// The address sets of `targets`, names resolved from a table.
    fn sets(targets: &[&str], six: bool) -> Result<Targets> {
        let lookup = |name: &str| -> Result<Vec<IpAddr>> {
            let table: &[(&str, &[&str])] = &[
                ("alpha.example", &["198.18.0.12"]),
                ("beta.example", &["198.18.0.12"]),
                ("two.example", &["198.18.0.2", "198.18.0.3", "2001:2::2"]),
                ("six.example", &["2001:2::2"]),
            ];
            let (_, addrs) = table
                .iter()
                .find(|(n, _)| *n == name)
                .ok_or_else(|| Error::new(ErrorKind::Resolve, format!("cannot resolve '{name}'")))?;
            Ok(addrs.iter().map(|a| ip(a)).collect())
        };
        let b = crate::builder::Scan::builder().targets(targets.iter().map(|t| t.to_string())).ipv6(six);
        b.address_sets_with(&lookup)
    }

    fn named(t: &Targets) -> Vec<(String, String)> {
        t.names.iter().map(|h| (h.ip.to_string(), h.name.clone())).collect()
    }

    #[test]
    fn two_names_of_one_address_are_two_targets_and_the_address_given_too_a_third() {
        let t = sets(&["alpha.example", "BETA.example", "198.18.0.12", "alpha.example"], false).unwrap();
        assert_eq!(t.include.len(), 1, "one address to probe");
        let want =
            [("198.18.0.12".to_string(), "alpha.example".to_string()), ("198.18.0.12".into(), "beta.example".into())];
        assert_eq!(named(&t), want, "two names, each once");
        assert_eq!(t.also_by_address, [ip("198.18.0.12")], "and the address itself");
        let t = sets(&["alpha.example", "198.18.0.0/30"], false).unwrap();
        assert_eq!(t.include.len(), 5, "the block and the name's address");
        assert!(t.also_by_address.is_empty(), "198.18.0.12 only by name");
        let t = sets(&["alpha.example", "198.18.0.8/29"], false).unwrap();
        assert_eq!(t.include.len(), 8);
        assert_eq!(t.also_by_address, [ip("198.18.0.12")], "an address in a block is given as an address");
    }

    #[test]
    fn a_name_and_its_families() {
        let t = sets(&["two.example"], false).unwrap();
        assert_eq!(named(&t), [("198.18.0.2".to_string(), "two.example".to_string())]);
        assert_eq!(t.names[0].others, [ip("198.18.0.3"), ip("2001:2::2")]);
        let mut b = crate::builder::Scan::builder().targets(["two.example"]);
        b.resolve_all = true;
        let lookup = |_: &str| Ok(vec![ip("198.18.0.2"), ip("198.18.0.3"), ip("2001:2::2")]);
        let t = b.address_sets_with(&lookup).unwrap();
        assert_eq!(t.include.len(), 2, "--resolve-all: both IPv4 addresses, no IPv6 without -6");
        let t = sets(&["two.example"], true).unwrap();
        assert_eq!(named(&t), [("2001:2::2".to_string(), "two.example".to_string())], "-6: the AAAA");
        let e = sets(&["six.example"], false).err().unwrap().to_string();
        assert!(e.contains("only IPv6 addresses") && e.contains("`ipv6`"), "{e}");
        let e = sets(&["nowhere.example"], false).err().unwrap().to_string();
        assert!(e.contains("cannot resolve 'nowhere.example'"), "{e}");
    }

    #[test]
    fn an_excluded_name_takes_out_every_address_it_has() {
        let mut b = crate::builder::Scan::builder().targets(["198.18.0.0/24"]);
        b.exclude = vec!["two.example".into(), "six.example".into()];
        let lookup = |n: &str| match n {
            "six.example" => Ok(vec![ip("2001:2::2")]),
            _ => Ok(vec![ip("198.18.0.2"), ip("198.18.0.3")]),
        };
        let t = b.address_sets_with(&lookup).unwrap();
        assert!(t.exclude.contains(ip("198.18.0.2")) && t.exclude.contains(ip("198.18.0.3")));
        assert!(t.exclude.contains(ip("2001:2::2")), "an IPv6-only name excluded from an IPv4 scan is no error");
    }
}
