//! Output: sinks that turn events into text for people and for programs.
//!
//! In: the scan's event stream. Out: bytes on the writers the caller hands
//! in (stdout, files); the engine itself never prints. What always holds:
//! every sink sees every event in order through one interface
//! ([`Sink::record`], then [`Sink::close`]), and sinks are flushed whenever
//! the stream goes quiet and at least every [`FLUSH_EVERY`], so what was
//! found is on disk within 100 ms even if the process is killed afterwards.

mod grepable;
pub mod mac_vendor;
mod ndjson;
mod nmap_script_ids;
mod normal;
mod os_text;
pub mod redact;
mod report;
mod sarif;
mod screen;
#[cfg(test)]
mod service_fp_tests;
pub mod store;
mod text;
pub mod trace_text;
mod xml;
mod xml_esc;
pub mod xml_prior;

use std::io;

use tokio::sync::mpsc;

pub use grepable::Grepable;
pub use ndjson::Ndjson;
pub use normal::Normal;
pub use sarif::{Rule as SarifRule, Sarif};
pub use screen::{screen, screen_text, Screened};
pub use text::Text;
pub use xml::{stylesheet as xml_stylesheet, Xml};

use crate::findings::Event;

/// A consumer of events.
pub trait Sink: Send {
    /// Writes one event (may buffer).
    fn record(&mut self, event: &Event) -> io::Result<()>;
    /// Pushes buffered bytes to the writer.
    fn flush(&mut self) -> io::Result<()>;
    /// Called once after the last event.
    fn close(&mut self) -> io::Result<()> {
        self.flush()
    }
}

/// Longest time recorded events wait for a flush.
pub const FLUSH_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

/// Feeds every event of `rx` to every sink until the channel closes, then
/// closes the sinks. Blocking: run it on its own thread. A sink that fails
/// is dropped (the others go on) and its error returned at the end.
pub fn drain(mut rx: mpsc::Receiver<Event>, mut sinks: Vec<Box<dyn Sink>>) -> io::Result<()> {
    let mut failed: Option<io::Error> = None;
    let mut apply = |sinks: &mut Vec<Box<dyn Sink>>, f: &mut dyn FnMut(&mut dyn Sink) -> io::Result<()>| {
        let mut i = 0;
        while i < sinks.len() {
            match f(sinks[i].as_mut()) {
                Ok(()) => i += 1,
                Err(e) => {
                    sinks.swap_remove(i);
                    failed.get_or_insert(e);
                }
            }
        }
    };
    while let Some(ev) = rx.blocking_recv() {
        apply(&mut sinks, &mut |s| s.record(&ev));
        // Drain what is already queued, then flush once: low latency when
        // events are rare, few writes when they are many, and never more
        // than FLUSH_EVERY between flushes while events keep coming.
        let since = std::time::Instant::now();
        while let Ok(ev) = rx.try_recv() {
            apply(&mut sinks, &mut |s| s.record(&ev));
            if since.elapsed() >= FLUSH_EVERY {
                break;
            }
        }
        apply(&mut sinks, &mut |s| s.flush());
    }
    apply(&mut sinks, &mut |s| s.close());
    failed.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::{PortEvent, PortState};
    use std::sync::{Arc, Mutex};

    /// A writer whose bytes the test can read back.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl io::Write for Shared {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    struct Broken;

    impl io::Write for Broken {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::Error::new(io::ErrorKind::BrokenPipe, "closed"))
        }
        fn flush(&mut self) -> io::Result<()> {
            Err(io::Error::new(io::ErrorKind::BrokenPipe, "closed"))
        }
    }

    fn port(p: u16) -> Event {
        Event::Port(PortEvent {
            scan_id: "s".into(),
            ip: "127.0.0.1".parse().unwrap(),
            port: p,
            proto: crate::findings::Proto::Tcp,
            state: PortState::Open,
            reason: crate::findings::Reason::SynAck,
            ttl: None,
            t: 0.0,
        })
    }

    /// Counts records and the time of each flush.
    struct Timed(Arc<Mutex<Vec<std::time::Instant>>>);

    impl Sink for Timed {
        fn record(&mut self, _: &Event) -> io::Result<()> {
            // A slow sink: the queue never runs dry while the producer runs.
            std::thread::sleep(std::time::Duration::from_micros(100));
            Ok(())
        }
        fn flush(&mut self) -> io::Result<()> {
            self.0.lock().unwrap().push(std::time::Instant::now());
            Ok(())
        }
    }

    #[test]
    fn a_busy_stream_is_flushed_at_least_every_100_ms() {
        let flushes = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::channel(1024);
        let f2 = flushes.clone();
        let writer = std::thread::spawn(move || drain(rx, vec![Box::new(Timed(f2))]));
        // A producer that never lets the queue go empty for 600 ms.
        let start = std::time::Instant::now();
        while start.elapsed() < std::time::Duration::from_millis(600) {
            for p in 0..64 {
                let _ = tx.blocking_send(port(p));
            }
        }
        drop(tx);
        writer.join().unwrap().unwrap();
        let times = flushes.lock().unwrap();
        assert!(times.len() >= 5, "{} flushes", times.len());
        let mut last = start;
        for t in times.iter() {
            assert!(
                t.duration_since(last) < std::time::Duration::from_millis(150),
                "a gap of {:?}",
                t.duration_since(last)
            );
            last = *t;
        }
    }

    #[test]
    fn a_failing_sink_does_not_stop_the_others() {
        let good = Shared::default();
        let (tx, rx) = mpsc::channel(16);
        for p in [22, 80, 443] {
            tx.try_send(port(p)).unwrap();
        }
        drop(tx);
        let sinks: Vec<Box<dyn Sink>> = vec![Box::new(Ndjson::new(Broken)), Box::new(Ndjson::new(good.clone()))];
        let res = drain(rx, sinks);
        assert!(res.is_err(), "the broken sink's error is returned");
        let text = String::from_utf8(good.0.lock().unwrap().clone()).unwrap();
        let ports: Vec<u64> = text
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["port"].as_u64().unwrap())
            .collect();
        assert_eq!(ports, [22, 80, 443]);
    }
}
