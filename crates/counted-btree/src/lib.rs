//! # actcd-counted-btree — an ordered map that counts its live entries per subtree
//!
//! [`CountedMap`] is a B+ tree map (entries only in leaves, separator keys in inner nodes)
//! whose inner nodes keep, for every child, how many entries under it are *live*. Whether an
//! entry is live is the value's own answer ([`Live::is_live`]), so the counts can never
//! disagree with the values: every change to a value goes through [`CountedMap::update`],
//! which asks again afterwards and fixes the counts on the path it walked.
//!
//! That makes "how many live entries lie between two keys" ([`CountedMap::count_live`]) a walk
//! down two root-to-leaf paths, O(B · log n), instead of a visit of every entry in between.
//! actcd's key index keeps every key with history in such a map and counts a key as live when
//! its newest generation is not empty, so etcd's `count_only` Range, and the `count` of every
//! limited Range, cost a few hundred comparisons on a million keys.
//!
//! Why not std's `BTreeMap`: it has no hook to keep a per-subtree sum. Why not a crate with
//! order statistics: the ones looked at count every entry, not the entries a predicate on the
//! value picks, or keep the sum from the keys alone.
//!
//! ## Shape and invariants
//! - Every leaf is at the same depth. A leaf holds at most `B` entries, an inner node at most
//!   `B` children; the root may hold fewer, any other node at least one.
//! - In an inner node, `seps[i]` separates `children[i]` and `children[i + 1]`: every key under
//!   `children[i]` is `< seps[i]`, every key under `children[i + 1]` is `>= seps[i]`. A
//!   separator need not be a key still in the map.
//! - `live[i]` is the number of live entries under `children[i]`, and the map's own total is
//!   their sum at the root.
//! - A node split on insert goes in halves, except after an insert at either end (see
//!   `split_point`); after a removal, a child smaller than `B / 2`
//!   is merged with a neighbour when the two fit in one node (no borrowing: simpler, and the
//!   tree's users remove entries mostly in bulk, through [`CountedMap::retain`]).
//! - Leaves keep keys and values in two vectors, and a node is searched by bisecting down to
//!   8 keys and scanning those: measured against std's `BTreeMap` under the key index's put
//!   (100k keys of 12 bytes), a plain binary search over 64-wide nodes made an overwrite about
//!   2× slower (each probe a dependent cache miss on a key), a plain scan of 32-wide nodes
//!   made too many comparisons. [`CountedMap::upsert`] finds-or-inserts in one walk.
//!
//! Safe Rust only; the tests check the invariants after every operation against std's
//! `BTreeMap` as a model.

use std::borrow::Borrow;
use std::fmt;
use std::ops::Bound;

/// Whether a value counts towards [`CountedMap::count_live`].
pub trait Live {
    fn is_live(&self) -> bool;
}

/// Entries per leaf and children per inner node, unless a map says otherwise.
pub const DEFAULT_B: usize = 32;

/// An ordered map with O(log n) counts of live entries in a key range. See the crate doc.
#[derive(Clone)]
pub struct CountedMap<K, V, const B: usize = DEFAULT_B> {
    root: Node<K, V>,
    len: usize,
    live: usize,
}

#[derive(Clone)]
enum Node<K, V> {
    Leaf(Leaf<K, V>),
    Inner(Box<Inner<K, V>>),
}

/// Keys and values apart, so that a search reads only keys (fewer cache lines).
#[derive(Clone)]
struct Leaf<K, V> {
    keys: Vec<K>,
    vals: Vec<V>,
}

impl<K, V> Leaf<K, V> {
    fn new() -> Self {
        Self {
            keys: Vec::new(),
            vals: Vec::new(),
        }
    }

    fn find<Q: Ord + ?Sized>(&self, key: &Q) -> Result<usize, usize>
    where
        K: Borrow<Q>,
    {
        let i = partition(&self.keys, |k| k.borrow() < key);
        match self.keys.get(i) {
            Some(k) if k.borrow() == key => Ok(i),
            _ => Err(i),
        }
    }
}

#[derive(Clone)]
struct Inner<K, V> {
    seps: Vec<K>,
    children: Vec<Node<K, V>>,
    live: Vec<usize>,
}

impl<K, V> Node<K, V> {
    /// Entries of a leaf, children of an inner node.
    fn width(&self) -> usize {
        match self {
            Node::Leaf(l) => l.keys.len(),
            Node::Inner(n) => n.children.len(),
        }
    }
}

impl<K, V: Live> Node<K, V> {
    fn live(&self) -> usize {
        match self {
            Node::Leaf(l) => l.vals.iter().filter(|v| v.is_live()).count(),
            Node::Inner(n) => n.live.iter().sum(),
        }
    }
}

/// Index of the child whose subtree holds `key` (if anything does): the number of separators
/// `<= key`.
fn child_for<K: Borrow<Q>, Q: Ord + ?Sized>(seps: &[K], key: &Q) -> usize {
    partition(seps, |s| s.borrow() <= key)
}

/// The index of the first item for which `before` is false (items for which it is true come
/// first): bisects down to a few items, then scans them. A scan of a whole node costs too many
/// comparisons; a bisection down to one item costs a dependent cache miss per probe.
fn partition<T>(items: &[T], before: impl Fn(&T) -> bool) -> usize {
    let (mut lo, mut hi) = (0, items.len());
    while hi - lo > 8 {
        let mid = lo + (hi - lo) / 2;
        if before(&items[mid]) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    while lo < hi && before(&items[lo]) {
        lo += 1;
    }
    lo
}

fn add(n: usize, delta: isize) -> usize {
    n.checked_add_signed(delta)
        .expect("live count never goes below zero")
}

fn live_delta(before: bool, after: bool) -> isize {
    isize::from(after) - isize::from(before)
}

impl<K, V, const B: usize> Default for CountedMap<K, V, B> {
    fn default() -> Self {
        Self {
            root: Node::Leaf(Leaf::new()),
            len: 0,
            live: 0,
        }
    }
}

impl<K, V, const B: usize> CountedMap<K, V, B> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Entries, live or not.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Live entries in the whole map.
    pub fn live_len(&self) -> usize {
        self.live
    }

    /// Every entry in key order.
    pub fn iter(&self) -> Iter<'_, K, V> {
        let mut it = Iter {
            stack: Vec::new(),
            keys: &[],
            vals: &[],
            pos: 0,
        };
        it.descend_leftmost(&self.root);
        it
    }

    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.iter().map(|(_, v)| v)
    }
}

impl<K: Ord + Clone, V: Live, const B: usize> CountedMap<K, V, B> {
    pub fn get<Q: Ord + ?Sized>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
    {
        let mut node = &self.root;
        loop {
            match node {
                Node::Inner(n) => node = &n.children[child_for(&n.seps, key)],
                Node::Leaf(l) => {
                    let i = l.find(key).ok()?;
                    return Some(&l.vals[i]);
                }
            }
        }
    }

    pub fn contains_key<Q: Ord + ?Sized>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
    {
        self.get(key).is_some()
    }

    /// Runs `f` on the value of `key`, if present, then counts the value as live or not by
    /// what it says afterwards. The only way to change a value in place.
    pub fn update<Q: Ord + ?Sized, R>(&mut self, key: &Q, f: impl FnOnce(&mut V) -> R) -> Option<R>
    where
        K: Borrow<Q>,
    {
        let (r, delta) = update_in(&mut self.root, key, f)?;
        self.live = add(self.live, delta);
        Some(r)
    }

    /// Runs `f` on the value of `key`, inserting `new()`'s entry first if the key is absent
    /// (`new` must give an entry with that key), in one walk down the tree; the value is then
    /// counted by what it says. Answers `f`'s result and whether an entry was inserted.
    pub fn upsert<Q: Ord + ?Sized, R>(
        &mut self,
        key: &Q,
        new: impl FnOnce() -> (K, V),
        f: impl FnOnce(&mut V) -> R,
    ) -> (R, bool)
    where
        K: Borrow<Q>,
    {
        let (r, inserted, delta, split) = upsert_in::<K, V, Q, R, B>(&mut self.root, key, new, f);
        self.live = add(self.live, delta);
        if inserted {
            self.len += 1;
        }
        if let Some((sep, right)) = split {
            self.grow(sep, right);
        }
        (r, inserted)
    }

    /// A new root over the old one and `right`, split off it at `sep`.
    fn grow(&mut self, sep: K, right: Node<K, V>) {
        let right_live = right.live();
        let left = std::mem::replace(&mut self.root, Node::Leaf(Leaf::new()));
        let left_live = self.live - right_live;
        self.root = Node::Inner(Box::new(Inner {
            seps: vec![sep],
            children: vec![left, right],
            live: vec![left_live, right_live],
        }));
    }

    /// Inserts or replaces; returns the value replaced.
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        let (old, delta, split) = insert_in::<K, V, B>(&mut self.root, key, value);
        self.live = add(self.live, delta);
        if old.is_none() {
            self.len += 1;
        }
        if let Some((sep, right)) = split {
            self.grow(sep, right);
        }
        old
    }

    pub fn remove<Q: Ord + ?Sized>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
    {
        let v = remove_in::<K, V, Q, B>(&mut self.root, key)?;
        self.len -= 1;
        if v.is_live() {
            self.live -= 1;
        }
        self.shrink_root();
        Some(v)
    }

    /// Keeps the entries for which `f` answers true; `f` may change the values it keeps, which
    /// are counted again afterwards. Visits every entry once, in key order.
    pub fn retain(&mut self, mut f: impl FnMut(&K, &mut V) -> bool) {
        let mut removed = 0;
        retain_in::<K, V, B>(&mut self.root, &mut |k, v| {
            let keep = f(k, v);
            removed += usize::from(!keep);
            keep
        });
        self.shrink_root();
        self.live = self.root.live();
        self.len -= removed;
    }

    /// Live entries with a key inside `(start, end)`; 0 for an inverted range.
    pub fn count_live<Q: Ord + ?Sized>(&self, start: Bound<&Q>, end: Bound<&Q>) -> usize
    where
        K: Borrow<Q>,
    {
        let below_end = match end {
            Bound::Unbounded => self.live,
            Bound::Included(k) => self.live_before(k, true),
            Bound::Excluded(k) => self.live_before(k, false),
        };
        let below_start = match start {
            Bound::Unbounded => 0,
            Bound::Included(k) => self.live_before(k, false),
            Bound::Excluded(k) => self.live_before(k, true),
        };
        below_end.saturating_sub(below_start)
    }

    /// Live entries with a key `< key` (`<= key` when `inclusive`): the key's rank among the
    /// live entries.
    pub fn live_before<Q: Ord + ?Sized>(&self, key: &Q, inclusive: bool) -> usize
    where
        K: Borrow<Q>,
    {
        let mut node = &self.root;
        let mut below = 0;
        loop {
            match node {
                Node::Inner(n) => {
                    let c = child_for(&n.seps, key);
                    below += n.live[..c].iter().sum::<usize>();
                    node = &n.children[c];
                }
                Node::Leaf(l) => {
                    let end = l.keys.partition_point(|k| {
                        if inclusive {
                            k.borrow() <= key
                        } else {
                            k.borrow() < key
                        }
                    });
                    return below + l.vals[..end].iter().filter(|v| v.is_live()).count();
                }
            }
        }
    }

    /// Entries from `start` on, in key order.
    pub fn range_from<Q: Ord + ?Sized>(&self, start: Bound<&Q>) -> Iter<'_, K, V>
    where
        K: Borrow<Q>,
    {
        let Some(key) = (match start {
            Bound::Included(k) | Bound::Excluded(k) => Some(k),
            Bound::Unbounded => None,
        }) else {
            return self.iter();
        };
        let mut it = Iter {
            stack: Vec::new(),
            keys: &[],
            vals: &[],
            pos: 0,
        };
        let mut node = &self.root;
        loop {
            match node {
                Node::Inner(n) => {
                    let c = child_for(&n.seps, key);
                    it.stack.push((n, c));
                    node = &n.children[c];
                }
                Node::Leaf(l) => {
                    it.keys = &l.keys;
                    it.vals = &l.vals;
                    it.pos = l.keys.partition_point(|k| match start {
                        Bound::Excluded(_) => k.borrow() <= key,
                        _ => k.borrow() < key,
                    });
                    return it;
                }
            }
        }
    }

    /// Entries inside `(start, end)`, in key order.
    pub fn range<'a, 'b, Q: Ord + ?Sized>(
        &'a self,
        start: Bound<&Q>,
        end: Bound<&'b Q>,
    ) -> Range<'a, 'b, K, V, Q>
    where
        K: Borrow<Q>,
    {
        Range {
            inner: self.range_from(start),
            end,
        }
    }

    /// Drops inner nodes left with one child at the top (and an inner root with none).
    fn shrink_root(&mut self) {
        loop {
            match &mut self.root {
                Node::Inner(n) if n.children.len() <= 1 => {
                    let only = n.children.pop().unwrap_or(Node::Leaf(Leaf::new()));
                    self.root = only;
                }
                _ => return,
            }
        }
    }
}

fn update_in<K: Borrow<Q>, V: Live, Q: Ord + ?Sized, R>(
    node: &mut Node<K, V>,
    key: &Q,
    f: impl FnOnce(&mut V) -> R,
) -> Option<(R, isize)> {
    match node {
        Node::Leaf(l) => {
            let i = l.find(key).ok()?;
            let v = &mut l.vals[i];
            let before = v.is_live();
            let r = f(v);
            Some((r, live_delta(before, v.is_live())))
        }
        Node::Inner(n) => {
            let c = child_for(&n.seps, key);
            let (r, delta) = update_in(&mut n.children[c], key, f)?;
            n.live[c] = add(n.live[c], delta);
            Some((r, delta))
        }
    }
}

/// The value replaced, the change in live entries below `node`, and the right half if `node`
/// split (with the separator between the halves).
type Inserted<K, V> = (Option<V>, isize, Option<(K, Node<K, V>)>);

/// A node's right half and the separator before it, after a split.
type Split<K, V> = Option<(K, Node<K, V>)>;

fn upsert_in<K: Ord + Clone + Borrow<Q>, V: Live, Q: Ord + ?Sized, R, const B: usize>(
    node: &mut Node<K, V>,
    key: &Q,
    new: impl FnOnce() -> (K, V),
    f: impl FnOnce(&mut V) -> R,
) -> (R, bool, isize, Split<K, V>) {
    match node {
        Node::Leaf(l) => match l.find(key) {
            Ok(i) => {
                let v = &mut l.vals[i];
                let before = v.is_live();
                let r = f(v);
                (r, false, live_delta(before, v.is_live()), None)
            }
            Err(i) => {
                let (k, mut v) = new();
                let r = f(&mut v);
                let delta = isize::from(v.is_live());
                l.make_room::<B>();
                l.keys.insert(i, k);
                l.vals.insert(i, v);
                (r, true, delta, l.split_if_over::<B>(i))
            }
        },
        Node::Inner(n) => {
            let c = child_for(&n.seps, key);
            let (r, inserted, delta, split) =
                upsert_in::<K, V, Q, R, B>(&mut n.children[c], key, new, f);
            n.live[c] = add(n.live[c], delta);
            let split = split.and_then(|(sep, right)| n.adopt::<B>(c, sep, right));
            (r, inserted, delta, split)
        }
    }
}

/// Where a node of `len` entries that just took one at `at` splits: in halves, except after
/// an insert at either end, which leaves the other part full. Keys that arrive in order (a
/// populate, sequence numbers) then leave full nodes behind instead of half-empty ones
/// (measured: 16 keys per leaf of 32 otherwise); random inserts keep the classic halves.
fn split_point(len: usize, at: usize) -> usize {
    if at + 1 == len {
        len - 1
    } else if at == 0 {
        1
    } else {
        len / 2
    }
}

/// Grows a full vector by doubling, but never past `cap` (what a node may briefly hold before
/// it splits).
fn room<T>(v: &mut Vec<T>, cap: usize) {
    if v.len() == v.capacity() {
        let want = (v.capacity() * 2).clamp(4, cap.max(v.len() + 1));
        v.reserve_exact(want - v.len());
    }
}

/// After a split: at most half again the entries kept, so a node left small by a split does
/// not hold a full node's room.
fn trim<T>(v: &mut Vec<T>) {
    v.shrink_to(v.len() + v.len() / 2);
}

impl<K, V> Leaf<K, V> {
    fn make_room<const B: usize>(&mut self) {
        room(&mut self.keys, B + 1);
        room(&mut self.vals, B + 1);
    }
}

impl<K: Clone, V> Leaf<K, V> {
    /// Splits a leaf grown past `B` by an insert at `at`: in halves, or, when the insert was
    /// at its end (keys arriving in order), leaving the left one full.
    fn split_if_over<const B: usize>(&mut self, at: usize) -> Split<K, V> {
        if self.keys.len() <= B {
            return None;
        }
        let mid = split_point(self.keys.len(), at);
        let right = Leaf {
            keys: self.keys.split_off(mid),
            vals: self.vals.split_off(mid),
        };
        trim(&mut self.keys);
        trim(&mut self.vals);
        let sep = right.keys[0].clone();
        Some((sep, Node::Leaf(right)))
    }
}

impl<K, V: Live> Inner<K, V> {
    /// Takes in `right`, split off child `c` at `sep`; splits itself if that makes it wider
    /// than `B`.
    fn adopt<const B: usize>(&mut self, c: usize, sep: K, right: Node<K, V>) -> Split<K, V> {
        let right_live = right.live();
        self.live[c] -= right_live;
        room(&mut self.seps, B);
        room(&mut self.children, B + 1);
        room(&mut self.live, B + 1);
        self.seps.insert(c, sep);
        self.children.insert(c + 1, right);
        self.live.insert(c + 1, right_live);
        if self.children.len() <= B {
            return None;
        }
        let mid = split_point(self.children.len(), c + 1);
        let children = self.children.split_off(mid);
        let live = self.live.split_off(mid);
        // seps[mid - 1] sat between the halves: it moves up.
        let mut seps = self.seps.split_off(mid - 1);
        let up = seps.remove(0);
        trim(&mut self.children);
        trim(&mut self.live);
        trim(&mut self.seps);
        let right = Node::Inner(Box::new(Inner {
            seps,
            children,
            live,
        }));
        Some((up, right))
    }
}

fn insert_in<K: Ord + Clone, V: Live, const B: usize>(
    node: &mut Node<K, V>,
    key: K,
    value: V,
) -> Inserted<K, V> {
    match node {
        Node::Leaf(l) => match l.find(&key) {
            Ok(i) => {
                let delta = live_delta(l.vals[i].is_live(), value.is_live());
                let old = std::mem::replace(&mut l.vals[i], value);
                (Some(old), delta, None)
            }
            Err(i) => {
                let delta = isize::from(value.is_live());
                l.make_room::<B>();
                l.keys.insert(i, key);
                l.vals.insert(i, value);
                (None, delta, l.split_if_over::<B>(i))
            }
        },
        Node::Inner(n) => {
            let c = child_for(&n.seps, &key);
            let (old, delta, split) = insert_in::<K, V, B>(&mut n.children[c], key, value);
            n.live[c] = add(n.live[c], delta);
            let split = split.and_then(|(sep, right)| n.adopt::<B>(c, sep, right));
            (old, delta, split)
        }
    }
}

fn remove_in<K: Borrow<Q>, V: Live, Q: Ord + ?Sized, const B: usize>(
    node: &mut Node<K, V>,
    key: &Q,
) -> Option<V> {
    match node {
        Node::Leaf(l) => {
            let i = l.find(key).ok()?;
            l.keys.remove(i);
            Some(l.vals.remove(i))
        }
        Node::Inner(n) => {
            let c = child_for(&n.seps, key);
            let v = remove_in::<K, V, Q, B>(&mut n.children[c], key)?;
            if v.is_live() {
                n.live[c] -= 1;
            }
            if n.children[c].width() == 0 {
                n.drop_child(c);
            } else if n.children[c].width() < B / 2 {
                // Merge with the right neighbour, or the left one for the last child.
                let left = if c + 1 < n.children.len() {
                    c
                } else {
                    c.saturating_sub(1)
                };
                if left + 1 < n.children.len()
                    && n.children[left].width() + n.children[left + 1].width() <= B
                {
                    n.merge_children(left);
                }
            }
            Some(v)
        }
    }
}

fn retain_in<K, V: Live, const B: usize>(
    node: &mut Node<K, V>,
    f: &mut impl FnMut(&K, &mut V) -> bool,
) {
    match node {
        Node::Leaf(l) => {
            let mut kept = 0;
            for i in 0..l.keys.len() {
                if f(&l.keys[i], &mut l.vals[i]) {
                    l.keys.swap(kept, i);
                    l.vals.swap(kept, i);
                    kept += 1;
                }
            }
            l.keys.truncate(kept);
            l.vals.truncate(kept);
        }
        Node::Inner(n) => {
            for (child, live) in n.children.iter_mut().zip(n.live.iter_mut()) {
                retain_in::<K, V, B>(child, f);
                *live = child.live();
            }
            let mut i = 0;
            while i < n.children.len() {
                if n.children[i].width() == 0 {
                    n.drop_child(i);
                } else {
                    i += 1;
                }
            }
            let mut i = 0;
            while i + 1 < n.children.len() {
                if n.children[i].width() + n.children[i + 1].width() <= B {
                    n.merge_children(i);
                } else {
                    i += 1;
                }
            }
        }
    }
}

impl<K, V> Inner<K, V> {
    /// Removes child `c` (empty) and a separator next to it.
    fn drop_child(&mut self, c: usize) {
        self.children.remove(c);
        self.live.remove(c);
        if !self.seps.is_empty() {
            self.seps.remove(c.saturating_sub(1));
        }
    }

    /// Moves everything of child `i + 1` into child `i`.
    fn merge_children(&mut self, i: usize) {
        let right = self.children.remove(i + 1);
        let right_live = self.live.remove(i + 1);
        let sep = self.seps.remove(i);
        self.live[i] += right_live;
        match (&mut self.children[i], right) {
            (Node::Leaf(l), Node::Leaf(mut r)) => {
                l.keys.reserve_exact(r.keys.len());
                l.vals.reserve_exact(r.vals.len());
                l.keys.append(&mut r.keys);
                l.vals.append(&mut r.vals);
            }
            (Node::Inner(l), Node::Inner(r)) => {
                let r = *r;
                l.seps.push(sep);
                l.seps.extend(r.seps);
                l.children.extend(r.children);
                l.live.extend(r.live);
            }
            _ => unreachable!("siblings are at the same depth"),
        }
    }
}

/// Entries in key order (see [`CountedMap::iter`], [`CountedMap::range_from`]).
pub struct Iter<'a, K, V> {
    /// Inner nodes on the path to `leaf`, each with the index of the child taken.
    stack: Vec<(&'a Inner<K, V>, usize)>,
    keys: &'a [K],
    vals: &'a [V],
    pos: usize,
}

impl<'a, K, V> Iter<'a, K, V> {
    fn descend_leftmost(&mut self, mut node: &'a Node<K, V>) {
        loop {
            match node {
                Node::Inner(n) => {
                    self.stack.push((n, 0));
                    node = &n.children[0];
                }
                Node::Leaf(l) => {
                    self.keys = &l.keys;
                    self.vals = &l.vals;
                    self.pos = 0;
                    return;
                }
            }
        }
    }
}

impl<'a, K, V> Iterator for Iter<'a, K, V> {
    type Item = (&'a K, &'a V);

    fn next(&mut self) -> Option<Self::Item> {
        while self.pos >= self.keys.len() {
            let (n, c) = self.stack.pop()?;
            if c + 1 < n.children.len() {
                self.stack.push((n, c + 1));
                self.descend_leftmost(&n.children[c + 1]);
            }
        }
        let i = self.pos;
        self.pos += 1;
        Some((&self.keys[i], &self.vals[i]))
    }
}

/// Entries up to a bound (see [`CountedMap::range`]).
pub struct Range<'a, 'b, K, V, Q: ?Sized> {
    inner: Iter<'a, K, V>,
    end: Bound<&'b Q>,
}

impl<'a, K: Borrow<Q>, V, Q: Ord + ?Sized> Iterator for Range<'a, '_, K, V, Q> {
    type Item = (&'a K, &'a V);

    fn next(&mut self) -> Option<Self::Item> {
        let (k, v) = self.inner.next()?;
        let inside = match self.end {
            Bound::Unbounded => true,
            Bound::Included(e) => k.borrow() <= e,
            Bound::Excluded(e) => k.borrow() < e,
        };
        if inside {
            Some((k, v))
        } else {
            // Nothing after it is inside either.
            self.inner.stack.clear();
            self.inner.keys = &[];
            None
        }
    }
}

impl<K: fmt::Debug, V: fmt::Debug, const B: usize> fmt::Debug for CountedMap<K, V, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<K: PartialEq, V: PartialEq, const B: usize> PartialEq for CountedMap<K, V, B> {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl<K: Eq, V: Eq, const B: usize> Eq for CountedMap<K, V, B> {}

impl<K: Ord + Clone, V: Live, const B: usize> FromIterator<(K, V)> for CountedMap<K, V, B> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut map = Self::new();
        for (k, v) in iter {
            map.insert(k, v);
        }
        map
    }
}

#[cfg(test)]
mod tests;
