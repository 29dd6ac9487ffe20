//! On-link discovery's receiver takes any bytes a link hands it: ARP
//! replies and neighbour advertisements, and whom they answer.
#![no_main]
libfuzzer_sys::fuzz_target!(|frame: &[u8]| moonscan::fuzz::neighbour_reply(frame));
