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
        ];
        for c in cases {
            assert_eq!(c.err.to_string(), c.want);
        }
    }
}
