//! etcd's revision: `main` counts committed write transactions (one per Put, DeleteRange or Txn
//! that changed something), `sub` orders the changes inside one transaction.
//!
//! On disk a revision is the key of the `key` table: 8-byte big-endian `main`, the byte `_`,
//! 8-byte big-endian `sub` (17 bytes), plus a trailing `t` when the record is a tombstone
//! (18 bytes). Big-endian makes bytewise order equal numeric order for non-negative values.

/// Length of an encoded revision without the tombstone marker.
pub const REV_BYTES_LEN: usize = 17;
/// Length of an encoded tombstone revision.
pub const MARKED_REV_BYTES_LEN: usize = 18;
const TOMBSTONE_MARK: u8 = b't';

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Revision {
    pub main: i64,
    pub sub: i64,
}

impl Revision {
    pub const fn new(main: i64, sub: i64) -> Self {
        Self { main, sub }
    }

    /// The 17-byte key of this revision (18 with the tombstone marker).
    pub fn to_bytes(self, tombstone: bool) -> Vec<u8> {
        let mut out = Vec::with_capacity(MARKED_REV_BYTES_LEN);
        out.extend_from_slice(&self.main.to_be_bytes());
        out.push(b'_');
        out.extend_from_slice(&self.sub.to_be_bytes());
        if tombstone {
            out.push(TOMBSTONE_MARK);
        }
        out
    }

    /// Decodes a `key` table key; returns the revision and whether it marks a tombstone.
    /// `None` for anything that is not a well-formed revision key.
    pub fn from_bytes(bytes: &[u8]) -> Option<(Self, bool)> {
        let tombstone = match bytes.len() {
            REV_BYTES_LEN => false,
            MARKED_REV_BYTES_LEN if bytes[REV_BYTES_LEN] == TOMBSTONE_MARK => true,
            _ => return None,
        };
        if bytes[8] != b'_' {
            return None;
        }
        let main = i64::from_be_bytes(bytes[0..8].try_into().ok()?);
        let sub = i64::from_be_bytes(bytes[9..17].try_into().ok()?);
        Some((Self { main, sub }, tombstone))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_round_trips_and_sorts() {
        struct Case {
            rev: Revision,
            tombstone: bool,
            want_len: usize,
        }
        let cases = [
            Case {
                rev: Revision::new(0, 0),
                tombstone: false,
                want_len: 17,
            },
            Case {
                rev: Revision::new(1, 0),
                tombstone: true,
                want_len: 18,
            },
            Case {
                rev: Revision::new(0x0102_0304_0506_0708, 9),
                tombstone: false,
                want_len: 17,
            },
            Case {
                rev: Revision::new(i64::MAX, i64::MAX),
                tombstone: true,
                want_len: 18,
            },
        ];
        for c in cases {
            let b = c.rev.to_bytes(c.tombstone);
            assert_eq!(b.len(), c.want_len);
            assert_eq!(b[8], b'_');
            assert_eq!(Revision::from_bytes(&b), Some((c.rev, c.tombstone)));
        }
        let a = Revision::new(5, 2).to_bytes(false);
        let b = Revision::new(5, 10).to_bytes(false);
        let c = Revision::new(6, 0).to_bytes(false);
        assert!(a < b && b < c);
        assert_eq!(
            Revision::new(0x0102_0304_0506_0708, 1).to_bytes(false)[..8],
            [1, 2, 3, 4, 5, 6, 7, 8]
        );
    }

    #[test]
    fn malformed_keys_are_rejected() {
        let good = Revision::new(3, 4).to_bytes(false);
        let mut bad_sep = good.clone();
        bad_sep[8] = b'-';
        let mut bad_mark = Revision::new(3, 4).to_bytes(true);
        bad_mark[17] = b'x';
        for bytes in [
            &b""[..],
            &good[..16],
            &bad_sep[..],
            &bad_mark[..],
            &[0u8; 19][..],
        ] {
            assert_eq!(Revision::from_bytes(bytes), None, "{bytes:?}");
        }
    }
}
