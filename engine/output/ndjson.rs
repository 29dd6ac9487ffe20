//! NDJSON: one event a line, in the schema of DESIGN.md.

use std::io::{self, BufWriter, Write};

use super::Sink;
use crate::findings::Event;

pub struct Ndjson<W: Write> {
    out: BufWriter<W>,
}

impl<W: Write> Ndjson<W> {
    pub fn new(writer: W) -> Ndjson<W> {
        Ndjson { out: BufWriter::new(writer) }
    }
}

impl<W: Write + Send> Sink for Ndjson<W> {
    fn record(&mut self, event: &Event) -> io::Result<()> {
        // The whole line goes to the writer in one piece, so a file cut off
        // by a kill ends at a line boundary.
        let mut line = serde_json::to_vec(event).map_err(io::Error::from)?;
        line.push(b'\n');
        self.out.write_all(&line)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}
