//! Routing and neighbour lookups for raw-frame scanning, over hand-written rtnetlink.
//!
//! The SYN scanner writes whole Ethernet frames to an AF_PACKET socket, so for each
//! target it must know what the kernel's IP stack would otherwise work out: the
//! outgoing interface, the source address, and the next hop's MAC address. This
//! module asks the kernel directly (RTM_GETROUTE for one address, RTM_GETNEIGH
//! dumps) instead of running `ip` or parsing /proc, and provokes ARP/NDP through an
//! ordinary UDP socket when the neighbour table has no entry yet (for a gateway: an
//! on-link target is asked by the raw engine's own ARP/NDP requests, and only an entry
//! the kernel confirmed, REACHABLE or PERMANENT, stands in for an answer). Interface names,
//! MACs and flags come from if_indextoname and the SIOCGIF* ioctls. Each request uses
//! its own short-lived netlink socket with a receive timeout, so nothing can hang.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV6, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// Where packets for one destination leave this machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    pub ifindex: u32,
    pub ifname: String,
    /// The interface's hardware address (all zero on loopback).
    pub if_mac: [u8; 6],
    /// True for the loopback interface (no link-layer addressing needed).
    pub loopback: bool,
    /// The source address the kernel would pick (RTA_PREFSRC, else the local address of a UDP socket connected to
    /// the destination, which sends nothing).
    pub src: IpAddr,
    /// The gateway, if the destination is not on-link.
    pub gateway: Option<IpAddr>,
}

impl Route {
    /// The address whose MAC the frames must carry: the gateway, or the destination itself when on-link.
    pub fn next_hop(&self, dst: IpAddr) -> IpAddr {
        self.gateway.unwrap_or(dst)
    }
}

/// Asks the kernel (RTM_GETROUTE for one address, like `ip route get`) how it would reach `dst`.
/// Errors: no route -> io::ErrorKind::NetworkUnreachable (or an Other error whose message says "no route to `<dst>`").
pub fn route_to(dst: IpAddr) -> io::Result<Route> {
    get_route(dst, None)
}

/// Like route_to but forced out of interface `ifname` (for `-e IFACE`): RTA_OIF in the request.
/// Unknown interface -> io::ErrorKind::NotFound with a message naming it.
pub fn route_via(dst: IpAddr, ifname: &str) -> io::Result<Route> {
    let name = std::ffi::CString::new(ifname)
        .map_err(|_| io::Error::new(io::ErrorKind::NotFound, format!("no interface named {ifname:?}")))?;
    // SAFETY: `name` is a valid NUL-terminated C string that outlives the call.
    let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if index == 0 {
        return Err(io::Error::new(io::ErrorKind::NotFound, format!("no interface named {ifname:?}")));
    }
    get_route(dst, Some(index))
}

/// The neighbour table's MAC for `addr` on `ifindex` (RTM_GETNEIGH dump, filtered), if it has a usable entry
/// (NUD state REACHABLE, STALE, DELAY, PROBE, PERMANENT or NOARP; not INCOMPLETE/FAILED): the MAC frames to a
/// next hop may carry (the kernel sends on a STALE entry too). It says nothing of whether the host is there: a
/// forged ARP request makes a STALE entry.
pub fn neighbour_mac(ifindex: u32, addr: IpAddr) -> io::Result<Option<[u8; 6]>> {
    let entries = neighbour_dump(ifindex, family_of(addr))?;
    Ok(entries.iter().find_map(|p| neigh_match(p, ifindex, Some(addr), NUD_USABLE)).map(|e| e.1))
}

/// Every entry of the neighbour table on `ifindex`, of both families, whose state is confirmed: REACHABLE (the
/// neighbour answered lately) or PERMANENT (set by hand). One RTM_GETNEIGH dump a family.
pub fn confirmed_neighbours(ifindex: u32) -> io::Result<HashMap<IpAddr, [u8; 6]>> {
    let mut out = HashMap::new();
    for family in [libc::AF_INET as u8, libc::AF_INET6 as u8] {
        for p in neighbour_dump(ifindex, family)? {
            out.extend(neigh_match(&p, ifindex, None, NUD_CONFIRMED));
        }
    }
    Ok(out)
}

/// The RTM_NEWNEIGH payloads of a dump of one family's neighbour table.
fn neighbour_dump(ifindex: u32, family: u8) -> io::Result<Vec<Vec<u8>>> {
    // struct ndmsg: family, pad1, pad2 (u16), ifindex (i32), state (u16), flags, type.
    let ndmsg = [family, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    // NDA_IFINDEX lets kernels that can filter dumps by interface do so; neigh_match still checks every entry.
    let attrs: [(u16, &[u8]); 1] = [(libc::NDA_IFINDEX, &ifindex.to_ne_bytes())];
    let flags = (libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16;
    let replies = netlink_exchange(&nl_request(libc::RTM_GETNEIGH, flags, &ndmsg, &attrs), true)?;
    Ok(replies.into_iter().filter(|(ty, _)| *ty == libc::RTM_NEWNEIGH).map(|(_, p)| p).collect())
}

/// The next hop's MAC for frames along `route` to `dst`: zeros on loopback; else the neighbour table's entry;
/// else provoke resolution by sending one small UDP datagram to next_hop port 9 (discard) through an ordinary
/// UDP socket (the kernel then does ARP/NDP itself), and poll the table every 10 ms until `timeout`.
/// Timeout -> io::ErrorKind::TimedOut with a message "no ARP/NDP answer from `<hop>` on `<ifname>`".
pub fn next_hop_mac(route: &Route, dst: IpAddr, timeout: Duration) -> io::Result<[u8; 6]> {
    if route.loopback {
        return Ok([0; 6]);
    }
    let hop = route.next_hop(dst);
    if let Some(mac) = neighbour_mac(route.ifindex, hop)? {
        return Ok(mac);
    }
    let start = Instant::now();
    let sock = udp_socket(hop, Some(&route.ifname))?;
    let target = sock_addr(hop, 9, route.ifindex);
    let mut last_send: Option<Instant> = None;
    loop {
        // The kernel gives up after a few solicitations (entry FAILED); poke it again every second.
        if last_send.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
            // A send error (e.g. EHOSTUNREACH from an earlier failed resolution) is not fatal: keep polling.
            let _ = sock.send_to(b"moonscan", target);
            last_send = Some(Instant::now());
        }
        if let Some(mac) = neighbour_mac(route.ifindex, hop)? {
            return Ok(mac);
        }
        if start.elapsed() >= timeout {
            let msg = format!("no ARP/NDP answer from {hop} on {}", route.ifname);
            return Err(io::Error::new(io::ErrorKind::TimedOut, msg));
        }
        std::thread::sleep(Duration::from_millis(10).min(timeout.saturating_sub(start.elapsed())));
    }
}

const RTN_UNICAST: u8 = 1;
const RTN_LOCAL: u8 = 2;
const NLMSG_HDRLEN: usize = 16;
const RTMSG_LEN: usize = 12;
const NDMSG_LEN: usize = 12;
const IFF_LOOPBACK: u32 = 0x8;
const ARPHRD_LOOPBACK: u32 = 772;
/// NUD_REACHABLE | NUD_STALE | NUD_DELAY | NUD_PROBE | NUD_NOARP | NUD_PERMANENT.
const NUD_USABLE: u16 = 0x02 | 0x04 | 0x08 | 0x10 | 0x40 | 0x80;
/// NUD_REACHABLE | NUD_PERMANENT: the neighbour answered lately, or the entry was set by hand.
const NUD_CONFIRMED: u16 = 0x02 | 0x80;

fn get_route(dst: IpAddr, oif: Option<u32>) -> io::Result<Route> {
    let (dst_len, dst_bytes) = match dst {
        IpAddr::V4(a) => (32, a.octets().to_vec()),
        IpAddr::V6(a) => (128, a.octets().to_vec()),
    };
    // struct rtmsg: family, dst_len, src_len, tos, table, protocol, scope, type, flags (u32).
    let rtmsg = [family_of(dst), dst_len, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    let oif_bytes = oif.unwrap_or(0).to_ne_bytes();
    let mut attrs: Vec<(u16, &[u8])> = vec![(libc::RTA_DST, &dst_bytes)];
    attrs.extend(oif.map(|_| (libc::RTA_OIF, &oif_bytes[..])));
    let request = nl_request(libc::RTM_GETROUTE, libc::NLM_F_REQUEST as u16, &rtmsg, &attrs);
    let replies = netlink_exchange(&request, false).map_err(|e| match e.raw_os_error() {
        Some(libc::ENETUNREACH | libc::EHOSTUNREACH) => io::Error::new(e.kind(), format!("no route to {dst}: {e}")),
        _ => e,
    })?;
    let reply = replies
        .iter()
        .find(|(ty, _)| *ty == libc::RTM_NEWROUTE)
        .and_then(|(_, p)| parse_route(p))
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, format!("bad RTM_GETROUTE reply for {dst}")))?;
    // Unicast and local routes carry packets; blackhole, unreachable, prohibit, throw... do not.
    if reply.rtm_type != RTN_UNICAST && reply.rtm_type != RTN_LOCAL {
        return Err(no_route(dst));
    }
    let ifindex = reply.oif.ok_or_else(|| no_route(dst))?;
    let ifname = if_name(ifindex)?;
    let loopback = reply.rtm_type == RTN_LOCAL || is_loopback(&ifname);
    let if_mac = if loopback { [0; 6] } else { read_mac(&ifname) };
    let src = match reply.prefsrc {
        Some(src) => src,
        None => udp_socket(dst, oif.map(|_| ifname.as_str()))
            .and_then(|s| s.connect(sock_addr(dst, 9, ifindex)).and_then(|()| s.local_addr()))?
            .ip(),
    };
    Ok(Route { ifindex, ifname, if_mac, loopback, src, gateway: reply.gateway })
}

/// The kind NetworkUnreachable (from ENETUNREACH, which builds on toolchains older than its stabilisation).
fn no_route(dst: IpAddr) -> io::Error {
    io::Error::new(io::Error::from_raw_os_error(libc::ENETUNREACH).kind(), format!("no route to {dst}"))
}

fn family_of(addr: IpAddr) -> u8 {
    (if addr.is_ipv4() { libc::AF_INET } else { libc::AF_INET6 }) as u8
}

fn is_link_local(addr: IpAddr) -> bool {
    matches!(addr, IpAddr::V6(a) if (a.segments()[0] & 0xffc0) == 0xfe80)
}

/// A socket address for `addr`, scoped to `ifindex` when it is an IPv6 link-local address.
fn sock_addr(addr: IpAddr, port: u16, ifindex: u32) -> SocketAddr {
    match addr {
        IpAddr::V6(a) if is_link_local(addr) => SocketAddr::V6(SocketAddrV6::new(a, port, 0, ifindex)),
        _ => SocketAddr::new(addr, port),
    }
}

/// An unconnected UDP socket of `addr`'s family, bound to device `dev` when possible (needs CAP_NET_RAW).
fn udp_socket(addr: IpAddr, dev: Option<&str>) -> io::Result<UdpSocket> {
    let any: IpAddr = if addr.is_ipv4() { Ipv4Addr::UNSPECIFIED.into() } else { Ipv6Addr::UNSPECIFIED.into() };
    let sock = UdpSocket::bind((any, 0))?;
    if let Some(dev) = dev {
        // SAFETY: the fd is a live socket owned by `sock`; optval points at `dev.len()` readable bytes.
        let _ = unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_BINDTODEVICE,
                dev.as_ptr().cast(),
                dev.len() as libc::socklen_t,
            )
        };
    }
    Ok(sock)
}

fn if_name(index: u32) -> io::Result<String> {
    let mut buf = [0 as libc::c_char; libc::IF_NAMESIZE];
    // SAFETY: `buf` has the IF_NAMESIZE bytes if_indextoname may write, including the NUL.
    let p = unsafe { libc::if_indextoname(index, buf.as_mut_ptr()) };
    if p.is_null() {
        return Err(io::Error::last_os_error());
    }
    let bytes: Vec<u8> = buf.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// An interface's `struct ifreq` after `request` (SIOCGIFFLAGS,
/// SIOCGIFHWADDR), asked on a socket of the calling thread's network
/// namespace (not /sys, which shows the namespace /sys was mounted in).
fn ifreq(ifname: &str, request: libc::c_ulong) -> Option<libc::ifreq> {
    let name = ifname.as_bytes();
    if name.len() >= libc::IFNAMSIZ {
        return None;
    }
    // SAFETY: a zeroed ifreq is a valid value (plain C data).
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, &b) in req.ifr_name.iter_mut().zip(name) {
        *d = b as libc::c_char;
    }
    // SAFETY: plain socket call; the descriptor is closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return None;
    }
    // SAFETY: `req` is a valid ifreq with a NUL-terminated name; the kernel
    // writes at most sizeof(ifreq) into it.
    let rc = unsafe { libc::ioctl(fd, request as _, &mut req) };
    // SAFETY: `fd` is ours and open.
    unsafe { libc::close(fd) };
    (rc == 0).then_some(req)
}

fn is_loopback(ifname: &str) -> bool {
    // SAFETY: after SIOCGIFFLAGS the union holds ifru_flags.
    let flags = ifreq(ifname, libc::SIOCGIFFLAGS).map(|r| unsafe { r.ifr_ifru.ifru_flags } as u32);
    // SAFETY: after SIOCGIFHWADDR the union holds ifru_hwaddr.
    let family = ifreq(ifname, libc::SIOCGIFHWADDR).map(|r| unsafe { r.ifr_ifru.ifru_hwaddr }.sa_family as u32);
    flags.is_some_and(|f| f & IFF_LOOPBACK != 0) || family == Some(ARPHRD_LOOPBACK)
}

/// The interface's MAC; zeros when it has none of six bytes (e.g. a tun device).
fn read_mac(ifname: &str) -> [u8; 6] {
    let Some(r) = ifreq(ifname, libc::SIOCGIFHWADDR) else { return [0; 6] };
    // SAFETY: after SIOCGIFHWADDR the union holds ifru_hwaddr.
    let data = unsafe { r.ifr_ifru.ifru_hwaddr }.sa_data;
    let mut mac = [0u8; 6];
    for (m, &d) in mac.iter_mut().zip(&data) {
        *m = d as u8;
    }
    mac
}

/// A MAC address as `ip` prints it (`ae:e9:38:b1:77:87`).
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = s.split(':');
    for byte in mac.iter_mut() {
        *byte = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

/// A netlink request: header (sequence 1: one request per fresh socket), fixed part, 4-byte aligned attributes.
fn nl_request(ty: u16, flags: u16, fixed: &[u8], attrs: &[(u16, &[u8])]) -> Vec<u8> {
    // struct nlmsghdr: len (patched at the end), type, flags, seq, pid (0: the kernel fills it in).
    let mut buf = vec![0u8; NLMSG_HDRLEN];
    buf[4..6].copy_from_slice(&ty.to_ne_bytes());
    buf[6..8].copy_from_slice(&flags.to_ne_bytes());
    buf[8..12].copy_from_slice(&1u32.to_ne_bytes());
    buf.extend_from_slice(fixed);
    for (ty, data) in attrs {
        buf.extend_from_slice(&((4 + data.len()) as u16).to_ne_bytes());
        buf.extend_from_slice(&ty.to_ne_bytes());
        buf.extend_from_slice(data);
        buf.resize(align4(buf.len()), 0);
    }
    let len = buf.len() as u32;
    buf[..4].copy_from_slice(&len.to_ne_bytes());
    buf
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// Splits a received buffer into (type, seq, payload) messages; a length that is too short or overruns the buffer ends parsing.
fn parse_messages(buf: &[u8]) -> Vec<(u16, u32, &[u8])> {
    let mut out = Vec::new();
    let mut at = 0;
    while let (Some(len), Some(ty), Some(seq)) = (u32_at(buf, at), u16_at(buf, at + 4), u32_at(buf, at + 8)) {
        let len = len as usize;
        let end = at.saturating_add(len);
        let Some(payload) = (len >= NLMSG_HDRLEN).then(|| buf.get(at + NLMSG_HDRLEN..end)).flatten() else {
            break;
        };
        out.push((ty, seq, payload));
        at += align4(len);
    }
    out
}

/// Iterates over the (type, value) attributes of `buf`, stopping at the first malformed length.
struct Attrs<'a>(&'a [u8]);

impl<'a> Iterator for Attrs<'a> {
    type Item = (u16, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let len = u16_at(self.0, 0)? as usize;
        let ty = u16_at(self.0, 2)? & 0x3fff; // without NLA_F_NESTED / NLA_F_NET_BYTEORDER
        let value = if len >= 4 { self.0.get(4..len) } else { None };
        let Some(value) = value else {
            self.0 = &[];
            return None;
        };
        self.0 = self.0.get(align4(len)..).unwrap_or(&[]);
        Some((ty, value))
    }
}

fn ip_from(bytes: &[u8]) -> Option<IpAddr> {
    match bytes.len() {
        4 => Some(IpAddr::V4(<[u8; 4]>::try_from(bytes).ok()?.into())),
        16 => Some(IpAddr::V6(<[u8; 16]>::try_from(bytes).ok()?.into())),
        _ => None,
    }
}

/// The parts of an RTM_NEWROUTE reply we use.
struct RouteReply {
    rtm_type: u8,
    oif: Option<u32>,
    prefsrc: Option<IpAddr>,
    gateway: Option<IpAddr>,
}

fn parse_route(payload: &[u8]) -> Option<RouteReply> {
    let mut r = RouteReply { rtm_type: *payload.get(7)?, oif: None, prefsrc: None, gateway: None };
    for (ty, value) in Attrs(payload.get(RTMSG_LEN..)?) {
        match ty {
            libc::RTA_OIF => r.oif = u32_at(value, 0),
            libc::RTA_PREFSRC => r.prefsrc = ip_from(value),
            libc::RTA_GATEWAY => r.gateway = ip_from(value),
            _ => {}
        }
    }
    Some(r)
}

/// The address and MAC of an RTM_NEWNEIGH payload if it is an entry on `ifindex` in one of the NUD `states`
/// (and for `addr`, when one is given).
fn neigh_match(payload: &[u8], ifindex: u32, addr: Option<IpAddr>, states: u16) -> Option<(IpAddr, [u8; 6])> {
    if u32_at(payload, 4)? != ifindex || u16_at(payload, 8)? & states == 0 {
        return None;
    }
    let attrs = || Attrs(payload.get(NDMSG_LEN..).unwrap_or(&[]));
    let dst = attrs().find(|(ty, _)| *ty == libc::NDA_DST).and_then(|(_, v)| ip_from(v))?;
    let lladdr = attrs().find(|(ty, _)| *ty == libc::NDA_LLADDR)?.1;
    addr.is_none_or(|a| a == dst).then(|| Some((dst, lladdr.try_into().ok()?))).flatten()
}

/// Sends one request on a fresh NETLINK_ROUTE socket and returns the (type, payload) of each reply message:
/// every message up to NLMSG_DONE for a dump, else the first reply. NLMSG_ERROR becomes an io::Error.
fn netlink_exchange(request: &[u8], dump: bool) -> io::Result<Vec<(u16, Vec<u8>)>> {
    // SAFETY: plain socket(2) call with constant arguments; the result is checked before use.
    let fd = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, libc::NETLINK_ROUTE) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a freshly created, valid descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let tv = libc::timeval { tv_sec: 1, tv_usec: 0 };
    // SAFETY: `tv` is a valid timeval and the length passed is its size.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `request` is valid for reads of its length; an unconnected netlink socket sends to the kernel.
    if unsafe { libc::send(fd.as_raw_fd(), request.as_ptr().cast(), request.len(), 0) } < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut buf = vec![0u8; 64 * 1024];
    let mut out = Vec::new();
    loop {
        // SAFETY: `buf` is valid for writes of its full length.
        let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            if e.kind() == io::ErrorKind::WouldBlock {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "no answer from the kernel (netlink)"));
            }
            return Err(e);
        }
        let msgs = parse_messages(&buf[..n as usize]);
        if msgs.is_empty() {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "malformed netlink reply"));
        }
        for (ty, _, payload) in msgs.into_iter().filter(|m| m.1 == 1) {
            match ty as libc::c_int {
                libc::NLMSG_ERROR => match u32_at(payload, 0).map(|e| e as i32) {
                    Some(0) => return Ok(out), // a plain acknowledgement
                    Some(e) => return Err(io::Error::from_raw_os_error(e.saturating_neg())),
                    None => return Err(io::Error::new(io::ErrorKind::InvalidData, "short netlink error")),
                },
                libc::NLMSG_DONE => return Ok(out),
                libc::NLMSG_NOOP => {}
                _ => {
                    out.push((ty, payload.to_vec()));
                    if !dump {
                        return Ok(out);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_v4_and_v6() {
        for dst in ["127.0.0.1".parse().unwrap(), IpAddr::V6(Ipv6Addr::LOCALHOST)] {
            let r = route_to(dst).unwrap();
            assert!(r.loopback, "{r:?}");
            assert_eq!((r.ifname.as_str(), r.src, r.if_mac, r.gateway), ("lo", dst, [0; 6], None));
            assert_eq!(next_hop_mac(&r, dst, Duration::from_millis(50)).unwrap(), [0; 6]);
        }
    }

    #[test]
    fn route_via_unknown_interface() {
        let e = route_via("127.0.0.1".parse().unwrap(), "no-such-if0").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(e.to_string().contains("no-such-if0"), "{e}");
        let r = route_via("127.0.0.1".parse().unwrap(), "lo").unwrap();
        assert!(r.loopback && r.ifname == "lo", "{r:?}");
    }

    #[test]
    fn parse_mac_strings() {
        assert_eq!(parse_mac("ae:e9:38:b1:77:87"), Some([0xae, 0xe9, 0x38, 0xb1, 0x77, 0x87]));
        assert_eq!(parse_mac("ae:e9:38:b1:77"), None);
        assert_eq!(parse_mac("ae:e9:38:b1:77:87:00"), None);
        assert_eq!(parse_mac(""), None);
    }

    #[test]
    fn parsers_never_panic() {
        // A well-formed RTM_NEWNEIGH message first, then random and truncated buffers.
        let ndmsg = [libc::AF_INET as u8, 0, 0, 0, 7, 0, 0, 0, 2, 0, 0, 0];
        let attrs: [(u16, &[u8]); 2] = [(libc::NDA_DST, &[198, 18, 0, 2]), (libc::NDA_LLADDR, &[1, 2, 3, 4, 5, 6])];
        let good = nl_request(libc::RTM_NEWNEIGH, 0, &ndmsg, &attrs);
        let msgs = parse_messages(&good);
        assert_eq!(msgs.len(), 1);
        let a: IpAddr = "198.18.0.2".parse().unwrap();
        assert_eq!(neigh_match(msgs[0].2, 7, Some(a), NUD_USABLE), Some((a, [1, 2, 3, 4, 5, 6])));
        assert_eq!(neigh_match(msgs[0].2, 7, None, NUD_CONFIRMED), Some((a, [1, 2, 3, 4, 5, 6])), "REACHABLE");
        assert_eq!(neigh_match(msgs[0].2, 8, Some(a), NUD_USABLE), None);
        assert_eq!(neigh_match(msgs[0].2, 7, Some("198.18.0.3".parse().unwrap()), NUD_USABLE), None);
        // The same entry STALE (as a forged ARP request leaves it): usable as a next hop, never confirmed.
        let stale = [libc::AF_INET as u8, 0, 0, 0, 7, 0, 0, 0, 4, 0, 0, 0];
        let stale = nl_request(libc::RTM_NEWNEIGH, 0, &stale, &attrs);
        let msgs = parse_messages(&stale);
        assert_eq!(neigh_match(msgs[0].2, 7, Some(a), NUD_USABLE), Some((a, [1, 2, 3, 4, 5, 6])));
        assert_eq!(neigh_match(msgs[0].2, 7, None, NUD_CONFIRMED), None);
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut rand = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let addr = "198.18.0.2".parse().unwrap();
        let check = |buf: &[u8]| {
            for (_, _, payload) in parse_messages(buf) {
                let _ = (parse_route(payload), neigh_match(payload, 7, Some(addr), NUD_USABLE));
            }
            let _ = (parse_route(buf), neigh_match(buf, 7, None, NUD_CONFIRMED), Attrs(buf).count());
        };
        for cut in 0..=good.len() {
            check(&good[..cut]);
        }
        for _ in 0..20_000 {
            let len = (rand() % 96) as usize;
            let mut buf: Vec<u8> = (0..len).map(|_| rand() as u8).collect();
            if len >= 4 && rand() % 2 == 0 {
                // Plausible small lengths reach deeper into the parsers.
                let claimed = (rand() % (len as u64 + 8)) as u32;
                buf[..4].copy_from_slice(&claimed.to_ne_bytes());
            }
            if len >= 16 + 12 + 2 && rand() % 2 == 0 {
                buf[28..30].copy_from_slice(&((rand() % 24) as u16).to_ne_bytes());
            }
            check(&buf);
        }
    }
}
