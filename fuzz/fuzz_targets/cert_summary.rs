//! Certificates come from any TLS server scanned: any DER bytes must give a summary, never a panic.
#![no_main]
libfuzzer_sys::fuzz_target!(|der: &[u8]| moonscan::fuzz::cert_summary(der));
