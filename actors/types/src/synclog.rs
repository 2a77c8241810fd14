//! The sync log: where a crash test learns what reached stable storage.
//!
//! The robustness suite's `lose-unsynced` fault emulates a power loss after a process crash:
//! every byte written but not yet fsynced is lost. To cut a member's files back honestly it
//! has to know what was synced, and only the member knows that. With
//! `ACTCD_DEBUG_SYNC_LOG=<file>` set, the WAL and the backend append one line to that file
//! right after each fsync returns, before anything that depends on it (an acknowledgement, a
//! released segment) can happen:
//!
//! - `wal <segment path> <bytes>`: the segment's first `bytes` bytes are on disk;
//! - `lmdb <txnid>`: the LMDB meta page of transaction `txnid` (and all before it) is on disk.
//!
//! Only builds with the `failpoints` feature call [`record`]; release builds never do. A line
//! is written with one `write` on a file opened for appending, so lines never interleave.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::sync::OnceLock;

/// The environment variable naming the sync log.
pub const ENV: &str = "ACTCD_DEBUG_SYNC_LOG";

fn file() -> Option<&'static File> {
    static FILE: OnceLock<Option<File>> = OnceLock::new();
    FILE.get_or_init(|| {
        let path = std::env::var_os(ENV)?;
        OpenOptions::new().create(true).append(true).open(path).ok()
    })
    .as_ref()
}

/// Appends one line (a newline is added) when the sync log is on; otherwise does nothing.
pub fn record(line: std::fmt::Arguments<'_>) {
    if let Some(mut f) = file() {
        let mut s = line.to_string();
        s.push('\n');
        // A failed write leaves the log short, which only makes the emulated loss smaller
        // than it could be (the runner cuts back to an older point): never dishonest.
        let _ = f.write_all(s.as_bytes());
    }
}
