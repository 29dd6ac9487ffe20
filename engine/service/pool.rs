//! A fixed pool of receive buffers.
//!
//! In: a buffer size and count, fixed when the pool is made. Out: buffers
//! lent one at a time, returned when the loan is dropped. What always holds:
//! the pool never allocates after it is made, so the memory service
//! detection uses for responses is `count × size` whatever servers send;
//! a task that cannot get a buffer waits for one.

use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

#[derive(Clone, Debug)]
pub struct BufPool {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    free: Mutex<Vec<Box<[u8]>>>,
    permits: Arc<Semaphore>,
    size: usize,
}

/// A buffer on loan from a [`BufPool`]; goes back when dropped.
#[derive(Debug)]
pub struct Loan {
    buf: Option<Box<[u8]>>,
    pool: Arc<Inner>,
    _permit: OwnedSemaphorePermit,
}

impl BufPool {
    /// `count` buffers of `size` bytes each, allocated now.
    pub fn new(count: usize, size: usize) -> BufPool {
        let count = count.max(1);
        let free = (0..count).map(|_| vec![0u8; size].into_boxed_slice()).collect();
        BufPool { inner: Arc::new(Inner { free: Mutex::new(free), permits: Arc::new(Semaphore::new(count)), size }) }
    }

    /// Waits for a free buffer.
    pub async fn get(&self) -> Loan {
        let permit = self.inner.permits.clone().acquire_owned().await.expect("the pool's semaphore is never closed");
        let buf = self.inner.free.lock().unwrap_or_else(|p| p.into_inner()).pop();
        Loan { buf: Some(buf.expect("a permit always has a buffer")), pool: self.inner.clone(), _permit: permit }
    }

    /// Buffers not on loan now.
    /// A buffer if one is free now, without waiting.
    pub fn try_get(&self) -> Option<Loan> {
        let permit = self.inner.permits.clone().try_acquire_owned().ok()?;
        let buf = self.inner.free.lock().unwrap_or_else(|p| p.into_inner()).pop();
        Some(Loan { buf: Some(buf.expect("a permit always has a buffer")), pool: self.inner.clone(), _permit: permit })
    }

    pub fn available(&self) -> usize {
        self.inner.permits.available_permits()
    }

    pub fn buffer_size(&self) -> usize {
        self.inner.size
    }
}

impl AsRef<[u8]> for Loan {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl std::ops::Deref for Loan {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.buf.as_deref().unwrap_or_default()
    }
}

impl std::ops::DerefMut for Loan {
    fn deref_mut(&mut self) -> &mut [u8] {
        self.buf.as_deref_mut().unwrap_or_default()
    }
}

impl Drop for Loan {
    fn drop(&mut self) {
        if let Some(buf) = self.buf.take() {
            // Returned before the permit (a field) is released.
            self.pool.free.lock().unwrap_or_else(|p| p.into_inner()).push(buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn loans_are_bounded_and_come_back() {
        let pool = BufPool::new(2, 4096);
        let a = pool.get().await;
        let mut b = pool.get().await;
        assert_eq!((a.len(), b.len(), pool.available()), (4096, 4096, 0));
        b[0] = 7;
        // A third borrower waits until a loan is returned.
        let waiting = tokio::time::timeout(Duration::from_millis(50), pool.get()).await;
        assert!(waiting.is_err(), "a third buffer was lent from a pool of two");
        let (pa, pb) = (a.as_ptr(), b.as_ptr());
        drop(b);
        let c = pool.get().await;
        assert_eq!(c.as_ptr(), pb, "the returned buffer is reused, not a new one");
        assert_ne!(c.as_ptr(), pa);
        drop((a, c));
        assert_eq!(pool.available(), 2);
    }
}
