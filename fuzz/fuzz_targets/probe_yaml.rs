//! Probe files come from users (`--probes DIR`, `probes import`): any text must load or be refused, never panic.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| moonscan::fuzz::probe_yaml(data));
