//! Why a create request is refused. These never become gRPC errors: etcd sends them in-band as
//! a created + canceled response's `cancel_reason`, and clients match on the text.

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WatchError {
    /// `range_end` is set and not above `key`.
    #[error("mvcc: watcher range is empty")]
    EmptyRange,
    /// The client chose a watch id already in use on its stream.
    #[error("mvcc: duplicate watch ID provided on the WatchStream")]
    DuplicateId,
    /// A negative `start_revision` (etcd 3.5.24, #20709: the text of `rpctypes.ErrCompacted`).
    #[error("etcdserver: mvcc: required revision has been compacted")]
    NegativeRevision,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_etcds() {
        struct Case {
            err: WatchError,
            want: &'static str,
        }
        let cases = [
            Case {
                err: WatchError::EmptyRange,
                want: "mvcc: watcher range is empty",
            },
            Case {
                err: WatchError::DuplicateId,
                want: "mvcc: duplicate watch ID provided on the WatchStream",
            },
            Case {
                err: WatchError::NegativeRevision,
                want: "etcdserver: mvcc: required revision has been compacted",
            },
        ];
        for c in cases {
            assert_eq!(c.err.to_string(), c.want);
        }
    }
}
