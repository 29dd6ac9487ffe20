//! The wire side of the network: the TCP and TLS connections that service
//! detection and plugins both use. Connections in the clear or inside TLS
//! ([`conn`]) and a watch on what they read ([`watch`]), the TLS client
//! that accepts any certificate ([`dangerously`]), our own ClientHellos
//! and the first-flight reader ([`hello`]), the STARTTLS exchanges
//! ([`starttls`]), and what a session shows: the IANA names ([`iana`]),
//! the session's facts ([`tls`]), each certificate's summary ([`cert`])
//! and its fields as nmap prints them ([`x509_fields`]).
//!
//! In: addresses, streams and deadlines. Out: connections, flights,
//! [`tls::TlsInfo`] and [`cert::CertSummary`] (which the findings
//! re-export). What always holds: no `unsafe` (that is [`crate::raw`]'s
//! alone) and no raw packets, so plugins may use all of it; it imports no
//! other stage and not the findings, only the leaf [`crate::text`] and
//! [`crate::error`]; every read is bounded in bytes and time.

pub mod cert;
pub mod conn;
pub mod dangerously;
pub mod hello;
pub mod iana;
pub mod starttls;
pub mod tls;
pub mod watch;
pub mod x509_fields;
