//! Segment files: naming, listing, and the directory fsync that makes creating, renaming and
//! removing them durable.

use std::fs::{self, File};
use std::path::{Path, PathBuf};

use crate::WalError;

const SUFFIX: &str = ".wal";
/// A segment being prepared; renamed to its final name once its header is durable, so a
/// crash never leaves a half-written header under a `.wal` name.
const TMP_SUFFIX: &str = ".wal.tmp";

/// `{seq:016x}-{index:016x}.wal`: `seq` counts segments from 0 without gaps; `index` is the
/// first raft index the segment may hold (last index + 1 when it was cut). `index` is a hint
/// for humans and tools only: after a raft overwrite a segment can hold lower indexes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct SegmentName {
    pub(crate) seq: u64,
    pub(crate) index: u64,
}

impl SegmentName {
    pub(crate) fn file_name(&self) -> String {
        format!("{:016x}-{:016x}{SUFFIX}", self.seq, self.index)
    }

    pub(crate) fn tmp_file_name(&self) -> String {
        format!("{:016x}-{:016x}{TMP_SUFFIX}", self.seq, self.index)
    }

    pub(crate) fn parse(name: &str) -> Option<Self> {
        let stem = name.strip_suffix(SUFFIX)?;
        let (seq, index) = stem.split_once('-')?;
        let hex = |s: &str| {
            (s.len() == 16 && s.bytes().all(|b| b.is_ascii_hexdigit()))
                .then(|| u64::from_str_radix(s, 16).ok())
                .flatten()
        };
        Some(SegmentName {
            seq: hex(seq)?,
            index: hex(index)?,
        })
    }
}

/// What is in a WAL directory.
#[derive(Debug, Default)]
pub(crate) struct Listing {
    /// Segments sorted by seq.
    pub(crate) segments: Vec<(SegmentName, PathBuf)>,
    /// `.wal` files whose names don't parse: refuse to guess what they are.
    pub(crate) strays: Vec<PathBuf>,
    /// Leftovers of a segment cut that crashed before its rename.
    pub(crate) tmp: Vec<PathBuf>,
}

pub(crate) fn list(dir: &Path) -> Result<Listing, WalError> {
    let mut out = Listing::default();
    let rd = fs::read_dir(dir).map_err(WalError::io("read directory", dir))?;
    for ent in rd {
        let ent = ent.map_err(WalError::io("read directory", dir))?;
        let name = ent.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.ends_with(TMP_SUFFIX) {
            out.tmp.push(ent.path());
        } else if let Some(seg) = SegmentName::parse(name) {
            out.segments.push((seg, ent.path()));
        } else if name.ends_with(SUFFIX) {
            out.strays.push(ent.path());
        }
    }
    out.segments.sort();
    Ok(out)
}

/// Makes file creations, renames and removals in `dir` durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), WalError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(WalError::io("fsync directory", dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        struct Case {
            name: &'static str,
            want: Option<SegmentName>,
        }
        let cases = [
            Case {
                name: "0000000000000000-0000000000000001.wal",
                want: Some(SegmentName { seq: 0, index: 1 }),
            },
            Case {
                name: "00000000000000ff-000000000000abcd.wal",
                want: Some(SegmentName {
                    seq: 255,
                    index: 0xabcd,
                }),
            },
            Case {
                name: "0000000000000000-0000000000000001.wal.tmp",
                want: None,
            },
            Case {
                name: "0-1.wal",
                want: None,
            },
            Case {
                name: "000000000000000g-0000000000000001.wal",
                want: None,
            },
            Case {
                name: "0000000000000000_0000000000000001.wal",
                want: None,
            },
            Case {
                name: "+000000000000000-0000000000000001.wal",
                want: None,
            },
        ];
        for c in cases {
            assert_eq!(SegmentName::parse(c.name), c.want, "{}", c.name);
            if let Some(seg) = c.want {
                assert_eq!(seg.file_name(), c.name);
            }
        }
    }
}
