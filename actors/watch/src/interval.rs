//! An interval tree over byte-string key ranges, for finding every range watch that covers a key.
//!
//! A treap (binary search tree ordered by `(start, end)`, heap-ordered by a pseudo-random
//! priority) where each node also keeps the largest `end` in its subtree. A stabbing query skips
//! any subtree whose largest end is at or below the key, and everything right of a node whose
//! start is above the key, so it costs O(log n + matches) on average. Identical intervals share
//! one node: the caller keeps its watchers for that interval in the node's value.
//!
//! Priorities come from a fixed-seed xorshift, so the shape (and every test) is deterministic.

use std::cmp::Ordering;

/// The exclusive end of a key range: a key, or past every key (a from-key watch).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum End {
    Key(Vec<u8>),
    Unbounded,
}

impl End {
    /// Whether a range ending here still covers `key` (the end is exclusive).
    fn above(&self, key: &[u8]) -> bool {
        match self {
            End::Key(end) => end.as_slice() > key,
            End::Unbounded => true,
        }
    }
}

/// `[start, end)`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Interval {
    pub start: Vec<u8>,
    pub end: End,
}

impl Interval {
    pub fn contains(&self, key: &[u8]) -> bool {
        self.start.as_slice() <= key && self.end.above(key)
    }
}

type Link<V> = Option<Box<Node<V>>>;

struct Node<V> {
    ivl: Interval,
    val: V,
    prio: u64,
    /// The largest `end` in this subtree.
    max_end: End,
    left: Link<V>,
    right: Link<V>,
}

impl<V> Node<V> {
    fn update(&mut self) {
        let mut max = &self.ivl.end;
        for child in [&self.left, &self.right].into_iter().flatten() {
            if child.max_end > *max {
                max = &child.max_end;
            }
        }
        if *max != self.max_end {
            self.max_end = max.clone();
        }
    }
}

pub(crate) struct IntervalTree<V> {
    root: Link<V>,
    len: usize,
    rng: u64,
}

impl<V> Default for IntervalTree<V> {
    fn default() -> Self {
        Self {
            root: None,
            len: 0,
            rng: 0x9E37_79B9_7F4A_7C15,
        }
    }
}

impl<V> IntervalTree<V> {
    /// Number of distinct intervals.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn get_mut(&mut self, ivl: &Interval) -> Option<&mut V> {
        let mut cur = self.root.as_deref_mut();
        while let Some(n) = cur {
            cur = match ivl.cmp(&n.ivl) {
                Ordering::Less => n.left.as_deref_mut(),
                Ordering::Greater => n.right.as_deref_mut(),
                Ordering::Equal => return Some(&mut n.val),
            };
        }
        None
    }

    /// Insert an interval that is not in the tree yet (callers look it up with `get_mut` first).
    pub fn insert(&mut self, ivl: Interval, val: V) {
        debug_assert!(self.get_mut(&ivl).is_none(), "interval inserted twice");
        let prio = self.next_prio();
        let (l, r) = split(self.root.take(), &|n: &Interval| *n < ivl);
        let node = Box::new(Node {
            max_end: ivl.end.clone(),
            ivl,
            val,
            prio,
            left: None,
            right: None,
        });
        self.root = merge(merge(l, Some(node)), r);
        self.len += 1;
    }

    pub fn remove(&mut self, ivl: &Interval) -> Option<V> {
        let (l, rest) = split(self.root.take(), &|n: &Interval| n < ivl);
        let (mid, r) = split(rest, &|n: &Interval| n <= ivl);
        self.root = merge(l, r);
        let node = mid?;
        debug_assert!(node.left.is_none() && node.right.is_none());
        self.len -= 1;
        Some(node.val)
    }

    /// Call `f` with the value of every interval that contains `key`, in interval order.
    pub fn stab<'a>(&'a self, key: &[u8], f: &mut impl FnMut(&'a V)) {
        stab(&self.root, key, f);
    }

    fn next_prio(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        x
    }
}

/// Split into (nodes for which `left` holds, the rest); `left` must be monotone in the order.
fn split<V>(t: Link<V>, left: &impl Fn(&Interval) -> bool) -> (Link<V>, Link<V>) {
    match t {
        None => (None, None),
        Some(mut n) => {
            if left(&n.ivl) {
                let (l, r) = split(n.right.take(), left);
                n.right = l;
                n.update();
                (Some(n), r)
            } else {
                let (l, r) = split(n.left.take(), left);
                n.left = r;
                n.update();
                (l, Some(n))
            }
        }
    }
}

/// Join two treaps where every interval of `a` orders before every interval of `b`.
fn merge<V>(a: Link<V>, b: Link<V>) -> Link<V> {
    match (a, b) {
        (None, b) => b,
        (a, None) => a,
        (Some(mut a), Some(mut b)) => {
            if a.prio > b.prio {
                a.right = merge(a.right.take(), Some(b));
                a.update();
                Some(a)
            } else {
                b.left = merge(Some(a), b.left.take());
                b.update();
                Some(b)
            }
        }
    }
}

fn stab<'a, V>(t: &'a Link<V>, key: &[u8], f: &mut impl FnMut(&'a V)) {
    let Some(n) = t else { return };
    if !n.max_end.above(key) {
        return;
    }
    stab(&n.left, key, f);
    if n.ivl.start.as_slice() <= key {
        if n.ivl.end.above(key) {
            f(&n.val);
        }
        stab(&n.right, key, f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ivl(start: &str, end: Option<&str>) -> Interval {
        Interval {
            start: start.as_bytes().to_vec(),
            end: end.map_or(End::Unbounded, |e| End::Key(e.as_bytes().to_vec())),
        }
    }

    fn stabbed(t: &IntervalTree<u32>, key: &str) -> Vec<u32> {
        let mut out = Vec::new();
        t.stab(key.as_bytes(), &mut |v| out.push(*v));
        out.sort();
        out
    }

    #[test]
    fn stab_finds_exactly_the_covering_intervals() {
        let mut t = IntervalTree::default();
        t.insert(ivl("a", Some("c")), 1);
        t.insert(ivl("b", Some("d")), 2);
        t.insert(ivl("foo", Some("fop")), 3);
        t.insert(ivl("b", None), 4);
        t.insert(ivl("", Some("b")), 5);
        struct Case {
            key: &'static str,
            want: Vec<u32>,
        }
        let cases = [
            Case {
                key: "",
                want: vec![5],
            },
            Case {
                key: "a",
                want: vec![1, 5],
            },
            Case {
                key: "b",
                want: vec![1, 2, 4],
            },
            Case {
                key: "c",
                want: vec![2, 4],
            },
            Case {
                key: "d",
                want: vec![4],
            },
            Case {
                key: "foo/bar",
                want: vec![3, 4],
            },
            Case {
                key: "fop",
                want: vec![4],
            },
        ];
        for c in cases {
            assert_eq!(stabbed(&t, c.key), c.want, "key {:?}", c.key);
        }
    }

    #[test]
    fn remove_and_lookup() {
        let mut t = IntervalTree::default();
        t.insert(ivl("a", Some("c")), 1);
        t.insert(ivl("a", Some("b")), 2);
        t.insert(ivl("a", None), 3);
        assert_eq!(t.len(), 3);
        *t.get_mut(&ivl("a", Some("b"))).unwrap() = 20;
        assert_eq!(stabbed(&t, "a"), vec![1, 3, 20]);
        assert_eq!(t.remove(&ivl("a", Some("c"))), Some(1));
        assert_eq!(t.remove(&ivl("a", Some("c"))), None);
        assert_eq!(stabbed(&t, "a"), vec![3, 20]);
        assert_eq!(stabbed(&t, "bb"), vec![3]);
        assert_eq!(t.remove(&ivl("a", None)), Some(3));
        assert_eq!(stabbed(&t, "bb"), Vec::<u32>::new());
        assert_eq!(t.len(), 1);
    }

    /// Random intervals against a brute-force scan, with removals in between.
    #[test]
    fn agrees_with_a_linear_scan() {
        let mut rng = 42u64;
        let mut next = move |m: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % m
        };
        let key = |n: u64| vec![b'a' + (n / 26) as u8, b'a' + (n % 26) as u8];
        let mut t = IntervalTree::default();
        let mut all: Vec<(Interval, u32)> = Vec::new();
        for i in 0..600u32 {
            let a = next(200);
            let b = a + 1 + next(60);
            let end = if next(10) == 0 {
                End::Unbounded
            } else {
                End::Key(key(b))
            };
            let iv = Interval { start: key(a), end };
            if t.get_mut(&iv).is_none() {
                t.insert(iv.clone(), i);
                all.push((iv, i));
            }
            if i % 3 == 0 && !all.is_empty() {
                let (gone, v) = all.swap_remove(next(all.len() as u64) as usize);
                assert_eq!(t.remove(&gone), Some(v));
            }
        }
        assert_eq!(t.len(), all.len());
        for k in 0..260 {
            let k = key(k);
            let mut want: Vec<u32> = all
                .iter()
                .filter(|(iv, _)| iv.contains(&k))
                .map(|(_, v)| *v)
                .collect();
            want.sort();
            let mut got = Vec::new();
            t.stab(&k, &mut |v| got.push(*v));
            got.sort();
            assert_eq!(got, want);
        }
    }
}
