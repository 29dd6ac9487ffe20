//! The raw side of the network: what the SYN, ping, trace and OS stages
//! need below TCP. AF_PACKET frames ([`packet`]), routes and neighbours
//! through netlink ([`route`]), and the process's effective user id and
//! open-file limit.
//!
//! In: system calls. Out: frames, routes, MACs and limits. What always
//! holds: this folder is the only code of the crate allowed `unsafe`
//! (lib.rs denies it everywhere else), each `unsafe` block says why it is
//! sound, and nothing here talks TCP or TLS (that is [`crate::wire`]);
//! plugins never import it.

#![allow(unsafe_code)]

use std::io;

pub mod packet;
pub mod route;

/// The process's effective user id.
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid takes no arguments and cannot fail.
    unsafe { libc::geteuid() }
}

/// The soft open-file limit (1024 if it cannot be read).
pub fn nofile_limit() -> u64 {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `lim` is a valid, writable rlimit for getrlimit to fill.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return 1024;
    }
    lim.rlim_cur
}

/// Raises the soft open-file limit to the hard limit and returns the new soft
/// limit.
pub fn raise_nofile_limit() -> io::Result<u64> {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `lim` is a valid, writable rlimit for getrlimit to fill.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if lim.rlim_cur < lim.rlim_max {
        let raised = libc::rlimit { rlim_cur: lim.rlim_max, rlim_max: lim.rlim_max };
        // SAFETY: `raised` is a valid rlimit that setrlimit only reads.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            lim.rlim_cur = lim.rlim_max;
        }
    }
    Ok(lim.rlim_cur)
}
