// The core probes and plugins are built into the binary (engine/core_files.rs):
// a file added to or removed from their folders rebuilds it too.
fn main() {
    println!("cargo:rerun-if-changed=plugins");
    println!("cargo:rerun-if-changed=probes");
}
