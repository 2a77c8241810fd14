//! What a watcher watches, and a group of watchers indexed by it.
//!
//! A [`WatcherGroup`] answers "which watchers cover this key" without looking at the others:
//! single-key watchers sit in a hash map by key, range watchers (`[key, end)`, prefixes, from-key)
//! in an [`IntervalTree`] where watchers on the identical range share one node, as etcd's
//! `watcherGroup` does. Sets are ordered so fan-out order (and every test) is deterministic.

use std::collections::{BTreeSet, HashMap};

use crate::interval::{End, Interval, IntervalTree};

/// A watcher's identity inside the hub; never reused.
pub(crate) type Handle = u64;

/// The keys one watcher covers, after etcd's server-side normalization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum WatchKeys {
    Single(Vec<u8>),
    Range(Interval),
}

/// A create request whose `range_end` is not above its key: etcd's `mvcc: watcher range is
/// empty`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EmptyRange;

impl WatchKeys {
    /// etcd's rules: an empty key means `"\0"` (the smallest key); an empty `range_end` watches
    /// the key alone; `range_end == "\0"` watches every key from `key` on; any other `range_end`
    /// must be above `key`.
    pub fn from_request(key: &[u8], range_end: &[u8]) -> Result<Self, EmptyRange> {
        let key = if key.is_empty() {
            vec![0]
        } else {
            key.to_vec()
        };
        match range_end {
            [] => Ok(Self::Single(key)),
            [0] => Ok(Self::Range(Interval {
                start: key,
                end: End::Unbounded,
            })),
            end if key.as_slice() >= end => Err(EmptyRange),
            end => Ok(Self::Range(Interval {
                start: key,
                end: End::Key(end.to_vec()),
            })),
        }
    }

    pub fn contains(&self, key: &[u8]) -> bool {
        match self {
            Self::Single(k) => k.as_slice() == key,
            Self::Range(ivl) => ivl.contains(key),
        }
    }
}

#[derive(Default)]
pub(crate) struct WatcherGroup {
    keys: HashMap<Vec<u8>, BTreeSet<Handle>>,
    ranges: IntervalTree<BTreeSet<Handle>>,
    members: BTreeSet<Handle>,
}

impl WatcherGroup {
    pub fn len(&self) -> usize {
        self.members.len()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    pub fn members(&self) -> impl Iterator<Item = Handle> + '_ {
        self.members.iter().copied()
    }

    pub fn add(&mut self, h: Handle, keys: &WatchKeys) {
        let fresh = self.members.insert(h);
        debug_assert!(fresh, "watcher {h} added to a group twice");
        match keys {
            WatchKeys::Single(k) => {
                self.keys.entry(k.clone()).or_default().insert(h);
            }
            WatchKeys::Range(ivl) => match self.ranges.get_mut(ivl) {
                Some(set) => {
                    set.insert(h);
                }
                None => self.ranges.insert(ivl.clone(), BTreeSet::from([h])),
            },
        }
    }

    /// Remove `h` (watching `keys`); false if it was not here.
    pub fn remove(&mut self, h: Handle, keys: &WatchKeys) -> bool {
        if !self.members.remove(&h) {
            return false;
        }
        match keys {
            WatchKeys::Single(k) => {
                if let Some(set) = self.keys.get_mut(k) {
                    set.remove(&h);
                    if set.is_empty() {
                        self.keys.remove(k);
                    }
                }
            }
            WatchKeys::Range(ivl) => {
                if let Some(set) = self.ranges.get_mut(ivl) {
                    set.remove(&h);
                    if set.is_empty() {
                        self.ranges.remove(ivl);
                    }
                }
            }
        }
        true
    }

    /// Call `f` once for every watcher in the group that covers `key`.
    pub fn for_each_match(&self, key: &[u8], mut f: impl FnMut(Handle)) {
        if let Some(set) = self.keys.get(key) {
            set.iter().for_each(|h| f(*h));
        }
        if self.ranges.len() > 0 {
            self.ranges.stab(key, &mut |set: &BTreeSet<Handle>| {
                set.iter().for_each(|h| f(*h))
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_normalization_follows_etcd() {
        struct Case {
            key: &'static [u8],
            range_end: &'static [u8],
            want: Result<WatchKeys, EmptyRange>,
        }
        let range = |s: &[u8], e: Option<&[u8]>| {
            WatchKeys::Range(Interval {
                start: s.to_vec(),
                end: e.map_or(End::Unbounded, |e| End::Key(e.to_vec())),
            })
        };
        let cases = [
            Case {
                key: b"foo",
                range_end: b"",
                want: Ok(WatchKeys::Single(b"foo".to_vec())),
            },
            Case {
                key: b"",
                range_end: b"",
                want: Ok(WatchKeys::Single(vec![0])),
            },
            Case {
                key: b"foo",
                range_end: b"\0",
                want: Ok(range(b"foo", None)),
            },
            Case {
                key: b"",
                range_end: b"\0",
                want: Ok(range(b"\0", None)),
            },
            Case {
                key: b"foo",
                range_end: b"fop",
                want: Ok(range(b"foo", Some(b"fop"))),
            },
            Case {
                key: b"foo",
                range_end: b"foo",
                want: Err(EmptyRange),
            },
            Case {
                key: b"foo",
                range_end: b"a",
                want: Err(EmptyRange),
            },
        ];
        for c in cases {
            assert_eq!(
                WatchKeys::from_request(c.key, c.range_end),
                c.want,
                "{:?}..{:?}",
                c.key,
                c.range_end
            );
        }
    }

    #[test]
    fn matches_by_key_prefix_range_and_from_key() {
        let mut g = WatcherGroup::default();
        let w = |k: &[u8], e: &[u8]| WatchKeys::from_request(k, e).unwrap();
        let watchers = [
            (1, w(b"foo", b"")),
            (2, w(b"foo", b"fop")),
            (3, w(b"fo", b"\0")),
            (4, w(b"a", b"c")),
            (5, w(b"foo", b"")),
            (6, w(b"foo", b"fop")),
        ];
        for (h, k) in &watchers {
            g.add(*h, k);
        }
        struct Case {
            key: &'static [u8],
            want: Vec<Handle>,
        }
        let cases = [
            Case {
                key: b"foo",
                want: vec![1, 2, 3, 5, 6],
            },
            Case {
                key: b"foo1",
                want: vec![2, 3, 6],
            },
            Case {
                key: b"zzz",
                want: vec![3],
            },
            Case {
                key: b"b",
                want: vec![4],
            },
            Case {
                key: b"c",
                want: vec![],
            },
        ];
        for c in &cases {
            let mut got = Vec::new();
            g.for_each_match(c.key, |h| got.push(h));
            got.sort();
            assert_eq!(got, c.want, "key {:?}", c.key);
            for (h, k) in &watchers {
                assert_eq!(k.contains(c.key), c.want.contains(h));
            }
        }
        assert!(g.remove(2, &watchers[1].1));
        assert!(!g.remove(2, &watchers[1].1));
        assert!(g.remove(1, &watchers[0].1));
        let mut got = Vec::new();
        g.for_each_match(b"foo", |h| got.push(h));
        got.sort();
        assert_eq!(got, vec![3, 5, 6]);
        assert_eq!(g.len(), 4);
    }
}
