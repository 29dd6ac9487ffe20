//! The TLS first-flight reader takes whatever a server sends: records,
//! handshake messages split anyhow, ServerHello extensions, certificates
//! and key exchange parameters.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| moonscan::fuzz::server_flight(data));
