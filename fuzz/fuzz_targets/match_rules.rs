//! Match rules run over whatever a service answers, and user patterns over it: input is `pattern 0xff response`.
#![no_main]
static SHIPPED: std::sync::OnceLock<moonscan::service::ProbeDb> = std::sync::OnceLock::new();
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    moonscan::fuzz::match_rules(SHIPPED.get_or_init(moonscan::fuzz::shipped_probes), data)
});
