//! The `key` table's record format: every stored record verifies itself.
//!
//! A record is stored as a 4-byte big-endian CRC32C (Castagnoli) followed by the record etcd
//! would store, the encoded `mvccpb.KeyValue` (a tombstone's holds only its key). The checksum
//! covers the record's own key in the table — its revision, [`crate::Revision::to_bytes`] — and
//! then those `KeyValue` bytes, so a record whose value changed, or that sits under a key it was
//! not written under, fails its check. [`seal`]/[`encode`] write a record, [`open`]/[`decode`]
//! read one; nothing else in the workspace touches the stored form.
//!
//! What the outside sees keeps etcd's bytes: HashKV hashes the revision key and the
//! `KeyValue` bytes [`open`] returns (the same bytes as before checksums, and as etcd's), the
//! Snapshot RPC's bbolt file carries plain `KeyValue` values as etcd's does, and a restore
//! from an etcd file seals every record it writes. A follower's snapshot (the whole-store
//! blob) carries records as stored, each checked as it is read.
//!
//! ## Why CRC32C, and what it does not do
//! The threat is the disk and the memory on the way to it: bit rot, a torn or misdirected
//! write, an operator's slip with a hex editor. CRC32C catches every error burst up to 32 bits
//! long (so any one damaged byte, or up to four adjacent ones), every odd number of flipped
//! bits, and any other random damage with probability 1 − 2⁻³², at a cost of well under a
//! nanosecond per byte with the SSE4.2/ARMv8 instructions the `crc32c` crate uses. It is no
//! defence against an adversary who can write the file: a CRC is linear and keyless, so one
//! who changes a value recomputes its checksum (or writes a new record) in microseconds.
//! Stopping that would take a MAC keyed with a secret the data directory does not hold, and
//! whoever can write the file usually runs as the server and reads its secrets too.
//!
//! ## What it costs (2 vCPUs shared with other builds, release)
//! Per record, best of 60 × 20k calls: sealing a 256 B value adds ~30 ns to its encoding
//! (34 → 63 ns), checking one adds ~30 ns to its decoding (93 → 125 ns); at 4 KiB, ~200 ns
//! each (the CRC runs at ~20 GB/s). Against a server's CPU per request (`benches/
//! compare-etcd.sh`: ~34 µs a put at 100 clients, ~12 µs a serializable one-key range) that
//! is under 0.3%. The end-to-end runs of a build without and with checksums (4 runs of 2
//! rounds, interleaved, load 5–9) put CPU per put at 33.0 → 34.5 µs and per range at 12.2 →
//! 13.2 µs, a difference inside the runs' own spread (etcd's CPU per range moved 34–40 µs
//! across the same runs) and also holding the other changes between the two builds.
//!
//! ## Format versions
//! `meta`/[`FORMAT_META_KEY`] holds the format of the records in `key` as an 8-byte big-endian
//! integer: absent in data directories written before checksums (records are plain
//! `KeyValue`s), [`FORMAT_CHECKSUMMED`] since. The MVCC store rewrites an old table once when it
//! opens it (see its crate doc); a record is never read in a form the version does not name.

use prost::Message;

use actcd_proto::mvccpb::KeyValue;

use crate::Revision;

/// `meta` key of the `key` table's record format (8-byte big-endian).
pub const FORMAT_META_KEY: &[u8] = b"actcdKeyFormat";
/// Records as [`seal`] writes them: checksum, then the `KeyValue`.
pub const FORMAT_CHECKSUMMED: u64 = 1;

/// Bytes the checksum adds to each record.
pub const CHECKSUM_LEN: usize = 4;

fn checksum(rev_key: &[u8], kv: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(rev_key), kv)
}

/// The stored form of the record at `rev_key` whose `KeyValue` encodes to `kv`.
pub fn seal(rev_key: &[u8], kv: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(CHECKSUM_LEN + kv.len());
    out.extend_from_slice(&checksum(rev_key, kv).to_be_bytes());
    out.extend_from_slice(kv);
    out
}

/// The stored form of `kv` at `rev_key`, encoded in place (one allocation, no copy).
pub fn encode(rev_key: &[u8], kv: &KeyValue) -> Vec<u8> {
    let mut out = Vec::with_capacity(CHECKSUM_LEN + kv.encoded_len());
    out.extend_from_slice(&[0; CHECKSUM_LEN]);
    kv.encode_raw(&mut out);
    let sum = checksum(rev_key, &out[CHECKSUM_LEN..]);
    out[..CHECKSUM_LEN].copy_from_slice(&sum.to_be_bytes());
    out
}

/// The `KeyValue` bytes of a stored record, once its checksum matches.
pub fn open<'a>(rev_key: &[u8], stored: &'a [u8]) -> Result<&'a [u8], DamagedRecord> {
    let Some((sum, kv)) = stored.split_first_chunk::<CHECKSUM_LEN>() else {
        return Err(DamagedRecord::of(
            rev_key,
            &[],
            format!("{} bytes, shorter than a checksum", stored.len()),
        ));
    };
    let want = u32::from_be_bytes(*sum);
    let got = checksum(rev_key, kv);
    if got != want {
        return Err(DamagedRecord::of(
            rev_key,
            kv,
            format!("checksum mismatch (stored {want:08x}, computed {got:08x})"),
        ));
    }
    Ok(kv)
}

/// The record at `rev_key`, checked and decoded.
pub fn decode(rev_key: &[u8], stored: &[u8]) -> Result<KeyValue, DamagedRecord> {
    let kv = open(rev_key, stored)?;
    KeyValue::decode(kv).map_err(|e| DamagedRecord::of(rev_key, kv, format!("undecodable: {e}")))
}

/// The fields of an encoded `KeyValue` other than its value, borrowed from the encoding.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KeyFields<'a> {
    pub key: &'a [u8],
    pub create_revision: i64,
    pub mod_revision: i64,
    pub version: i64,
    pub lease: i64,
}

/// The record at `rev_key`, checked, with its fields read in place: the value is stepped
/// over, never copied (what rebuilding the key index needs). Damage is reported as
/// [`decode`] reports it.
pub fn decode_fields<'a>(rev_key: &[u8], stored: &'a [u8]) -> Result<KeyFields<'a>, DamagedRecord> {
    let kv = open(rev_key, stored)?;
    match fields(kv) {
        Some(f) => Ok(f),
        None => Err(decode(rev_key, stored)
            .err()
            .unwrap_or_else(|| DamagedRecord::of(rev_key, kv, "undecodable".into()))),
    }
}

/// Walks the protobuf encoding of a `KeyValue` (`mvccpb.KeyValue`: key 1, create_revision 2,
/// mod_revision 3, version 4, value 5, lease 6) without decoding its value; a later
/// occurrence of a field wins, as in any protobuf decoder. `None` where prost would refuse
/// the bytes: a truncated or over-long varint, a length past the end, a field number 0, a
/// group, or a known field with the wrong wire type.
pub fn fields(mut buf: &[u8]) -> Option<KeyFields<'_>> {
    let mut f = KeyFields::default();
    while !buf.is_empty() {
        let tag = varint(&mut buf)?;
        let (field, wire) = (tag >> 3, tag & 7);
        if field == 0 || field > u64::from(u32::MAX >> 3) {
            return None;
        }
        match wire {
            0 => {
                let v = varint(&mut buf)? as i64;
                match field {
                    2 => f.create_revision = v,
                    3 => f.mod_revision = v,
                    4 => f.version = v,
                    6 => f.lease = v,
                    1 | 5 => return None,
                    _ => {}
                }
            }
            2 => {
                let len = usize::try_from(varint(&mut buf)?).ok()?;
                let bytes = buf.get(..len)?;
                buf = &buf[len..];
                match field {
                    1 => f.key = bytes,
                    5 => {}
                    2..=4 | 6 => return None,
                    _ => {}
                }
            }
            _ if (1..=6).contains(&field) => return None,
            _ => skip(&mut buf, field, wire, 0)?,
        }
    }
    Some(f)
}

/// Steps over one unknown field's payload (`wire` 1, 3 or 5; a group to its end), as
/// protobuf decoders skip unknown fields.
fn skip(buf: &mut &[u8], field: u64, wire: u64, depth: u32) -> Option<()> {
    match wire {
        1 => *buf = buf.get(8..)?,
        5 => *buf = buf.get(4..)?,
        3 if depth < 100 => loop {
            let tag = varint(buf)?;
            let (inner, inner_wire) = (tag >> 3, tag & 7);
            match inner_wire {
                4 if inner == field => return Some(()),
                0 => {
                    varint(buf)?;
                }
                2 => {
                    let len = usize::try_from(varint(buf)?).ok()?;
                    *buf = buf.get(len..)?;
                }
                1 | 3 | 5 => skip(buf, inner, inner_wire, depth + 1)?,
                _ => return None,
            }
        },
        _ => return None,
    }
    Some(())
}

/// One base-128 varint off the front of `buf`.
fn varint(buf: &mut &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for i in 0..10 {
        let (&b, rest) = buf.split_first()?;
        *buf = rest;
        v |= u64::from(b & 0x7f) << (7 * i);
        if b < 0x80 {
            // The tenth byte may only carry the top bit.
            return (i < 9 || b <= 1).then_some(v);
        }
    }
    None
}

/// What a damaged record's bytes still decode to, if anything: only for rebuilding the key
/// index around it at start-up (reads of its key then meet the damage instead of an older
/// version), never to be returned as data.
pub fn decode_unverified(stored: &[u8]) -> Option<KeyValue> {
    KeyValue::decode(stored.get(CHECKSUM_LEN..)?).ok()
}

/// A `key` record that failed its check: where it is and, if its bytes still decode, the key it
/// claims to hold (the key is for the operator; nothing else of the record is trusted).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("damaged record at revision {} (key {}): {reason}", self.revision_text(), self.key_text())]
pub struct DamagedRecord {
    /// The record's revision, if its table key is a revision key.
    pub revision: Option<Revision>,
    pub tombstone: bool,
    /// The key the record's bytes name, if they decode.
    pub key: Option<Vec<u8>>,
    pub reason: String,
}

impl DamagedRecord {
    fn of(rev_key: &[u8], kv: &[u8], reason: String) -> Self {
        let at = Revision::from_bytes(rev_key);
        Self {
            revision: at.map(|(r, _)| r),
            tombstone: at.is_some_and(|(_, t)| t),
            key: KeyValue::decode(kv).ok().map(|kv| kv.key),
            reason,
        }
    }

    /// A record the index names but the table doesn't hold.
    pub fn missing(revision: Revision) -> Self {
        Self {
            revision: Some(revision),
            tombstone: false,
            key: None,
            reason: "missing from the key table".into(),
        }
    }

    /// `main_sub`, as etcd prints revisions, or `unknown`.
    pub fn revision_text(&self) -> String {
        match self.revision {
            Some(r) => format!(
                "{}_{}{}",
                r.main,
                r.sub,
                if self.tombstone { "t" } else { "" }
            ),
            None => "unknown".into(),
        }
    }

    /// The key, quoted (lossy UTF-8), or `unknown`.
    pub fn key_text(&self) -> String {
        match &self.key {
            Some(k) => format!("{:?}", String::from_utf8_lossy(k)),
            None => "unknown".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_read_in_place_agree_with_prost() {
        let full = KeyValue {
            key: b"some/key".to_vec(),
            create_revision: 7,
            mod_revision: 1 << 40,
            version: 3,
            value: vec![0xab; 300],
            lease: 0x1234_5678_9abc,
        };
        let cases = [
            full.clone(),
            KeyValue::default(),
            KeyValue {
                key: b"tombstone".to_vec(),
                ..Default::default()
            },
            KeyValue {
                lease: -1,
                version: i64::MIN,
                ..full.clone()
            },
        ];
        for kv in cases {
            let bytes = kv.encode_to_vec();
            let f = fields(&bytes).expect("prost's own encoding");
            let want = KeyFields {
                key: &kv.key,
                create_revision: kv.create_revision,
                mod_revision: kv.mod_revision,
                version: kv.version,
                lease: kv.lease,
            };
            assert_eq!(f, want);
            let at = Revision::new(kv.mod_revision, 0).to_bytes(false);
            assert_eq!(decode_fields(&at, &encode(&at, &kv)), Ok(want));
        }
        // Unknown fields of every wire type (varint, fixed64, bytes, group, fixed32) are
        // stepped over; a repeated field's last occurrence wins.
        let mut bytes = full.encode_to_vec();
        bytes.extend_from_slice(&[0x38, 0x05]); // field 7, varint
        bytes.extend_from_slice(&[0x41, 1, 2, 3, 4, 5, 6, 7, 8]); // field 8, fixed64
        bytes.extend_from_slice(&[0x4a, 0x02, 0xff, 0xff]); // field 9, bytes
        bytes.extend_from_slice(&[0x53, 0x08, 0x01, 0x54]); // field 10, group {1: 1}
        bytes.extend_from_slice(&[0x5d, 1, 2, 3, 4]); // field 11, fixed32
        bytes.extend_from_slice(&[0x30, 0x09]); // lease = 9
        let decoded = KeyValue::decode(&bytes[..]).expect("prost reads it");
        let f = fields(&bytes).expect("walkable");
        assert_eq!((f.key, f.lease), (&decoded.key[..], decoded.lease));
        assert_eq!(decoded.lease, 9);
        // What prost refuses, the walk refuses.
        for bad in [
            &[0x0a, 0x05, b'a'][..], // length past the end
            &[0x08, 0x01],           // key as a varint
            &[0x30],                 // truncated varint
            &[0x00, 0x00],           // field 0
            &[
                0x30, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
            ], // varint too long
        ] {
            assert!(KeyValue::decode(bad).is_err(), "{bad:?}");
            assert_eq!(fields(bad), None, "{bad:?}");
        }
    }

    fn kv(key: &str, value: &str) -> KeyValue {
        KeyValue {
            key: key.into(),
            create_revision: 2,
            mod_revision: 3,
            version: 2,
            value: value.into(),
            lease: 0,
        }
    }

    #[test]
    fn a_sealed_record_opens_to_etcds_bytes() {
        let at = Revision::new(3, 0).to_bytes(false);
        let rec = kv("foo", "bar");
        let stored = encode(&at, &rec);
        assert_eq!(stored, seal(&at, &rec.encode_to_vec()));
        assert_eq!(stored.len(), CHECKSUM_LEN + rec.encoded_len());
        assert_eq!(open(&at, &stored).unwrap(), rec.encode_to_vec().as_slice());
        assert_eq!(decode(&at, &stored).unwrap(), rec);
    }

    #[test]
    fn every_single_byte_flip_is_caught_and_named() {
        let at = Revision::new(7, 1).to_bytes(false);
        let stored = encode(&at, &kv("some/key", "a recognisable value"));
        for i in 0..stored.len() {
            for bit in 0..8 {
                let mut bad = stored.clone();
                bad[i] ^= 1 << bit;
                let err = decode(&at, &bad).unwrap_err();
                assert_eq!(err.revision, Some(Revision::new(7, 1)), "byte {i}");
            }
        }
        // A flip inside the value leaves the key readable, so the report names it.
        let mut bad = stored.clone();
        let last = bad.len() - 1;
        bad[last] ^= 0x20;
        let err = decode(&at, &bad).unwrap_err();
        assert_eq!(err.key.as_deref(), Some(b"some/key".as_slice()));
        assert_eq!(
            err.to_string(),
            format!(
                "damaged record at revision 7_1 (key \"some/key\"): {}",
                err.reason
            )
        );
    }

    #[test]
    fn a_record_under_another_revision_or_too_short_is_damaged() {
        struct Case {
            name: &'static str,
            at: Vec<u8>,
            stored: Vec<u8>,
            want_revision: Option<Revision>,
            want_tombstone: bool,
        }
        let written = Revision::new(5, 0).to_bytes(false);
        let stored = encode(&written, &kv("k", "v"));
        let cases = [
            Case {
                name: "moved to another revision",
                at: Revision::new(6, 0).to_bytes(false),
                stored: stored.clone(),
                want_revision: Some(Revision::new(6, 0)),
                want_tombstone: false,
            },
            Case {
                name: "put read as a tombstone",
                at: Revision::new(5, 0).to_bytes(true),
                stored: stored.clone(),
                want_revision: Some(Revision::new(5, 0)),
                want_tombstone: true,
            },
            Case {
                name: "truncated",
                at: written.clone(),
                stored: stored[..3].to_vec(),
                want_revision: Some(Revision::new(5, 0)),
                want_tombstone: false,
            },
            Case {
                name: "plain KeyValue of an old data dir",
                at: written.clone(),
                stored: kv("k", "v").encode_to_vec(),
                want_revision: Some(Revision::new(5, 0)),
                want_tombstone: false,
            },
            Case {
                name: "not a revision key",
                at: b"junk".to_vec(),
                stored,
                want_revision: None,
                want_tombstone: false,
            },
        ];
        for c in cases {
            let err = decode(&c.at, &c.stored).unwrap_err();
            assert_eq!(err.revision, c.want_revision, "{}", c.name);
            assert_eq!(err.tombstone, c.want_tombstone, "{}", c.name);
        }
    }
}
