//! moonscan: a Lua-scriptable network scanner, as a library.
//!
//! The scan is a streaming pipeline of stages joined by bounded channels
//! ([`pipeline`]): [`targets`] gives the scan order, [`discovery`] finds
//! open ports, [`service`] identifies what runs on them, [`plugins`] look at
//! each one, and [`output`] sinks consume the [`findings`] events. A slow
//! stage slows the one before it. The library never prints, parses no
//! command-line flags and keeps no global state.
//!
//! Describe a scan with [`Scan::builder`], start it on a tokio runtime, and
//! read its events as they come:
//!
//! ```no_run
//! use moonscan::findings::Event;
//!
//! #[tokio::main]
//! async fn main() -> moonscan::Result<()> {
//!     let mut scan = moonscan::Scan::builder()
//!         .targets(["198.18.0.2"])
//!         .ports("22,80,443")
//!         .service_detection(true)
//!         .scripts("default")
//!         .start()?;
//!     while let Some(event) = scan.next_event().await {
//!         match event {
//!             Event::Script(r) => println!("{}:{} {}: {}", r.ip, r.port, r.plugin, r.output.trim()),
//!             Event::Finding(f) => println!("{}:{} {} [{}]: {}", f.ip, f.port, f.plugin, f.severity, f.title),
//!             _ => {}
//!         }
//!     }
//!     let end = scan.finish().await?;
//!     println!("{} open ports in {:.2} s", end.open, end.elapsed);
//!     Ok(())
//! }
//! ```

#![deny(unsafe_code)]

pub mod builder;
pub mod core_files;
pub mod discovery;
pub mod error;
pub mod files;
pub mod findings;
#[doc(hidden)]
pub mod fuzz;
pub mod os;
pub mod output;
pub mod packs;
pub mod pattern;
pub mod pipeline;
pub mod places;
pub mod plugins;
pub mod ports;
pub mod raw;
pub mod rdns;
pub mod scan;
pub mod service;
pub mod targets;
pub mod text;
pub mod wire;

pub use builder::{Scan, ScanBuilder, ScanHandle};
pub use error::{Error, ErrorKind, Result};
pub use scan::ScanConfig;
