//! A stream that shows every byte read through it to a watcher: how the
//! bytes a TLS enumeration reads are counted (against a plugin's read
//! budget) and how the ServerHello rustls reads is kept for JA3S and JA4S
//! (conn.rs's tap).
//!
//! In: a stream and a `Watch`. Out: the same stream, read and written
//! as before. What always holds: every byte read reaches the watch once,
//! in order; writes pass through untouched.

use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// What a [`Watched`] stream shows the bytes read through it to.
pub(crate) trait Watch {
    fn saw(&mut self, data: &[u8]);
}

/// A stream that shows every byte read through it to a [`Watch`], and
/// passes writes through.
pub(crate) struct Watched<S, W> {
    pub(crate) io: S,
    pub(crate) watch: W,
}

impl<S: AsyncRead + Unpin, W: Watch + Unpin> AsyncRead for Watched<S, W> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.watch.saw(&buf.filled()[before..]);
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin, W: Unpin> AsyncWrite for Watched<S, W> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// Counts the bytes read.
impl Watch for &std::sync::atomic::AtomicU64 {
    fn saw(&mut self, data: &[u8]) {
        self.fetch_add(data.len() as u64, std::sync::atomic::Ordering::Relaxed);
    }
}
