//! Route and neighbour lookups (rtnetlink) in the lab's scanner namespace:
//! the routes lab.sh sets up, the kernel's errors, and next-hop MACs with
//! and without a warm neighbour table.

use std::net::IpAddr;
use std::time::Duration;

use moonscan::discovery::syn::{LinkOptions, Links};
use moonscan::raw::route::{neighbour_mac, next_hop_mac, parse_mac, route_to, route_via};
use moonscan::targets::AddrSet;

use crate::util::{in_lab_thread, lab};

fn target_mac() -> Option<[u8; 6]> {
    let out = std::process::Command::new("ip").args(["-n", "mstarget", "-br", "link", "show", "ms-tgt0"]).output();
    let text = String::from_utf8(out.ok()?.stdout).ok()?;
    text.split_whitespace().find_map(parse_mac)
}

/// Routes and neighbours as the lab's scanner namespace sees them (run
/// on a thread moved into it).
fn lab_routes_and_neighbours() {
    let ip = |s: &str| -> IpAddr { s.parse().unwrap() };
    let r = route_to(ip("198.18.0.2")).unwrap();
    assert_eq!((r.ifname.as_str(), r.src, r.gateway, r.loopback), ("ms-scan0", ip("198.18.0.1"), None, false));
    assert_ne!(r.if_mac, [0; 6]);
    let r = route_to(ip("198.19.3.4")).unwrap();
    assert_eq!((r.ifname.as_str(), r.gateway), ("ms-scan0", Some(ip("198.18.0.2"))));
    assert_eq!(r.next_hop(ip("198.19.3.4")), ip("198.18.0.2"));
    let r6 = route_to(ip("2001:2::2")).unwrap();
    assert_eq!((r6.ifname.as_str(), r6.src, r6.gateway), ("ms-scan0", ip("2001:2::1"), None));
    assert_eq!(route_via(ip("198.18.0.2"), "ms-scan0").unwrap(), route_to(ip("198.18.0.2")).unwrap());
    let e = route_to(ip("198.18.1.5")).unwrap_err();
    assert!(e.to_string().contains("no route to 198.18.1.5"), "{e} ({:?})", e.kind());
    assert!(route_to(ip("2001:3::1")).is_err());
    let r = route_to(ip("198.18.0.1")).unwrap();
    assert!(r.loopback && r.ifname == "lo", "own address: {r:?}");

    // 198.18.1.0/24 has no route but a /32 to 198.18.1.2: the block is
    // looked up address by address, within the budget of such lookups.
    let key = moonscan::targets::addrs::key;
    let block = AddrSet::from_ranges(vec![(key(ip("198.18.1.0")), key(ip("198.18.1.255")))]);
    let opts = LinkOptions::default();
    let links = Links::resolve_within(&block, &opts, Duration::from_secs(1), 256).unwrap();
    assert!(links.hop(ip("198.18.1.2")).is_ok(), "reached through its host route");
    assert!(links.hop(ip("198.18.1.5")).is_err());
    assert_eq!(links.unreachable().count(), 0, "a split block is no error of its own");
    let links = Links::resolve_within(&block, &opts, Duration::from_secs(1), 255).unwrap();
    assert!(links.hop(ip("198.18.1.2")).is_err(), "past the budget the block is unreachable whole");
    assert_eq!(links.unreachable().count(), 1);

    let expected = target_mac();
    for flush in [false, true] {
        if flush {
            // Empty the neighbour table so that the resolution path (UDP poke, then polling) runs.
            let st = std::process::Command::new("ip").args(["neigh", "flush", "dev", "ms-scan0"]).status();
            assert!(st.is_ok_and(|s| s.success()));
            assert_eq!(neighbour_mac(r6.ifindex, ip("2001:2::2")).unwrap(), None);
        }
        let t = Duration::from_secs(3);
        let v4 = next_hop_mac(&route_to(ip("198.18.0.2")).unwrap(), ip("198.18.0.2"), t).unwrap();
        let via_gw = next_hop_mac(&route_to(ip("198.19.3.4")).unwrap(), ip("198.19.3.4"), t).unwrap();
        let v6 = next_hop_mac(&r6, ip("2001:2::2"), t).unwrap();
        eprintln!("flush={flush}: v4 hop {v4:02x?}, v6 hop {v6:02x?}, ms-tgt0 {expected:02x?}");
        assert_eq!((v4, via_gw), (v6, v6));
        assert_ne!(v4, [0; 6]);
        if let Some(mac) = expected {
            assert_eq!(v4, mac);
        }
    }
}

#[test]
fn routes_and_next_hops_in_the_lab() {
    let _lab = lab();
    in_lab_thread(lab_routes_and_neighbours);
}
