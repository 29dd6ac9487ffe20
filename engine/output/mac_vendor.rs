//! Who made a network card, from its MAC address's prefix (nmap's `MAC
//! Address: 00:0C:29:… (VMware)`), read at run time from the user's own
//! nmap-mac-prefixes (in nmap's folders, [`crate::places::Places::nmap`]:
//! the command looks in `$NMAPDIR`, /usr/share/nmap, /usr/local/share/nmap)
//! or, without nmap, Debian's ieee-data OUI list. Nothing is copied into
//! moonscan: without either file a vendor is "Unknown", as nmap says for
//! a prefix it does not know.

use std::collections::HashMap;
use std::path::Path;

/// Largest prefix file read (nmap's is about 800 kB, ieee-data's 5 MB).
const MAX_FILE: u64 = 32 << 20;

/// Vendors by upper-case hex prefix (6 digits for an OUI; 7 and 9 for the
/// smaller blocks newer nmap lists), longest prefix first when looked up.
#[derive(Debug, Default)]
pub struct MacVendors {
    by_prefix: HashMap<String, String>,
    lengths: Vec<usize>,
}

impl MacVendors {
    /// The first prefix file found (nmap's, in one of `nmap_dirs`, or the
    /// IEEE list), or an empty table.
    pub fn installed(nmap_dirs: &[std::path::PathBuf]) -> MacVendors {
        if let Some(text) = crate::files::nmap_data(nmap_dirs, "nmap-mac-prefixes", MAX_FILE) {
            return MacVendors::from_nmap(&text);
        }
        let ieee = crate::files::read_capped(Path::new("/usr/share/ieee-data/oui.txt"), MAX_FILE, "OUI list").ok();
        ieee.map(|b| MacVendors::from_ieee(&String::from_utf8_lossy(&b))).unwrap_or_default()
    }

    /// nmap-mac-prefixes: `PREFIX Vendor` lines, `#` comments.
    pub fn from_nmap(text: &str) -> MacVendors {
        let mut v = MacVendors::default();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            if let Some((prefix, vendor)) = line.split_once(' ') {
                v.add(prefix, vendor);
            }
        }
        v
    }

    /// IEEE's oui.txt: `00-00-0C   (hex)\t\tCisco Systems, Inc` lines.
    pub fn from_ieee(text: &str) -> MacVendors {
        let mut v = MacVendors::default();
        for line in text.lines() {
            if let Some((prefix, vendor)) = line.split_once("(hex)") {
                v.add(&prefix.trim().replace('-', ""), vendor);
            }
        }
        v
    }

    fn add(&mut self, prefix: &str, vendor: &str) {
        let (prefix, vendor) = (prefix.trim().to_ascii_uppercase(), vendor.trim());
        let hex = !prefix.is_empty() && prefix.len() <= 12 && prefix.bytes().all(|b| b.is_ascii_hexdigit());
        if !hex || vendor.is_empty() {
            return;
        }
        if !self.lengths.contains(&prefix.len()) {
            self.lengths.push(prefix.len());
            self.lengths.sort_unstable_by(|a, b| b.cmp(a));
        }
        self.by_prefix.entry(prefix).or_insert_with(|| vendor.chars().take(128).collect());
    }

    /// The vendor of `mac` (`76:EB:12:FD:59:B7` or any case, `-` or `:`).
    pub fn vendor(&self, mac: &str) -> Option<&str> {
        let hex: String = mac.chars().filter(char::is_ascii_hexdigit).map(|c| c.to_ascii_uppercase()).collect();
        self.lengths
            .iter()
            .filter(|&&n| n <= hex.len())
            .find_map(|&n| self.by_prefix.get(&hex[..n]).map(String::as_str))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_prefix_names_the_vendor() {
        let v = MacVendors::from_nmap("# comment\n00000C Cisco Systems\n0050C2 IEEE Registration Authority\n0050C2A6 Small Block Maker\nZZZZZZ Not hex\n");
        assert_eq!(v.vendor("00:00:0c:12:34:56"), Some("Cisco Systems"));
        assert_eq!(v.vendor("00:50:C2:A6:00:01"), Some("Small Block Maker"));
        assert_eq!(v.vendor("00:50:C2:11:00:01"), Some("IEEE Registration Authority"));
        assert_eq!(v.vendor("76:EB:12:FD:59:B7"), None);
        assert_eq!(v.vendor(""), None);
    }

    #[test]
    fn ieee_lists_read_the_same() {
        let v = MacVendors::from_ieee("OUI/MA-L\t\t\tOrganization\n00-00-0C   (hex)\t\tCisco Systems, Inc\n00000C     (base 16)\t\tCisco Systems, Inc\n");
        assert_eq!(v.vendor("00-00-0C-01-02-03"), Some("Cisco Systems, Inc"));
    }

    /// nmap is installed by scripts/test.sh: its own file names its vendors.
    #[test]
    fn an_installed_nmap_names_a_well_known_prefix() {
        if !Path::new("/usr/share/nmap/nmap-mac-prefixes").exists() {
            panic!("nmap is not installed (scripts/test.sh installs it)");
        }
        assert_eq!(
            MacVendors::installed(&crate::places::Places::default().nmap).vendor("00:00:0C:00:00:01"),
            Some("Cisco Systems")
        );
    }
}
