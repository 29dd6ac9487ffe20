//! Embedding moonscan: scan the lab's web server with service detection and
//! one plugin, printing each finding the moment it is found.
//!
//! Run it in the lab's scanner namespace, never outside it (its address is
//! the lab's): `scripts/lab.sh exec target/debug/examples/embed 198.18.0.2`
//! (with a CARGO_TARGET_DIR, that folder's examples/embed).

use moonscan::findings::Event;

#[tokio::main]
async fn main() -> moonscan::Result<()> {
    let target = std::env::args().nth(1).unwrap_or_else(|| "198.18.0.2".into());
    let mut scan = moonscan::Scan::builder()
        .targets([target])
        .ports("80,443")
        .service_detection(true)
        .scripts("http-title")
        .start()?;
    while let Some(event) = scan.next_event().await {
        match event {
            Event::Service(s) => println!("{}:{} {} {}", s.ip, s.port, s.id.service, s.id.product.unwrap_or_default()),
            // A script result by its text, a finding by its severity and title.
            Event::Script(r) => println!("{}:{} {}: {}", r.ip, r.port, r.plugin, r.output.trim()),
            Event::Finding(f) => println!("{}:{} {} [{}]: {}", f.ip, f.port, f.plugin, f.severity, f.title),
            _ => {}
        }
    }
    let end = scan.finish().await?;
    println!("{} open, {} findings, {} script results in {:.2} s", end.open, end.findings, end.scripts, end.elapsed);
    Ok(())
}
