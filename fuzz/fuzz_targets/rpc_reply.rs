//! ONC RPC replies as the RPC grinder reads them: the reply header, its
//! verifier and accept status, a PROG_MISMATCH's versions, a DUMP's list.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| moonscan::fuzz::rpc_reply(data));
