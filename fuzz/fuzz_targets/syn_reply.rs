//! The SYN scanner's reply parser takes any bytes a network hands it.
#![no_main]
libfuzzer_sys::fuzz_target!(|frame: &[u8]| moonscan::fuzz::syn_reply(frame));
