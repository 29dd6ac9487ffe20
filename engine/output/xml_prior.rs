//! A resumed scan's `-oX`: the hosts of the interrupted part, read back
//! from its document, so that both parts make one report.
//!
//! In: the text of the first part's XML and the hosts the resumed part
//! scans again whole (`--resume`'s unfinished hosts). Out: a [`Prior`]
//! whose `<host>` elements the resumed part's document writes before its
//! own, counted in its `<runstats>`. A host both parts wrote becomes one
//! element: the resumed part's alone for a host it scanned again whole,
//! else (a `-Pn` scan walks `(address, port)` pairs, so one host's ports
//! can fall on either side) one with the ports, `<extraports>` and host
//! scripts of both ([`merge_host`]). A host to redo that the resumed part
//! does not write (it no longer answered) keeps its first element.
//!
//! What always holds: only a whole moonscan document is read (a killed
//! scan leaves its head alone, and then there is no prior part: the
//! caller keeps the parts apart), whose `<host>` elements each end before
//! the next starts and hold no document-level tag; the elements are taken
//! as moonscan wrote them, escaped, so no text inside them starts an
//! element. Looking a host up costs one hash lookup.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::net::IpAddr;

/// A host of a report: its address and the name it was given as a target
/// (XML-escaped as the document has it): two names of one address are
/// two hosts.
pub type HostKey = (IpAddr, Option<String>);

/// The hosts of an earlier part of the scan.
#[derive(Clone, Debug, Default)]
pub struct Prior {
    /// Each host's key and `<host>...</host>\n` element.
    hosts: Vec<(HostKey, String)>,
    /// Where each host is in `hosts`.
    index: HashMap<HostKey, usize>,
    /// The hosts the resumed part scans again whole.
    redo: HashSet<IpAddr>,
    /// The addresses the whole scan planned (the first part's `total`).
    total: u64,
}

impl Prior {
    /// The hosts of a whole moonscan XML document (`redo`: those the
    /// resumed part scans again whole); `None` when `doc` is not one (not
    /// moonscan's, cut short, or edited out of shape).
    pub fn read(doc: &str, redo: &[IpAddr]) -> Option<Prior> {
        if !doc.contains("<nmaprun scanner=\"moonscan\"") || !doc.trim_end().ends_with("</nmaprun>") {
            return None;
        }
        let runstats = doc.rfind("<runstats>")?;
        let total = attr(&doc[runstats..], "<hosts ", "total")?.parse().ok()?;
        let mut prior = Prior { total, redo: redo.iter().copied().collect(), ..Prior::default() };
        let mut rest = &doc[..runstats];
        while let Some(at) = find_element(rest, "host") {
            let end = rest[at..].find("</host>\n")? + at + "</host>\n".len();
            let element = &rest[at..end];
            // One host, closed before the next, nothing of the document's.
            let inner = &element[1..];
            if find_element(inner, "host").is_some()
                || ["<nmaprun", "</nmaprun", "<runstats"].iter().any(|t| element.contains(t))
            {
                return None;
            }
            let ip: IpAddr = attr(element, "<address ", "addr")?.parse().ok()?;
            let key = (ip, user_name(element));
            if prior.index.insert(key.clone(), prior.hosts.len()).is_some() {
                return None; // a host twice: not a document moonscan wrote
            }
            prior.hosts.push((key, element.to_string()));
            rest = &rest[end..];
        }
        Some(prior)
    }

    /// Hosts read.
    pub fn len(&self) -> usize {
        self.hosts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.hosts.is_empty()
    }

    /// The first part's element of a host, if it has one.
    pub fn host(&self, key: &HostKey) -> Option<&str> {
        self.index.get(key).map(|&i| self.hosts[i].1.as_str())
    }

    /// `own`, the resumed part's element of a host, as the whole scan's:
    /// the same for a host scanned again whole or new, else merged with
    /// the first part's.
    pub fn whole(&self, key: &HostKey, own: String) -> String {
        match self.host(key) {
            Some(before) if !self.redo.contains(&key.0) => merge_host(&own, before),
            _ => own,
        }
    }

    /// The elements of the hosts not in `also` (those the resumed part
    /// writes itself, merged), with how many of them are up.
    pub fn others<'a>(&'a self, also: &'a HashSet<HostKey>) -> (impl Iterator<Item = &'a str> + 'a, u64) {
        let up = self.hosts.iter().filter(|(k, e)| !also.contains(k) && e.contains("<status state=\"up\"")).count();
        (self.hosts.iter().filter(move |(k, _)| !also.contains(k)).map(|(_, e)| e.as_str()), up as u64)
    }

    pub fn total(&self) -> u64 {
        self.total
    }
}

/// Where the next `<name` element starts in `s` (not `<hostnames`).
fn find_element(s: &str, name: &str) -> Option<usize> {
    let open = format!("<{name}");
    let mut from = 0;
    while let Some(i) = s[from..].find(&open) {
        let at = from + i;
        match s.as_bytes().get(at + open.len()) {
            Some(b' ' | b'>' | b'/') => return Some(at),
            _ => from = at + open.len(),
        }
    }
    None
}

/// The name a host element says it was given (its `type="user"` hostname).
fn user_name(element: &str) -> Option<String> {
    let mut rest = element;
    while let Some(at) = rest.find("<hostname ") {
        let tag = &rest[at..];
        if attr(tag, "<hostname ", "type") == Some("user") {
            return attr(tag, "<hostname ", "name").map(str::to_string);
        }
        rest = &rest[at + 1..];
    }
    None
}

/// The value of `name` in the first tag of `s` that starts with `tag`.
fn attr<'a>(s: &'a str, tag: &str, name: &str) -> Option<&'a str> {
    let t = s.find(tag)?;
    let close = s[t..].find('>')? + t;
    let key = format!(" {name}=\"");
    let k = s[t..close].find(&key)? + t + key.len();
    let end = s[k..].find('"')? + k;
    Some(&s[k..end])
}

/// Every element `<name ...>...</name>\n` (or `<name .../>`) in `s`.
fn elements<'a>(s: &'a str, name: &str) -> Vec<&'a str> {
    let (mut out, mut rest) = (Vec::new(), s);
    let close = format!("</{name}>");
    while let Some(at) = find_element(rest, name) {
        let tag_end = match rest[at..].find('>') {
            Some(i) => at + i,
            None => break,
        };
        let end = if rest.as_bytes()[tag_end - 1] == b'/' {
            tag_end + 1
        } else {
            match rest[at..].find(&close) {
                Some(i) => at + i + close.len(),
                None => break,
            }
        };
        let end = if rest[end..].starts_with('\n') { end + 1 } else { end };
        out.push(&rest[at..end]);
        rest = &rest[end..];
    }
    out
}

/// `own` (a host's element from the resumed part) with the `<port>` and
/// `<extraports>` elements of `prior` (the same host's from the first
/// part) added: ports listed once each, by number within each protocol;
/// extraports of one state summed, their reasons kept.
pub fn merge_host(own: &str, prior: &str) -> String {
    let ports_of = |s: &str| -> Vec<String> { elements(s, "port").into_iter().map(str::to_string).collect() };
    let mut ports = ports_of(own);
    let have: HashSet<(String, String)> = ports.iter().filter_map(|p| port_key(p)).collect();
    ports.extend(ports_of(prior).into_iter().filter(|p| port_key(p).is_none_or(|k| !have.contains(&k))));
    ports.sort_by_key(|p| {
        let (proto, id) = port_key(p).unwrap_or_default();
        (proto != "tcp", id.parse::<u32>().unwrap_or(0))
    });
    // Extraports by state, own first.
    let mut extra: Vec<(String, u64, String)> = Vec::new();
    for e in elements(own, "extraports").into_iter().chain(elements(prior, "extraports")) {
        let state = attr(e, "<extraports", "state").unwrap_or("").to_string();
        let count: u64 = attr(e, "<extraports", "count").and_then(|c| c.parse().ok()).unwrap_or(0);
        let reasons: String = elements(e, "extrareasons").concat();
        match extra.iter_mut().find(|(s, _, _)| *s == state) {
            Some(x) => {
                x.1 = x.1.saturating_add(count);
                x.2.push_str(&reasons);
            }
            None => extra.push((state, count, reasons)),
        }
    }
    let mut block = String::from("<ports>");
    for (state, count, reasons) in &extra {
        let _ = write!(block, "<extraports state=\"{state}\" count=\"{count}\">\n{reasons}</extraports>\n");
    }
    block.extend(ports);
    block.push_str("</ports>\n");
    // In place of own's <ports>, or where it would stand.
    let merged = match (own.find("<ports>"), own.find("</ports>\n")) {
        (Some(a), Some(b)) if a < b => format!("{}{block}{}", &own[..a], &own[b + "</ports>\n".len()..]),
        _ => {
            let at = AFTER_PORTS.iter().find_map(|t| own.find(t)).unwrap_or(own.len());
            format!("{}{block}{}", &own[..at], &own[at..])
        }
    };
    // The first part's OS detection, when the resumed part has none: after the ports.
    let merged = if find_element(&merged, "os").is_none() {
        let os: String = OS_ELEMENTS.iter().flat_map(|name| elements(prior, name)).collect();
        match merged.find("</ports>\n") {
            Some(b) if !os.is_empty() => {
                let b = b + "</ports>\n".len();
                format!("{}{os}{}", &merged[..b], &merged[b..])
            }
            _ => merged,
        }
    } else {
        merged
    };
    // The first part's host scripts, when the resumed part ran none.
    match (merged.contains("<hostscript>"), elements(prior, "hostscript").first()) {
        (false, Some(hs)) => {
            let at = ["<trace ", "<times ", "</host>"].iter().find_map(|t| merged.find(t)).unwrap_or(merged.len());
            format!("{}{hs}{}", &merged[..at], &merged[at..])
        }
        _ => merged,
    }
}

/// nmap's elements of OS detection, in their order in `<host>`.
const OS_ELEMENTS: [&str; 6] = ["os", "uptime", "distance", "tcpsequence", "ipidsequence", "tcptssequence"];

/// What follows `<ports>` in a host, in document order: the ports go
/// before the first of these present.
const AFTER_PORTS: [&str; 9] = [
    "<os>",
    "<uptime ",
    "<distance ",
    "<tcpsequence ",
    "<ipidsequence ",
    "<tcptssequence ",
    "<hostscript>",
    "<times ",
    "</host>",
];

/// A `<port>` element's protocol and number.
fn port_key(p: &str) -> Option<(String, String)> {
    Some((attr(p, "<port", "protocol")?.to_string(), attr(p, "<port", "portid")?.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOST_A: &str = "<host starttime=\"1\" endtime=\"2\"><status state=\"up\" reason=\"syn-ack\" reason_ttl=\"64\"/>\n\
<address addr=\"198.18.0.2\" addrtype=\"ipv4\"/>\n<hostnames>\n</hostnames>\n\
<ports><extraports state=\"closed\" count=\"2\">\n<extrareasons reason=\"reset\" count=\"2\" proto=\"tcp\"/>\n</extraports>\n\
<port protocol=\"tcp\" portid=\"80\"><state state=\"open\" reason=\"syn-ack\" reason_ttl=\"64\"/><service name=\"http\" method=\"table\" conf=\"3\"/></port>\n\
</ports>\n</host>\n";

    fn doc(hosts: &str, total: u64, whole: bool) -> String {
        let head = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<nmaprun scanner=\"moonscan\" args=\"x\">\n";
        if !whole {
            return head.to_string();
        }
        format!("{head}{hosts}<runstats><finished time=\"3\"/><hosts up=\"1\" down=\"0\" total=\"{total}\"/>\n</runstats>\n</nmaprun>\n")
    }

    #[test]
    fn a_whole_document_gives_its_hosts_and_a_cut_one_nothing() {
        let other = HOST_A.replace("198.18.0.2", "198.18.0.3").replace("state=\"up\"", "state=\"down\"");
        let text = doc(&format!("{HOST_A}{other}"), 9, true);
        let p = Prior::read(&text, &[]).unwrap();
        assert_eq!((p.len(), p.total()), (2, 9));
        assert_eq!(p.host(&("198.18.0.2".parse().unwrap(), None)), Some(HOST_A));
        let none = HashSet::new();
        let (all, up) = p.others(&none);
        assert_eq!((all.count(), up), (2, 1));
        // A host to redo keeps its element until the resumed part writes
        // its own, which then replaces it; another host's two are merged.
        let a: IpAddr = "198.18.0.2".parse().unwrap();
        let own = HOST_A.replace("portid=\"80\"", "portid=\"443\"");
        assert_eq!(Prior::read(&text, &[]).unwrap().whole(&(a, None), own.clone()).matches("<port ").count(), 2);
        let p = Prior::read(&text, &[a]).unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!(p.whole(&(a, None), own.clone()), own);
        // Not whole, not moonscan's, or out of shape: no prior part.
        assert!(Prior::read(&doc(HOST_A, 9, false), &[]).is_none());
        assert!(Prior::read("<nmaprun scanner=\"nmap\"></nmaprun>", &[]).is_none());
        assert!(Prior::read(&doc(&format!("{HOST_A}{HOST_A}"), 9, true), &[]).is_none(), "a host twice");
        // One address under two names (and alone) is three hosts.
        let named = |n: &str| {
            HOST_A.replace("<hostnames>\n", &format!("<hostnames>\n<hostname name=\"{n}\" type=\"user\"/>\n<hostname name=\"p.example\" type=\"PTR\"/>\n"))
        };
        let three = doc(&format!("{HOST_A}{}{}", named("alpha.example"), named("beta.example")), 9, true);
        let p = Prior::read(&three, &[]).unwrap();
        assert_eq!(p.len(), 3);
        assert!(p.host(&(a, Some("beta.example".into()))).unwrap().contains("beta.example"));
        let also: HashSet<HostKey> = [(a, Some("alpha.example".to_string()))].into();
        assert_eq!(p.others(&also).0.count(), 2, "the address alone and beta are the first part's own");
        let nested = HOST_A.replace("<hostnames>", "<host><hostnames>");
        assert!(Prior::read(&doc(&nested, 9, true), &[]).is_none(), "a host inside a host");
        let bad = HOST_A.replace("<hostnames>", "</nmaprun><hostnames>");
        assert!(Prior::read(&doc(&bad, 9, true), &[]).is_none());
    }

    #[test]
    fn one_hosts_two_parts_become_one_element() {
        let own = HOST_A
            .replace("portid=\"80\"", "portid=\"443\"")
            .replace("count=\"2\"", "count=\"5\"")
            .replace("<ports>", "<ports><extraports state=\"filtered\" count=\"1\">\n<extrareasons reason=\"no-response\" count=\"1\" proto=\"tcp\"/>\n</extraports>\n");
        let merged = merge_host(&own, HOST_A);
        assert_eq!(merged.matches("<ports>").count(), 1, "{merged}");
        let p80 = merged.find("portid=\"80\"").unwrap();
        let p443 = merged.find("portid=\"443\"").unwrap();
        assert!(p80 < p443, "ports by number: {merged}");
        assert!(merged.contains("<extraports state=\"closed\" count=\"7\">"), "{merged}");
        assert!(merged.contains("<extraports state=\"filtered\" count=\"1\">"), "{merged}");
        assert_eq!(merged.matches("<extrareasons reason=\"reset\"").count(), 2, "{merged}");
        assert!(merged.starts_with("<host starttime") && merged.ends_with("</ports>\n</host>\n"), "{merged}");
        // The first part's host scripts stay when the resumed part ran none.
        let with_hs = HOST_A.replace("</host>", "<hostscript><script id=\"x\" output=\"y\"/></hostscript>\n</host>");
        let m = merge_host(&own, &with_hs);
        assert_eq!(m.matches("<hostscript>").count(), 1, "{m}");
        assert!(m.find("</ports>").unwrap() < m.find("<hostscript>").unwrap(), "{m}");
        // A port both parts list is listed once.
        assert_eq!(merge_host(HOST_A, HOST_A).matches("portid=\"80\"").count(), 1);
        // Own without ports: the prior part's go before </host>.
        let bare = "<host><status state=\"up\" reason=\"x\" reason_ttl=\"0\"/>\n<address addr=\"198.18.0.2\" addrtype=\"ipv4\"/>\n</host>\n";
        let m = merge_host(bare, HOST_A);
        assert!(m.contains("portid=\"80\"") && m.ends_with("</ports>\n</host>\n"), "{m}");
    }

    /// OS detection's elements (nmap's, after the ports) survive a merge:
    /// the resumed part's own, else the first part's, after the ports
    /// and before the host scripts.
    #[test]
    fn os_detection_stays_after_the_ports() {
        let os = "<os><portused state=\"open\" proto=\"tcp\" portid=\"80\"/>\n\
<osmatch name=\"Linux 4.15 - 5.8\" accuracy=\"100\" line=\"1\">\n<osclass type=\"general purpose\" vendor=\"Linux\" osfamily=\"Linux\" accuracy=\"100\"/>\n</osmatch>\n</os>\n\
<uptime seconds=\"5\" lastboot=\"x\"/>\n<distance value=\"1\"/>\n";
        let with_os = HOST_A.replace("</ports>\n", &format!("</ports>\n{os}"));
        let hs = "<hostscript><script id=\"x\" output=\"y\"/></hostscript>\n";
        let own = HOST_A.replace("portid=\"80\"", "portid=\"443\"").replace("</host>", &format!("{hs}</host>"));
        // The first part's.
        let m = merge_host(&own, &with_os);
        assert!(m.contains(&format!("</ports>\n{os}{hs}</host>")), "{m}");
        // The resumed part's own, once, with the first part's ports before it.
        let own_os = own.replace("</ports>\n", &format!("</ports>\n{os}"));
        let m = merge_host(&own_os, &with_os);
        assert_eq!(m.matches("<os>").count(), 1, "{m}");
        assert!(m.contains(&format!("</ports>\n{os}{hs}")), "{m}");
        // A resumed part without ports: its ports block goes before its OS.
        let bare = own_os.replace(&own_os[own_os.find("<ports>").unwrap()..own_os.find("<os>").unwrap()], "");
        let m = merge_host(&bare, HOST_A);
        assert!(m.find("</ports>").unwrap() < m.find("<os>").unwrap(), "{m}");
    }
}
