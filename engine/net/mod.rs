//! Operating-system and network plumbing shared by the stages: the
//! open-file limit, raw packet sockets, routes and neighbours (the only code
//! allowed `unsafe`), and the TCP/TLS connections that service detection
//! and plugins both use ([`conn`], [`tls`], [`hello`], [`dangerously`],
//! which deny `unsafe` themselves).

#![allow(unsafe_code)]

use std::io;

pub mod conn;
pub mod dangerously;
pub mod hello;
pub mod packet;
pub mod route;
pub mod starttls;
pub mod tls;
pub mod x509_fields;

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
