//! Host discovery's receiver takes any bytes a network hands it: the frame
//! parser (ICMP echo, timestamp and mask replies), the discovery cookie and
//! the reading of an answer.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| moonscan::fuzz::ping_reply(data));
