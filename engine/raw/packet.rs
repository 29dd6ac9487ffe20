//! AF_PACKET sockets: whole Ethernet frames out and in, in batches.
//!
//! Sending uses `sendmmsg` (up to [`BATCH`] frames a system call) and skips
//! the qdisc; receiving uses `recvmmsg` after a `poll` with a timeout, and
//! reports for every frame whether the kernel already vouched for its
//! checksum or left it unfinished (checksum offload between namespaces), from
//! `PACKET_AUXDATA`. Our own outgoing frames are not delivered back
//! (`PACKET_IGNORE_OUTGOING`). Opening one needs CAP_NET_RAW.

use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// Most frames moved by one system call.
pub const BATCH: usize = 64;
/// Largest frame we keep: an Ethernet frame of a full 1500-byte MTU. A
/// UDP answer can be that long, and so can the ICMP error that quotes a
/// long UDP probe (IPv6 quotes up to 1232 bytes of it); a frame cut short
/// fails its length and checksum checks and would be lost.
pub const FRAME: usize = 1536;

// From linux/if_packet.h (not all are in the libc crate).
const PACKET_AUXDATA: libc::c_int = 8;
const PACKET_QDISC_BYPASS: libc::c_int = 20;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
const TP_STATUS_CSUMNOTREADY: u32 = 1 << 3;
const TP_STATUS_CSUM_VALID: u32 = 1 << 7;

#[repr(C)]
struct TpacketAuxdata {
    tp_status: u32,
    tp_len: u32,
    tp_snaplen: u32,
    tp_mac: u16,
    tp_net: u16,
    tp_vlan_tci: u16,
    tp_vlan_tpid: u16,
}

/// What the kernel says about a received frame's transport checksum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Checksum {
    /// Verified by the kernel or hardware: no need to check again.
    Valid,
    /// Never computed (the sender offloaded it): it cannot be checked.
    Unfinished,
    /// Unknown: check it.
    Unchecked,
}

/// True if this process may open raw sockets (CAP_NET_RAW). Checked with a
/// raw IP socket: closing a packet socket costs an RCU grace period.
pub fn raw_available() -> bool {
    // SAFETY: plain socket(2); a valid descriptor is closed right away.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, libc::IPPROTO_TCP) };
    if fd < 0 {
        return false;
    }
    // SAFETY: `fd` is ours and open.
    unsafe { libc::close(fd) };
    true
}

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn setopt<T>(fd: libc::c_int, level: libc::c_int, name: libc::c_int, val: &T) -> io::Result<()> {
    // SAFETY: `val` points to a live T whose size is passed alongside it.
    let r = unsafe { libc::setsockopt(fd, level, name, (val as *const T).cast(), size_of::<T>() as libc::socklen_t) };
    check(r).map(drop)
}

/// A packet socket bound to one interface (or unbound when `ifindex` is 0).
#[derive(Debug)]
pub struct PacketSocket {
    fd: OwnedFd,
    ifindex: u32,
}

impl PacketSocket {
    /// A socket that sends on, and receives every frame of, one interface.
    /// One is enough for a scan: several threads may send on it at once.
    /// (It is created with protocol 0 and bound once: re-binding a protocol,
    /// like closing the socket, waits for an RCU grace period.)
    pub fn open(ifindex: u32) -> io::Result<PacketSocket> {
        // SAFETY: plain socket(2) call; the result is checked before use.
        let fd = check(unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) })?;
        // SAFETY: `fd` is a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let sock = PacketSocket { fd, ifindex };
        sock.bind((libc::ETH_P_ALL as u16).to_be())?;
        Ok(sock)
    }

    fn bind(&self, proto_be: u16) -> io::Result<()> {
        // SAFETY: sockaddr_ll is plain data; all-zero is a valid starting value.
        let mut sll: libc::sockaddr_ll = unsafe { zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = proto_be;
        sll.sll_ifindex = self.ifindex as i32;
        // SAFETY: `sll` is a valid sockaddr_ll and its size is passed with it.
        let r = unsafe {
            libc::bind(
                self.fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        check(r).map(drop)
    }

    /// Sets the options a scanner wants: big buffers, no qdisc, no echo of our
    /// own frames, checksum status on every received frame. The last two are
    /// best effort (older kernels lack them).
    pub fn tune(&self, buffer_bytes: usize) -> io::Result<()> {
        let fd = self.fd.as_raw_fd();
        let n = buffer_bytes.min(i32::MAX as usize) as libc::c_int;
        // FORCE variants pass the sysctl caps (root); fall back to the plain ones.
        setopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, &n)
            .or_else(|_| setopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, &n))?;
        setopt(fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, &n)
            .or_else(|_| setopt(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, &n))?;
        let one: libc::c_int = 1;
        let _ = setopt(fd, libc::SOL_PACKET, PACKET_QDISC_BYPASS, &one);
        let _ = setopt(fd, libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, &one);
        setopt(fd, libc::SOL_PACKET, PACKET_AUXDATA, &one)
    }

    /// Sends whole frames; returns how many went out (may be fewer than given
    /// when the kernel's buffer is full: `ENOBUFS`/`EAGAIN` yield 0).
    pub fn send_batch(&self, frames: &[&[u8]]) -> io::Result<usize> {
        let n = frames.len().min(BATCH);
        if n == 0 {
            return Ok(0);
        }
        // SAFETY: iovec and mmsghdr are plain data; zero is valid for both.
        let mut iov: [libc::iovec; BATCH] = unsafe { zeroed() };
        let mut msgs: [libc::mmsghdr; BATCH] = unsafe { zeroed() };
        for i in 0..n {
            iov[i].iov_base = frames[i].as_ptr() as *mut libc::c_void;
            iov[i].iov_len = frames[i].len();
            msgs[i].msg_hdr.msg_iov = &mut iov[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
        }
        // SAFETY: `msgs[..n]` point at `iov[..n]`, which point at the caller's
        // frames; all outlive the call, and the kernel only reads them.
        let r = unsafe { libc::sendmmsg(self.fd.as_raw_fd(), msgs.as_mut_ptr(), n as u32, 0) };
        if r < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::ENOBUFS | libc::EAGAIN) => Ok(0),
                _ => Err(e),
            };
        }
        Ok(r as usize)
    }

    /// Waits up to `timeout` for frames, then takes as many as are queued (up
    /// to `bufs.len()`, at most [`BATCH`]). Fills `lens` (bytes kept, at most
    /// [`FRAME`]) and `sums`; returns the number of frames.
    pub fn recv_batch(
        &self,
        bufs: &mut [[u8; FRAME]],
        lens: &mut [usize],
        sums: &mut [Checksum],
        timeout: Duration,
    ) -> io::Result<usize> {
        let fd = self.fd.as_raw_fd();
        let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
        // SAFETY: one valid pollfd.
        let r = unsafe { libc::poll(&mut pfd, 1, ms) };
        if r < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted { Ok(0) } else { Err(e) };
        }
        if r == 0 {
            return Ok(0);
        }
        let n = bufs.len().min(lens.len()).min(sums.len()).min(BATCH);
        const CMSG_SPACE: usize = 64;
        let mut ctrl = [[0u8; CMSG_SPACE]; BATCH];
        // SAFETY: plain data; zero is valid.
        let mut iov: [libc::iovec; BATCH] = unsafe { zeroed() };
        let mut msgs: [libc::mmsghdr; BATCH] = unsafe { zeroed() };
        for i in 0..n {
            iov[i].iov_base = bufs[i].as_mut_ptr().cast();
            iov[i].iov_len = FRAME;
            msgs[i].msg_hdr.msg_iov = &mut iov[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
            msgs[i].msg_hdr.msg_control = ctrl[i].as_mut_ptr().cast();
            msgs[i].msg_hdr.msg_controllen = CMSG_SPACE;
        }
        // SAFETY: every mmsghdr points at a buffer of the stated length that
        // lives until the call returns; MSG_DONTWAIT keeps it from blocking.
        let got = unsafe {
            libc::recvmmsg(fd, msgs.as_mut_ptr(), n as u32, libc::MSG_DONTWAIT | libc::MSG_TRUNC, std::ptr::null_mut())
        };
        if got < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EAGAIN | libc::EINTR) => Ok(0),
                _ => Err(e),
            };
        }
        let got = got as usize;
        for i in 0..got {
            lens[i] = (msgs[i].msg_len as usize).min(FRAME);
            sums[i] = checksum_status(&msgs[i].msg_hdr);
        }
        Ok(got)
    }
}

fn checksum_status(hdr: &libc::msghdr) -> Checksum {
    let mut status = Checksum::Unchecked;
    // SAFETY: the kernel filled `hdr`'s control buffer; the CMSG_* macros
    // walk it within msg_controllen, and the data is read unaligned.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(hdr);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_PACKET
                && (*c).cmsg_type == PACKET_AUXDATA
                && (*c).cmsg_len as usize >= libc::CMSG_LEN(size_of::<TpacketAuxdata>() as u32) as usize
            {
                let aux: TpacketAuxdata = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                if aux.tp_status & TP_STATUS_CSUMNOTREADY != 0 {
                    status = Checksum::Unfinished;
                } else if aux.tp_status & TP_STATUS_CSUM_VALID != 0 {
                    status = Checksum::Valid;
                }
            }
            c = libc::CMSG_NXTHDR(hdr, c);
        }
    }
    status
}
