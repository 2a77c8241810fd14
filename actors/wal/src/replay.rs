//! Rebuilding raft's durable state from records in file order. Pure: no I/O, so the log rules
//! (overwrite, gap, snapshot mark) are tested on their own.

use actcd_types::msg::{HardState, WalEntry};

use crate::{SnapshotMark, WalContents};

#[derive(Debug, Default)]
pub(crate) struct Replay {
    pub(crate) metadata: Option<Vec<u8>>,
    hard_state: HardState,
    snapshot: Option<SnapshotMark>,
    /// Entries above the latest mark, contiguous and ascending.
    log: Vec<WalEntry>,
    /// The index the next entry may follow: the last entry seen, or the mark if it is higher.
    /// `None` until anything is seen, because the oldest surviving segment may start anywhere.
    last_index: Option<u64>,
}

impl Replay {
    pub(crate) fn last_index(&self) -> Option<u64> {
        self.last_index
    }

    pub(crate) fn snapshot(&self) -> Option<&SnapshotMark> {
        self.snapshot.as_ref()
    }

    pub(crate) fn hard_state(&self) -> HardState {
        self.hard_state
    }

    /// Raft's overwrite rule: an entry at or below the last index replaces that index and
    /// everything after it. Errors are reasons for `WalError::Corrupt`.
    pub(crate) fn entry(&mut self, e: WalEntry) -> Result<(), String> {
        check_next(self.last_index, self.snapshot.as_ref(), e.index)?;
        if self.last_index.is_some_and(|last| e.index <= last) {
            let keep = self.log.partition_point(|x| x.index < e.index);
            self.log.truncate(keep);
        }
        self.last_index = Some(e.index);
        self.log.push(e);
        Ok(())
    }

    pub(crate) fn set_hard_state(&mut self, hs: HardState) {
        self.hard_state = hs;
    }

    /// A mark drops every entry at or below it; a mark past the last entry (a snapshot received
    /// from the leader) empties the log, and the next entry must follow the mark.
    pub(crate) fn mark(&mut self, mark: SnapshotMark) -> Result<(), String> {
        check_mark(self.snapshot.as_ref(), mark.index)?;
        let drop = self.log.partition_point(|x| x.index <= mark.index);
        self.log.drain(..drop);
        self.last_index = Some(self.last_index.map_or(mark.index, |l| l.max(mark.index)));
        self.snapshot = Some(mark);
        Ok(())
    }

    pub(crate) fn finish(self, metadata: Vec<u8>) -> WalContents {
        WalContents {
            metadata,
            snapshot: self.snapshot,
            hard_state: self.hard_state,
            entries: self.log,
        }
    }
}

/// The one rule for where the next entry may go, shared by the writer (which refuses to write
/// a violation) and the reader (which calls one corruption).
pub(crate) fn check_next(
    last: Option<u64>,
    mark: Option<&SnapshotMark>,
    index: u64,
) -> Result<(), String> {
    if let Some(m) = mark
        && index <= m.index
    {
        return Err(format!(
            "entry {index} is at or below the snapshot mark {}",
            m.index
        ));
    }
    if let Some(last) = last
        && index > last.saturating_add(1)
    {
        return Err(format!("entry {index} leaves a gap after {last}"));
    }
    Ok(())
}

/// Marks never go backwards: the applied index only grows.
pub(crate) fn check_mark(prev: Option<&SnapshotMark>, index: u64) -> Result<(), String> {
    match prev {
        Some(p) if index < p.index => Err(format!(
            "snapshot mark {index} is below the earlier mark {}",
            p.index
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(index: u64, term: u64) -> WalEntry {
        WalEntry {
            index,
            term,
            data: format!("{index}/{term}").into_bytes(),
        }
    }

    fn mark(index: u64) -> SnapshotMark {
        SnapshotMark {
            index,
            term: 1,
            conf_state: vec![],
        }
    }

    enum Step {
        E(u64, u64),
        Mark(u64),
    }

    struct Case {
        name: &'static str,
        steps: Vec<Step>,
        want_entries: Vec<(u64, u64)>,
        want_err: Option<&'static str>,
    }

    #[test]
    fn log_rules() {
        use Step::{E, Mark};
        let cases = [
            Case {
                name: "append in order",
                steps: vec![E(1, 1), E(2, 1), E(3, 1)],
                want_entries: vec![(1, 1), (2, 1), (3, 1)],
                want_err: None,
            },
            Case {
                name: "overwrite the tail",
                steps: vec![
                    E(1, 1),
                    E(2, 1),
                    E(3, 1),
                    E(4, 1),
                    E(5, 1),
                    E(3, 2),
                    E(4, 2),
                ],
                want_entries: vec![(1, 1), (2, 1), (3, 2), (4, 2)],
                want_err: None,
            },
            Case {
                name: "overwrite the last entry",
                steps: vec![E(1, 1), E(2, 1), E(2, 3)],
                want_entries: vec![(1, 1), (2, 3)],
                want_err: None,
            },
            Case {
                name: "overwrite from the first entry",
                steps: vec![E(4, 1), E(5, 1), E(4, 2)],
                want_entries: vec![(4, 2)],
                want_err: None,
            },
            Case {
                name: "first entry may start anywhere (older segments released)",
                steps: vec![E(90, 3), E(91, 3)],
                want_entries: vec![(90, 3), (91, 3)],
                want_err: None,
            },
            Case {
                name: "gap",
                steps: vec![E(1, 1), E(3, 1)],
                want_entries: vec![],
                want_err: Some("entry 3 leaves a gap after 1"),
            },
            Case {
                name: "mark trims entries at or below it",
                steps: vec![E(1, 1), E(2, 1), E(3, 1), Mark(2), E(4, 1)],
                want_entries: vec![(3, 1), (4, 1)],
                want_err: None,
            },
            Case {
                name: "mark past the log resets it",
                steps: vec![E(1, 1), E(2, 1), Mark(10), E(11, 2)],
                want_entries: vec![(11, 2)],
                want_err: None,
            },
            Case {
                name: "entry at the mark after the mark",
                steps: vec![E(1, 1), Mark(1), E(1, 2)],
                want_entries: vec![],
                want_err: Some("entry 1 is at or below the snapshot mark 1"),
            },
            Case {
                name: "mark going backwards",
                steps: vec![Mark(5), Mark(4)],
                want_entries: vec![],
                want_err: Some("snapshot mark 4 is below the earlier mark 5"),
            },
        ];
        for c in cases {
            let mut r = Replay::default();
            let mut err = None;
            for s in c.steps {
                let res = match s {
                    E(i, t) => r.entry(e(i, t)),
                    Mark(i) => r.mark(mark(i)),
                };
                if let Err(x) = res {
                    err = Some(x);
                    break;
                }
            }
            assert_eq!(err.as_deref(), c.want_err, "{}", c.name);
            if c.want_err.is_none() {
                let got: Vec<_> = r
                    .finish(vec![])
                    .entries
                    .iter()
                    .map(|x| (x.index, x.term))
                    .collect();
                assert_eq!(got, c.want_entries, "{}", c.name);
            }
        }
    }
}
