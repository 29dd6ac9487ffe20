//! wan-forwarder: the WAN of moonscan's lab (`scripts/lab.sh wan up` runs
//! it in the namespace mswan, between the veth to the scanner and the veth
//! to the WAN target). A bridge of two interfaces with a path model in
//! each direction: delay, jitter, loss, a bottleneck rate and its queue.
//!
//! In: `--a IF --b IF` (two interfaces of this namespace), `--delay MS`
//!     (one way), `--jitter MS` (+/-, uniform, at most the delay), `--loss
//!     PCT`, `--rate PPS` (frames/s, 0: no bottleneck), `--queue N` (frames),
//!     `--pid FILE`, `--log FILE`, `--seed N` (loss and jitter draws).
//!     Every setting applies to each direction alone.
//! Out: every frame read on A (AF_PACKET, ETH_P_ALL; our own sends, which
//!     the socket of the interface they leave by sees again, are ignored)
//!     goes through the A->B path (path.rs) and is written out B, byte for
//!     byte, when it is due; B's frames likewise out A. The pid file exists
//!     while frames are forwarded. One line per direction of counters is
//!     appended to the log on SIGUSR1 and on exit (SIGTERM, SIGINT):
//!     `... A>B arrived= forwarded= lost= queue_dropped= line_dropped=
//!     send_errors= kernel_dropped= partial_csum= truncated= held=`.
//! What always holds:
//!   - Memory is bounded: path.rs holds at most queue + LINE_CAP frames per
//!     direction; each read takes at most BATCH frames before due frames go.
//!   - A frame's arrival is the time the kernel received it, not the time
//!     we read it: when the scheduler keeps the forwarder waiting, frames
//!     pile up in the socket, and read all at once they would look like a
//!     burst that the bottleneck's queue then drops. Only their sending is
//!     late then (by the wait).
//!   - Checksums are never touched: the senders on the veths must complete
//!     them (lab.sh turns their tx offload off). A frame whose checksum the
//!     kernel left partial is still forwarded (the receiver drops it) and
//!     counted as `partial_csum`: 0 shows that offload is off.
//!   - Bad arguments: a message and exit status 2; a socket error: a
//!     message, the counters logged, exit status 1.

mod path;
mod sys;

use std::fs::OpenOptions;
use std::io::Write;
use std::process::ExitCode;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use path::{Config, Path, Rng};
use sys::{Packet, Signals};

/// Frames read from one socket before the due frames are sent again.
const BATCH: usize = 256;

struct Args {
    ifs: [String; 2],
    cfg: Config,
    pid: String,
    log: String,
    seed: u64,
}

fn parse(mut argv: impl Iterator<Item = String>) -> Result<Args, String> {
    let (mut a, mut b, mut pid, mut log, mut seed) = (None, None, None, None, None);
    let mut cfg = Config { delay_ms: 0.0, jitter_ms: 0.0, loss_pct: 0.0, rate_pps: 0, queue: 1000 };
    while let Some(flag) = argv.next() {
        let v = argv.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let num = |what: &str| v.parse::<f64>().map_err(|_| format!("{flag} {v}: {what} expected"));
        match flag.as_str() {
            "--a" => a = Some(v.clone()),
            "--b" => b = Some(v.clone()),
            "--pid" => pid = Some(v.clone()),
            "--log" => log = Some(v.clone()),
            "--delay" => cfg.delay_ms = num("milliseconds")?,
            "--jitter" => cfg.jitter_ms = num("milliseconds")?,
            "--loss" => cfg.loss_pct = num("a percentage")?,
            "--rate" => cfg.rate_pps = v.parse().map_err(|_| format!("{flag} {v}: frames/s expected"))?,
            "--queue" => cfg.queue = v.parse().map_err(|_| format!("{flag} {v}: frames expected"))?,
            "--seed" => seed = Some(v.parse().map_err(|_| format!("{flag} {v}: a number expected"))?),
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    cfg.check()?;
    let need = |v: Option<String>, f: &str| v.ok_or_else(|| format!("{f} is required"));
    let ifs = [need(a, "--a")?, need(b, "--b")?];
    if ifs[0] == ifs[1] {
        return Err("--a and --b must differ".into());
    }
    let seed = seed.unwrap_or_else(|| {
        let t = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        t ^ u64::from(std::process::id()) << 32
    });
    Ok(Args { ifs, cfg, pid: need(pid, "--pid")?, log: need(log, "--log")?, seed })
}

/// Counters of one direction that the path model does not keep.
#[derive(Default)]
struct Io {
    forwarded: u64,
    send_errors: u64,
    kernel_dropped: u64,
    partial_csum: u64,
    truncated: u64,
}

fn now_secs() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

fn log_line(path: &str, line: &str) {
    let w = OpenOptions::new().create(true).append(true).open(path).and_then(|mut f| writeln!(f, "{line}"));
    if let Err(e) = w {
        eprintln!("wan-forwarder: cannot write {path}: {e}");
    }
}

fn report(args: &Args, why: &str, socks: &[Packet; 2], paths: &[Path; 2], io: &mut [Io; 2]) {
    for i in 0..2 {
        io[i].kernel_dropped += socks[i].kernel_drops();
        let (c, o) = (&paths[i].counters, &io[i]);
        log_line(
            &args.log,
            &format!(
                "wan-forwarder: {:.3} {why} {}>{} arrived={} forwarded={} lost={} queue_dropped={} line_dropped={} \
                 send_errors={} kernel_dropped={} partial_csum={} truncated={} held={}",
                now_secs(),
                args.ifs[i],
                args.ifs[1 - i],
                c.arrived,
                o.forwarded,
                c.lost,
                c.queue_dropped,
                c.line_dropped,
                o.send_errors,
                o.kernel_dropped,
                o.partial_csum,
                o.truncated,
                paths[i].held()
            ),
        );
    }
}

fn run(args: &Args) -> Result<(), String> {
    let signals = Signals::install().map_err(|e| format!("signals: {e}"))?;
    let open = |i: &str| Packet::open(i).map_err(|e| format!("{i}: {e}"));
    let socks = [open(&args.ifs[0])?, open(&args.ifs[1])?];
    let mut paths = [Path::new(args.cfg, Rng::new(args.seed)), Path::new(args.cfg, Rng::new(args.seed ^ 0x5bd1_e995))];
    let mut io = [Io::default(), Io::default()];
    let c = args.cfg;
    log_line(
        &args.log,
        &format!(
            "wan-forwarder: {:.3} start pid={} a={} b={} delay={}ms jitter={}ms loss={}% rate={}/s queue={} seed={}",
            now_secs(),
            std::process::id(),
            args.ifs[0],
            args.ifs[1],
            c.delay_ms,
            c.jitter_ms,
            c.loss_pct,
            c.rate_pps,
            c.queue,
            args.seed
        ),
    );
    std::fs::write(&args.pid, format!("{}\n", std::process::id())).map_err(|e| format!("{}: {e}", args.pid))?;
    let mut buf = vec![0u8; 65536];
    let fds = [socks[0].fd(), socks[1].fd()];
    let result = loop {
        if signals.stop() {
            break Ok("stop");
        }
        if signals.take_report() {
            report(args, "report", &socks, &paths, &mut io);
        }
        let now = Instant::now();
        for i in 0..2 {
            while let Some(frame) = paths[i].pop_due(now) {
                match socks[1 - i].send(&frame) {
                    Ok(()) => io[i].forwarded += 1,
                    Err(_) => io[i].send_errors += 1,
                }
            }
        }
        let next = paths.iter().filter_map(|p| p.next_due()).min();
        let readable = match signals.wait(&fds, next.map(|t| t.saturating_duration_since(Instant::now()))) {
            Ok(r) => r,
            Err(e) => break Err(format!("poll: {e}")),
        };
        let mut failed = None;
        // Maps the kernel's wall-clock stamps onto the monotonic clock.
        let (mono, wall) = (Instant::now(), SystemTime::now());
        let arrival = |stamp: Option<SystemTime>| {
            let age = stamp.and_then(|s| wall.duration_since(s).ok()).unwrap_or_default();
            mono.checked_sub(age).unwrap_or(mono)
        };
        for i in 0..2 {
            if !readable[i] {
                continue;
            }
            for _ in 0..BATCH {
                match socks[i].recv(&mut buf) {
                    Ok(None) => break,
                    Ok(Some(f)) if f.outgoing => {}
                    Ok(Some(f)) => {
                        io[i].partial_csum += u64::from(f.partial_csum);
                        io[i].truncated += u64::from(f.truncated);
                        paths[i].arrive(arrival(f.stamp), buf[..f.len].to_vec());
                    }
                    Err(e) => {
                        failed = Some(format!("{}: {e}", args.ifs[i]));
                        break;
                    }
                }
            }
        }
        if let Some(e) = failed {
            break Err(e);
        }
    };
    report(args, result.as_ref().map_or("error", |s| s), &socks, &paths, &mut io);
    let _ = std::fs::remove_file(&args.pid);
    result.map(|_| ())
}

fn main() -> ExitCode {
    let args = match parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("wan-forwarder: {e}");
            eprintln!(
                "usage: wan-forwarder --a IF --b IF [--delay MS] [--jitter MS] [--loss PCT] [--rate PPS] \
                 [--queue N] --pid FILE --log FILE [--seed N]"
            );
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("wan-forwarder: {e}");
            log_line(&args.log, &format!("wan-forwarder: {:.3} error: {e}", now_secs()));
            ExitCode::FAILURE
        }
    }
}
