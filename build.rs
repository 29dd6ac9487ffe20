// The core probes and plugins are built into the binary (engine/core_files.rs):
// a file added to or removed from their folders rebuilds it too.
// The target it is built for names the platform in nmap's service
// fingerprints (`P=`, engine/findings/service_fp.rs).
fn main() {
    let target = std::env::var("TARGET").unwrap_or_else(|_| "unknown".into());
    println!("cargo:rustc-env=MOONSCAN_TARGET={target}");
    println!("cargo:rerun-if-changed=plugins");
    println!("cargo:rerun-if-changed=probes");
}
