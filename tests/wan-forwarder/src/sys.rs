//! The system calls: AF_PACKET sockets bound to one interface, the signals
//! the forwarder obeys, and ppoll. All of the crate's `unsafe` is here.
//!
//! In: interface names; frames to send.
//! Out: frames read, with the time the kernel received them (SO_TIMESTAMPNS:
//!     a forwarder that the scheduler kept waiting still knows when each
//!     frame arrived), and whether the kernel marked them outgoing (our own
//!     sends, seen again on the socket bound to the interface they left by)
//!     or left their checksum partial (TP_STATUS_CSUMNOTREADY: the sender's
//!     tx checksum offload is on, and the frame would arrive corrupt).
//! What always holds: a socket sees only its interface's frames (it is
//! bound before it is given a protocol, so nothing from another interface
//! is queued first); signals are blocked except inside `wait`, so none is
//! lost between a check of the flags and the wait.

use std::ffi::CString;
use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const ETH_P_ALL: u16 = 0x0003;

pub struct Packet {
    fd: OwnedFd,
}

pub struct Frame {
    pub len: usize,
    /// When the kernel received it (wall clock), if it said.
    pub stamp: Option<SystemTime>,
    /// Sent by this host (by us): not a frame to forward.
    pub outgoing: bool,
    /// The checksum was left for the hardware to complete.
    pub partial_csum: bool,
    /// Longer than the buffer: cut short.
    pub truncated: bool,
}

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn setopt<T>(fd: libc::c_int, level: libc::c_int, name: libc::c_int, v: &T) -> io::Result<()> {
    // SAFETY: v points to a live T of the size passed.
    check(unsafe { libc::setsockopt(fd, level, name, (v as *const T).cast(), size_of::<T>() as libc::socklen_t) })
        .map(|_| ())
}

impl Packet {
    /// A raw socket that reads and writes whole Ethernet frames on `ifname`.
    pub fn open(ifname: &str) -> io::Result<Packet> {
        let name = CString::new(ifname).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in name"))?;
        // SAFETY: a valid C string.
        let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if index == 0 {
            return Err(io::Error::new(io::ErrorKind::NotFound, format!("no interface {ifname}")));
        }
        // Protocol 0: receives nothing until bound with ETH_P_ALL below.
        // SAFETY: plain socket(2); the fd is owned at once.
        let fd = check(unsafe {
            libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0)
        })?;
        // SAFETY: fd is a new socket that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let raw = fd.as_raw_fd();
        setopt(raw, libc::SOL_PACKET, libc::PACKET_AUXDATA, &1 as &libc::c_int)?;
        setopt(raw, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, &1 as &libc::c_int)?;
        // Our own sends are dropped by the kernel where it can (4.20+); the
        // PACKET_OUTGOING check in `recv` covers older kernels.
        let _ = setopt(raw, libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, &1 as &libc::c_int);
        // Room for bursts the forwarder cannot keep up with: 128 MiB, some
        // 170,000 small frames (FORCE needs CAP_NET_ADMIN; plain is capped).
        let buf: libc::c_int = 128 << 20;
        if setopt(raw, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, &buf).is_err() {
            setopt(raw, libc::SOL_SOCKET, libc::SO_RCVBUF, &buf)?;
        }
        // SAFETY: zeroed is a valid sockaddr_ll.
        let mut sll: libc::sockaddr_ll = unsafe { zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = ETH_P_ALL.to_be();
        sll.sll_ifindex = index as libc::c_int;
        // SAFETY: sll is a sockaddr_ll of the size passed.
        check(unsafe {
            libc::bind(
                raw,
                (&sll as *const libc::sockaddr_ll).cast(),
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        })?;
        Ok(Packet { fd })
    }

    /// The next frame into `buf`, or None if none is waiting.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Option<Frame>> {
        // SAFETY: zeroed structs are valid; every pointer below stays live
        // for the call and the lengths are those of the buffers.
        let mut sll: libc::sockaddr_ll = unsafe { zeroed() };
        let mut ctrl = [0u64; 16]; // aligned room for the auxdata and timestamp cmsgs
        let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
        let mut msg: libc::msghdr = unsafe { zeroed() };
        msg.msg_name = (&mut sll as *mut libc::sockaddr_ll).cast();
        msg.msg_namelen = size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = ctrl.as_mut_ptr().cast();
        msg.msg_controllen = size_of::<[u64; 16]>() as _;
        // SAFETY: msg describes the live buffers above.
        let n = unsafe { libc::recvmsg(self.fd.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT | libc::MSG_TRUNC) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::WouldBlock { Ok(None) } else { Err(e) };
        }
        let mut partial_csum = false;
        let mut stamp = None;
        // SAFETY: the CMSG macros walk the control buffer the kernel filled.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_PACKET && (*c).cmsg_type == libc::PACKET_AUXDATA {
                    let aux: libc::tpacket_auxdata = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                    partial_csum = aux.tp_status & libc::TP_STATUS_CSUMNOTREADY != 0;
                }
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                    let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                    stamp = UNIX_EPOCH.checked_add(Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32));
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        let n = n as usize;
        Ok(Some(Frame {
            len: n.min(buf.len()),
            stamp,
            outgoing: sll.sll_pkttype == libc::PACKET_OUTGOING,
            partial_csum,
            truncated: n > buf.len() || msg.msg_flags & libc::MSG_TRUNC != 0,
        }))
    }

    /// Sends one whole frame out of the interface.
    pub fn send(&self, frame: &[u8]) -> io::Result<()> {
        // SAFETY: frame is a live slice of the length passed.
        let n = unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Frames the kernel dropped for want of room in the socket since the
    /// last call (PACKET_STATISTICS resets on read).
    pub fn kernel_drops(&self) -> u64 {
        // SAFETY: st is a tpacket_stats and len its size.
        let mut st: libc::tpacket_stats = unsafe { zeroed() };
        let mut len = size_of::<libc::tpacket_stats>() as libc::socklen_t;
        let rc = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                (&mut st as *mut libc::tpacket_stats).cast(),
                &mut len,
            )
        };
        if rc < 0 {
            0
        } else {
            st.tp_drops as u64
        }
    }

    pub fn fd(&self) -> libc::c_int {
        self.fd.as_raw_fd()
    }
}

static STOP: AtomicBool = AtomicBool::new(false);
static REPORT: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(sig: libc::c_int) {
    if sig == libc::SIGUSR1 {
        REPORT.store(true, Ordering::SeqCst);
    } else {
        STOP.store(true, Ordering::SeqCst);
    }
}

/// Signals that the forwarder obeys: SIGTERM and SIGINT stop it, SIGUSR1
/// asks for its counters.
pub struct Signals {
    /// The mask while waiting: the one we started with.
    wait_mask: libc::sigset_t,
}

impl Signals {
    pub fn install() -> io::Result<Signals> {
        // SAFETY: sigaction and sigprocmask with valid, initialised sets;
        // the handler only stores to atomics (async-signal-safe).
        unsafe {
            let mut set: libc::sigset_t = zeroed();
            libc::sigemptyset(&mut set);
            for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGUSR1] {
                let mut sa: libc::sigaction = zeroed();
                sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
                libc::sigemptyset(&mut sa.sa_mask);
                check(libc::sigaction(sig, &sa, std::ptr::null_mut()))?;
                libc::sigaddset(&mut set, sig);
            }
            let mut old: libc::sigset_t = zeroed();
            check(libc::sigprocmask(libc::SIG_BLOCK, &set, &mut old))?;
            // Timers wake us within a microsecond, not the default 50.
            libc::prctl(libc::PR_SET_TIMERSLACK, 1000 as libc::c_ulong);
            Ok(Signals { wait_mask: old })
        }
    }

    pub fn stop(&self) -> bool {
        STOP.load(Ordering::SeqCst)
    }

    pub fn take_report(&self) -> bool {
        REPORT.swap(false, Ordering::SeqCst)
    }

    /// Waits until one of `fds` is readable, `timeout` passes (None:
    /// forever) or a signal comes. Says which fds are readable.
    pub fn wait(&self, fds: &[libc::c_int; 2], timeout: Option<Duration>) -> io::Result<[bool; 2]> {
        let mut pfd = fds.map(|fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 });
        let ts = timeout.map(|t| libc::timespec {
            tv_sec: t.as_secs().min(3600) as libc::time_t,
            tv_nsec: t.subsec_nanos() as libc::c_long,
        });
        let tsp = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
        // SAFETY: pfd, the timespec and the mask are live for the call.
        let rc = unsafe { libc::ppoll(pfd.as_mut_ptr(), 2, tsp, &self.wait_mask) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted { Ok([false; 2]) } else { Err(e) };
        }
        let bad = libc::POLLERR | libc::POLLNVAL;
        if pfd.iter().any(|p| p.revents & bad != 0) {
            return Err(io::Error::other("a socket failed (its interface went away?)"));
        }
        Ok(pfd.map(|p| p.revents & libc::POLLIN != 0))
    }
}
