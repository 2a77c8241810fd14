//! Record framing: one record on disk is
//!
//! ```text
//! +----------------+---------+----------------+-------------------+
//! | length: u32 LE | type:u8 | crc: u32 LE    | payload (length)  |
//! +----------------+---------+----------------+-------------------+
//! ```
//!
//! `crc` is CRC32C over `type ‖ payload`, seeded with the previous record's `crc` (the chain).
//! Type 0 is never written, so a zero-filled tail can't decode as a record.

use actcd_types::msg::{HardState, WalEntry};

use crate::SnapshotMark;

/// Bytes before the payload: length (4) + type (1) + crc (4).
pub(crate) const HEADER_LEN: usize = 9;

const TYPE_METADATA: u8 = 1;
const TYPE_ENTRY: u8 = 2;
const TYPE_HARD_STATE: u8 = 3;
const TYPE_CRC: u8 = 4;
const TYPE_SNAPSHOT: u8 = 5;

/// Largest payload the length field can describe.
pub(crate) const MAX_PAYLOAD: usize = u32::MAX as usize;

/// One record, borrowing its variable-length parts from the buffer it was decoded from or
/// from the caller that wants it encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Record<'a> {
    /// Opaque bytes given at create (member and cluster id); repeated at the head of every segment.
    Metadata(&'a [u8]),
    /// A raft log entry: index u64 LE, term u64 LE, data.
    Entry {
        index: u64,
        term: u64,
        data: &'a [u8],
    },
    /// term, vote, commit as u64 LE.
    HardState(HardState),
    /// The running CRC before this segment: the first record of every segment.
    Crc(u32),
    /// Snapshot mark: index u64 LE, term u64 LE, conf_state.
    Snapshot {
        index: u64,
        term: u64,
        conf_state: &'a [u8],
    },
}

impl<'a> Record<'a> {
    pub(crate) fn entry(e: &'a WalEntry) -> Self {
        Record::Entry {
            index: e.index,
            term: e.term,
            data: &e.data,
        }
    }

    pub(crate) fn snapshot(m: &'a SnapshotMark) -> Self {
        Record::Snapshot {
            index: m.index,
            term: m.term,
            conf_state: &m.conf_state,
        }
    }

    fn kind(&self) -> u8 {
        match self {
            Record::Metadata(_) => TYPE_METADATA,
            Record::Entry { .. } => TYPE_ENTRY,
            Record::HardState(_) => TYPE_HARD_STATE,
            Record::Crc(_) => TYPE_CRC,
            Record::Snapshot { .. } => TYPE_SNAPSHOT,
        }
    }

    /// Payload length in bytes.
    pub(crate) fn payload_len(&self) -> usize {
        match self {
            Record::Metadata(m) => m.len(),
            Record::Entry { data, .. } => 16 + data.len(),
            Record::HardState(_) => 24,
            Record::Crc(_) => 4,
            Record::Snapshot { conf_state, .. } => 16 + conf_state.len(),
        }
    }

    fn write_payload(&self, buf: &mut Vec<u8>) {
        match *self {
            Record::Metadata(m) => buf.extend_from_slice(m),
            Record::Entry { index, term, data } => {
                buf.extend_from_slice(&index.to_le_bytes());
                buf.extend_from_slice(&term.to_le_bytes());
                buf.extend_from_slice(data);
            }
            Record::HardState(hs) => {
                buf.extend_from_slice(&hs.term.to_le_bytes());
                buf.extend_from_slice(&hs.vote.to_le_bytes());
                buf.extend_from_slice(&hs.commit.to_le_bytes());
            }
            Record::Crc(crc) => buf.extend_from_slice(&crc.to_le_bytes()),
            Record::Snapshot {
                index,
                term,
                conf_state,
            } => {
                buf.extend_from_slice(&index.to_le_bytes());
                buf.extend_from_slice(&term.to_le_bytes());
                buf.extend_from_slice(conf_state);
            }
        }
    }

    fn parse(kind: u8, p: &'a [u8]) -> Result<Self, DecodeErrorKind> {
        let u64_at = |at: usize| {
            let mut b = [0; 8];
            b.copy_from_slice(&p[at..at + 8]);
            u64::from_le_bytes(b)
        };
        match kind {
            TYPE_METADATA => Ok(Record::Metadata(p)),
            TYPE_ENTRY if p.len() >= 16 => Ok(Record::Entry {
                index: u64_at(0),
                term: u64_at(8),
                data: &p[16..],
            }),
            TYPE_HARD_STATE if p.len() == 24 => Ok(Record::HardState(HardState {
                term: u64_at(0),
                vote: u64_at(8),
                commit: u64_at(16),
            })),
            TYPE_CRC if p.len() == 4 => {
                Ok(Record::Crc(u32::from_le_bytes([p[0], p[1], p[2], p[3]])))
            }
            TYPE_SNAPSHOT if p.len() >= 16 => Ok(Record::Snapshot {
                index: u64_at(0),
                term: u64_at(8),
                conf_state: &p[16..],
            }),
            TYPE_ENTRY | TYPE_HARD_STATE | TYPE_CRC | TYPE_SNAPSHOT => {
                Err(DecodeErrorKind::Malformed { kind, len: p.len() })
            }
            _ => Err(DecodeErrorKind::BadType(kind)),
        }
    }
}

/// Appends `rec` framed to `buf`, chained on `prev_crc`; returns the record's CRC, which seeds
/// the next one. The caller checks `payload_len() <= MAX_PAYLOAD` first.
pub(crate) fn encode(buf: &mut Vec<u8>, prev_crc: u32, rec: &Record<'_>) -> u32 {
    let len = u32::try_from(rec.payload_len()).unwrap_or(u32::MAX);
    let start = buf.len();
    buf.extend_from_slice(&len.to_le_bytes());
    buf.push(rec.kind());
    buf.extend_from_slice(&[0; 4]);
    rec.write_payload(buf);
    let crc = chain(prev_crc, rec.kind(), &buf[start + HEADER_LEN..]);
    buf[start + 5..start + HEADER_LEN].copy_from_slice(&crc.to_le_bytes());
    crc
}

fn chain(prev_crc: u32, kind: u8, payload: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c_append(prev_crc, &[kind]), payload)
}

/// Why the bytes at an offset are not a valid record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DecodeErrorKind {
    /// The header or the payload runs past the end of the file.
    Short,
    /// Unknown type byte (0 is what a zero-filled tail reads as).
    BadType(u8),
    BadCrc {
        stored: u32,
        computed: u32,
    },
    /// The CRC matched but the payload has the wrong size for its type: a writer bug or
    /// corruption that happened to keep the CRC, never a torn write.
    Malformed {
        kind: u8,
        len: usize,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DecodeError {
    pub(crate) kind: DecodeErrorKind,
    /// Where the record claims to end (header + declared length), capped at the buffer end.
    pub(crate) end: usize,
}

impl std::fmt::Display for DecodeErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeErrorKind::Short => write!(f, "record runs past the end of the file"),
            DecodeErrorKind::BadType(t) => write!(f, "unknown record type {t}"),
            DecodeErrorKind::BadCrc { stored, computed } => {
                write!(
                    f,
                    "CRC mismatch: stored {stored:#010x}, computed {computed:#010x}"
                )
            }
            DecodeErrorKind::Malformed { kind, len } => {
                write!(
                    f,
                    "record of type {kind} has a malformed {len}-byte payload"
                )
            }
        }
    }
}

/// A decoded record and what the next one chains on.
#[derive(Debug)]
pub(crate) struct Decoded<'a> {
    pub(crate) record: Record<'a>,
    /// Offset just past this record.
    pub(crate) next: usize,
    pub(crate) crc: u32,
}

/// Decodes the record at `off`. `prev_crc` is `None` for the first record of a segment: that
/// one must be a CRC record, and it is verified against the running CRC it carries (the
/// caller then checks that value against the previous segment's end).
pub(crate) fn decode(
    buf: &[u8],
    off: usize,
    prev_crc: Option<u32>,
) -> Result<Decoded<'_>, DecodeError> {
    let short = DecodeError {
        kind: DecodeErrorKind::Short,
        end: buf.len(),
    };
    let header = buf.get(off..off + HEADER_LEN).ok_or(short.clone())?;
    let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
    let kind = header[4];
    let stored = u32::from_le_bytes([header[5], header[6], header[7], header[8]]);
    let end = off
        .checked_add(HEADER_LEN + len)
        .filter(|e| *e <= buf.len())
        .ok_or(short)?;
    let fail = |kind| DecodeError { kind, end };

    let payload = &buf[off + HEADER_LEN..end];
    // The seed of a segment's first record is the running CRC it carries in its payload.
    let seed = match prev_crc {
        Some(c) => c,
        None if kind == TYPE_CRC && len == 4 => {
            u32::from_le_bytes([payload[0], payload[1], payload[2], payload[3]])
        }
        None => 0,
    };
    if !matches!(
        kind,
        TYPE_METADATA | TYPE_ENTRY | TYPE_HARD_STATE | TYPE_CRC | TYPE_SNAPSHOT
    ) {
        return Err(fail(DecodeErrorKind::BadType(kind)));
    }
    let computed = chain(seed, kind, payload);
    if computed != stored {
        return Err(fail(DecodeErrorKind::BadCrc { stored, computed }));
    }
    let record = Record::parse(kind, payload).map_err(fail)?;
    Ok(Decoded {
        record,
        next: end,
        crc: computed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Case {
        name: &'static str,
        record: Record<'static>,
        want_len: usize,
    }

    #[test]
    fn round_trip() {
        let cases = [
            Case {
                name: "metadata",
                record: Record::Metadata(b"member=1"),
                want_len: 8,
            },
            Case {
                name: "empty metadata",
                record: Record::Metadata(b""),
                want_len: 0,
            },
            Case {
                name: "entry",
                record: Record::Entry {
                    index: 7,
                    term: 3,
                    data: b"put k v",
                },
                want_len: 16 + 7,
            },
            Case {
                name: "entry without data",
                record: Record::Entry {
                    index: u64::MAX,
                    term: 0,
                    data: b"",
                },
                want_len: 16,
            },
            Case {
                name: "hard state",
                record: Record::HardState(HardState {
                    term: 4,
                    vote: 2,
                    commit: 99,
                }),
                want_len: 24,
            },
            Case {
                name: "crc",
                record: Record::Crc(0xdead_beef),
                want_len: 4,
            },
            Case {
                name: "snapshot",
                record: Record::Snapshot {
                    index: 100,
                    term: 5,
                    conf_state: b"\x08\x01",
                },
                want_len: 18,
            },
        ];
        for c in cases {
            let mut buf = Vec::new();
            let crc = encode(&mut buf, 0x1234, &c.record);
            assert_eq!(buf.len(), HEADER_LEN + c.want_len, "{}", c.name);
            let d = decode(&buf, 0, Some(0x1234)).unwrap_or_else(|e| panic!("{}: {e:?}", c.name));
            assert_eq!(d.record, c.record, "{}", c.name);
            assert_eq!(d.next, buf.len(), "{}", c.name);
            assert_eq!(d.crc, crc, "{}", c.name);
            // The same bytes under another chain seed must not verify.
            let e = decode(&buf, 0, Some(0x1235)).unwrap_err();
            assert!(
                matches!(e.kind, DecodeErrorKind::BadCrc { .. }),
                "{}: {e:?}",
                c.name
            );
        }
    }

    #[test]
    fn chain_links_consecutive_records() {
        let mut buf = Vec::new();
        let c0 = encode(&mut buf, 77, &Record::Crc(77));
        let c1 = encode(&mut buf, c0, &Record::Metadata(b"m"));
        let c2 = encode(
            &mut buf,
            c1,
            &Record::Entry {
                index: 1,
                term: 1,
                data: b"x",
            },
        );

        let d0 = decode(&buf, 0, None).unwrap();
        assert_eq!((d0.record, d0.crc), (Record::Crc(77), c0));
        let d1 = decode(&buf, d0.next, Some(d0.crc)).unwrap();
        assert_eq!(d1.crc, c1);
        let d2 = decode(&buf, d1.next, Some(d1.crc)).unwrap();
        assert_eq!((d2.crc, d2.next), (c2, buf.len()));
    }

    #[test]
    fn decode_failures() {
        let mut good = Vec::new();
        encode(
            &mut good,
            0,
            &Record::Entry {
                index: 1,
                term: 1,
                data: b"abcdef",
            },
        );

        struct Bad {
            name: &'static str,
            bytes: Vec<u8>,
            want: fn(&DecodeErrorKind) -> bool,
        }
        let mut flipped = good.clone();
        flipped[HEADER_LEN + 17] ^= 0x40;
        let mut bad_type = good.clone();
        bad_type[4] = 9;
        let mut hs_too_short = Vec::new();
        // A HardState type with a 4-byte payload and a valid CRC: malformed, not torn.
        hs_too_short.extend_from_slice(&4u32.to_le_bytes());
        hs_too_short.push(TYPE_HARD_STATE);
        hs_too_short.extend_from_slice(&chain(0, TYPE_HARD_STATE, &[1, 2, 3, 4]).to_le_bytes());
        hs_too_short.extend_from_slice(&[1, 2, 3, 4]);

        let cases = [
            Bad {
                name: "empty",
                bytes: vec![],
                want: |k| *k == DecodeErrorKind::Short,
            },
            Bad {
                name: "half header",
                bytes: good[..5].to_vec(),
                want: |k| *k == DecodeErrorKind::Short,
            },
            Bad {
                name: "half payload",
                bytes: good[..good.len() - 2].to_vec(),
                want: |k| *k == DecodeErrorKind::Short,
            },
            Bad {
                name: "zeros",
                bytes: vec![0; 64],
                want: |k| *k == DecodeErrorKind::BadType(0),
            },
            Bad {
                name: "unknown type",
                bytes: bad_type,
                want: |k| *k == DecodeErrorKind::BadType(9),
            },
            Bad {
                name: "flipped payload",
                bytes: flipped,
                want: |k| matches!(k, DecodeErrorKind::BadCrc { .. }),
            },
            Bad {
                name: "malformed",
                bytes: hs_too_short,
                want: |k| {
                    matches!(
                        k,
                        DecodeErrorKind::Malformed {
                            kind: TYPE_HARD_STATE,
                            len: 4
                        }
                    )
                },
            },
        ];
        for c in cases {
            let e = decode(&c.bytes, 0, Some(0)).unwrap_err();
            assert!((c.want)(&e.kind), "{}: got {e:?}", c.name);
        }
    }
}
