//! The UDP scan's receiver takes any bytes a network hands it: the frame
//! parser, the echoed transaction id and the cookie check.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| moonscan::fuzz::udp_reply(data));
