//! The in-memory key index: for every key, the revisions at which it was written, grouped in
//! generations; and the ordered map of all keys ([`TreeIndex`]).
//!
//! The index never holds values: a revision found here is the key of a record in the backend's
//! `key` table. It does hold, per key, the lease its latest record names, so that a keys-only
//! read of a key not rewritten since its revision needs no record at all. See the crate doc
//! for a walk-through of one key.
//!
//! ## Counting
//! The keys live in a [`CountedMap`], whose inner nodes count the keys below them that are
//! live *now* (their last generation is not empty). The count of a range at the index's
//! newest revision is then two walks down the tree, O(log n). A count at an older revision
//! `at` (a read view trailing the writer) takes that and undoes the liveness flips (creations
//! and tombstones) of the range made after `at`, read from the flip journal: the flips, in
//! revision order, newest last, each with its key. The journal holds at most
//! [`JOURNAL_CAP`] flips and none at or below the last compaction; below its floor (the
//! revision up to which flips may be missing) a count visits every key of the range, as etcd
//! does for every count.

use std::collections::{HashSet, VecDeque};
use std::num::NonZeroI64;
use std::ops::{Bound, RangeBounds};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use actcd_counted_btree::{CountedMap, Live};
use actcd_types::Revision;

/// Most liveness flips the journal keeps: counts up to this many creations and deletions
/// behind the newest revision are answered from the tree. Each costs its key and 40 bytes.
pub const JOURNAL_CAP: usize = 64 * 1024;

/// What the index knows about the version of a key visible at some revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyRev {
    /// The revision of the write that is visible (the record to read).
    pub modified: Revision,
    /// The revision that created the key's current generation.
    pub created: Revision,
    /// Number of writes to the key in its generation up to and including `modified`.
    pub version: i64,
    /// The lease the record at `modified` names (0: none), when the index knows it: only when
    /// that record is the key's latest write. `None` means: read it from the record.
    pub lease: Option<i64>,
}

/// The life of a key from its creation to its deletion: the revisions of its puts, and, for
/// every generation but the last, a final tombstone revision.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Generation {
    created: Revision,
    /// Writes in this generation, counting ones compaction already dropped from `revs`.
    ver: i64,
    revs: Vec<Revision>,
}

impl Generation {
    pub fn created(&self) -> Revision {
        self.created
    }

    /// Writes in this generation (a tombstone counts as one), including compacted ones.
    pub fn version(&self) -> i64 {
        self.ver
    }

    /// Revisions still indexed, oldest first.
    pub fn revisions(&self) -> &[Revision] {
        &self.revs
    }

    pub fn is_empty(&self) -> bool {
        self.revs.is_empty()
    }
}

/// The key was not live when a tombstone for it was requested (the current generation is
/// empty, or the key is unknown).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("mvcc: revision not found")]
pub struct RevisionNotFound;

/// The revisions of one key. Conceptually always a list of generations whose last one is the
/// live one (empty while the key is deleted). Invariant: revisions strictly increase across
/// the whole index, and every generation but the last ends with a tombstone.
///
/// ## Memory
/// Most keys of a big store were written once, or have been compacted down to the one write
/// visible now: a single live generation holding a single revision. Those are stored inline
/// ([`Hist::One`], 32 bytes, no allocation); any other history is a vector of generations
/// ([`Hist::Many`]). The form is canonical (a history that fits `One` is always stored so),
/// which keeps derived equality meaningful. With the tree's keys boxed slices (16 bytes, not
/// a `Vec`'s 24), this took a million Kubernetes-like keys from 171 to 94 heap bytes a key as
/// a restart rebuilds them, and from 213 to 101 as a load of puts leaves them (the first push
/// into a `Vec` of revisions reserved four): `cargo run --release -p actcd-mvcc --example
/// index_memory`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyIndex {
    hist: Hist,
    /// The lease named by the latest record (0 for none, and after a tombstone).
    lease: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Hist {
    /// One live generation with one revision indexed.
    One(One),
    /// Anything else, oldest generation first; `[]` is the same as one empty generation.
    Many(Vec<Generation>),
}

/// A live generation holding one revision, packed: the subs of its two revisions in 32 bits
/// each (a history whose subs do not fit stays [`Hist::Many`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct One {
    created_main: i64,
    modified_main: i64,
    /// Writes in the generation: at least one (its non-zero niche holds [`Hist`]'s tag).
    ver: NonZeroI64,
    created_sub: u32,
    modified_sub: u32,
}

impl One {
    fn pack(g: &Generation) -> Option<Self> {
        let [modified] = g.revs[..] else {
            return None;
        };
        Some(Self {
            created_main: g.created.main,
            modified_main: modified.main,
            ver: NonZeroI64::new(g.ver)?,
            created_sub: u32::try_from(g.created.sub).ok()?,
            modified_sub: u32::try_from(modified.sub).ok()?,
        })
    }

    fn created(&self) -> Revision {
        Revision::new(self.created_main, i64::from(self.created_sub))
    }

    fn modified(&self) -> Revision {
        Revision::new(self.modified_main, i64::from(self.modified_sub))
    }

    fn generation(&self) -> Generation {
        Generation {
            created: self.created(),
            ver: self.ver.get(),
            revs: vec![self.modified()],
        }
    }
}

impl Default for KeyIndex {
    fn default() -> Self {
        Self::new()
    }
}

impl KeyIndex {
    /// A key index with nothing in it: one empty generation.
    pub fn new() -> Self {
        Self {
            hist: Hist::Many(Vec::new()),
            lease: 0,
        }
    }

    /// A key index rebuilt from the oldest record left for a key after compaction: the record at
    /// `modified` says the generation was created at `created` and this write was its
    /// `version`th.
    pub fn restore(created: Revision, modified: Revision, version: i64) -> Self {
        let mut ki = Self {
            hist: Hist::Many(vec![Generation {
                created,
                ver: version,
                revs: vec![modified],
            }]),
            lease: 0,
        };
        ki.normalize();
        ki
    }

    /// A key index rebuilt from a tombstone that is the oldest record left for a key (its puts
    /// were compacted away, the tombstone kept at the compaction revision): one generation of
    /// the tombstone alone, its creation unknown, then an empty one (etcd's `restoreTombstone`,
    /// #19249).
    pub fn restore_tombstone(rev: Revision) -> Self {
        let mut ki = Self::restore(Revision::default(), rev, 1);
        ki.generations_mut().push(Generation::default());
        ki
    }

    /// [`Self::restore`] of a record that names `lease`.
    pub fn restore_leased(created: Revision, modified: Revision, version: i64, lease: i64) -> Self {
        Self {
            lease,
            ..Self::restore(created, modified, version)
        }
    }

    /// The last revision written (put or tombstone): the live generation's last put, else the
    /// tombstone that ended the generation before it. Derived, not stored (16 bytes a key).
    pub fn modified(&self) -> Revision {
        match &self.hist {
            Hist::One(o) => o.modified(),
            Hist::Many(gs) => gs
                .iter()
                .rev()
                .find_map(|g| g.revs.last().copied())
                .unwrap_or_default(),
        }
    }

    /// The lease the latest record names: 0 for none, and while the key is deleted.
    pub fn lease(&self) -> i64 {
        self.lease
    }

    /// Oldest first; the last one is the live generation (a copy: most keys do not store
    /// theirs as a list).
    pub fn generations(&self) -> Vec<Generation> {
        match &self.hist {
            Hist::One(o) => vec![o.generation()],
            Hist::Many(gs) if gs.is_empty() => vec![Generation::default()],
            Hist::Many(gs) => gs.clone(),
        }
    }

    /// Nothing indexed: a single empty generation. The tree drops such key indexes.
    pub fn is_empty(&self) -> bool {
        match &self.hist {
            Hist::One(_) => false,
            Hist::Many(gs) => gs.iter().all(Generation::is_empty) && gs.len() <= 1,
        }
    }

    /// The create revision and version of the live generation (zeros while deleted).
    pub fn live(&self) -> (Revision, i64) {
        match &self.hist {
            Hist::One(o) => (o.created(), o.ver.get()),
            Hist::Many(gs) => gs
                .last()
                .map_or_else(Default::default, |g| (g.created, g.ver)),
        }
    }

    /// Records a put at `rev` with no lease (see [`Self::put_leased`]).
    pub fn put(&mut self, rev: Revision) {
        self.put_leased(rev, 0);
    }

    /// Records a put at `rev`, which must be above every revision already here, whose record
    /// names `lease`.
    pub fn put_leased(&mut self, rev: Revision, lease: i64) {
        debug_assert!(
            rev > self.modified(),
            "put {rev:?} at or below {:?}",
            self.modified()
        );
        let g = self.live_generation_mut();
        if g.revs.is_empty() {
            g.created = rev;
        }
        g.revs.push(rev);
        g.ver += 1;
        self.lease = lease;
        self.normalize();
    }

    /// Records a delete at `rev`: the tombstone ends the live generation and an empty one starts.
    pub fn tombstone(&mut self, rev: Revision) -> Result<(), RevisionNotFound> {
        if !self.is_live() {
            return Err(RevisionNotFound);
        }
        self.put(rev);
        self.generations_mut().push(Generation::default());
        Ok(())
    }

    /// The write visible at main revision `at_rev`: `None` if the key did not exist then (not yet
    /// created, deleted, or compacted away).
    #[inline]
    pub fn get(&self, at_rev: i64) -> Option<KeyRev> {
        let gs = match &self.hist {
            Hist::One(o) => {
                return (o.modified_main <= at_rev).then(|| KeyRev {
                    modified: o.modified(),
                    created: o.created(),
                    version: o.ver.get(),
                    lease: Some(self.lease),
                });
            }
            Hist::Many(gs) => gs,
        };
        let g = find_generation(gs, at_rev)?;
        let n = g.revs.iter().rposition(|r| r.main <= at_rev)?;
        let newer = (g.revs.len() - 1 - n) as i64;
        // The key's latest write: the last put of the live generation (a visible write is
        // never a tombstone).
        let latest = newer == 0 && std::ptr::eq(g, gs.last()?);
        Some(KeyRev {
            modified: g.revs[n],
            created: g.created,
            version: g.ver - newer,
            lease: latest.then_some(self.lease),
        })
    }

    /// Drops every revision that no read or watch at or above `at_rev` can see, adding the
    /// revisions still needed to `keep`: in the first generation whose tombstone is ≥ `at_rev`
    /// (or the live one) the greatest revision ≤ `at_rev` stays, older ones go, and so do the
    /// generations before it. A tombstone exactly at `at_rev` stays, alone in its generation,
    /// so that a watch from `at_rev` still gets the DELETE (etcd 3.5.16's #18474); a later
    /// compaction drops it. The key index may end up empty (see [`Self::is_empty`]).
    pub fn compact(&mut self, at_rev: i64, keep: &mut HashSet<Revision>) {
        let Hist::Many(gs) = &mut self.hist else {
            // One live revision: nothing to drop, and it stays if it is visible at `at_rev`.
            return self.keep(at_rev, keep);
        };
        let Some(last) = gs.len().checked_sub(1) else {
            return;
        };
        // The first generation not deleted before `at_rev` (or the live one): etcd's
        // `doCompact`, `tomb >= atRev`. A generation deleted at `at_rev` and re-created at the
        // same revision (a txn's delete and put) is superseded all the same: the put is the
        // write to keep.
        let mut first = 0;
        while first < last {
            let ended_before = gs[first].revs.last().is_none_or(|t| {
                t.main < at_rev
                    || (t.main == at_rev
                        && gs[first + 1].revs.first().is_some_and(|r| r.main <= at_rev))
            });
            if !ended_before {
                break;
            }
            first += 1;
        }
        let g = &mut gs[first];
        if let Some(n) = g.revs.iter().rposition(|r| r.main <= at_rev) {
            keep.insert(g.revs[n]);
            g.revs.drain(..n);
        }
        gs.drain(..first);
        self.normalize();
    }

    /// The revisions a compaction at `at_rev` would keep, without compacting (etcd's `keep`,
    /// which HashKV uses): the greatest revision ≤ `at_rev` of the first generation alive at
    /// `at_rev`, unless it is that generation's tombstone. Unlike [`Self::compact`] it leaves
    /// out a tombstone at `at_rev`, as etcd does, so that the hash is the same as that of a
    /// member which dropped it (etcd ≤ 3.5.15, and actcd before).
    pub fn keep(&self, at_rev: i64, keep: &mut HashSet<Revision>) {
        let gs = match &self.hist {
            Hist::One(o) => {
                if o.modified_main <= at_rev {
                    keep.insert(o.modified());
                }
                return;
            }
            Hist::Many(gs) => gs,
        };
        let Some(last) = gs.len().checked_sub(1) else {
            return;
        };
        let first = (0..last)
            .find(|&i| gs[i].revs.last().is_some_and(|t| t.main > at_rev))
            .unwrap_or(last);
        let g = &gs[first];
        if let Some(n) = g.revs.iter().rposition(|r| r.main <= at_rev) {
            let is_tombstone = n == g.revs.len() - 1 && first != last;
            if !is_tombstone {
                keep.insert(g.revs[n]);
            }
        }
    }

    /// The generations as a list to change (a packed history is unpacked first); callers
    /// [`Self::normalize`] when done.
    fn generations_mut(&mut self) -> &mut Vec<Generation> {
        if let Hist::One(o) = self.hist {
            self.hist = Hist::Many(vec![o.generation()]);
        }
        match &mut self.hist {
            Hist::Many(gs) => gs,
            Hist::One(_) => unreachable!("unpacked above"),
        }
    }

    fn live_generation_mut(&mut self) -> &mut Generation {
        let gs = self.generations_mut();
        if gs.is_empty() {
            gs.push(Generation::default());
        }
        let last = gs.len() - 1;
        &mut gs[last]
    }

    /// Puts the history in its canonical form: packed when it fits [`One`], `[]` for nothing.
    fn normalize(&mut self) {
        let Hist::Many(gs) = &mut self.hist else {
            return;
        };
        match &gs[..] {
            [g] if g.is_empty() => *gs = Vec::new(),
            [g] => {
                if let Some(o) = One::pack(g) {
                    self.hist = Hist::One(o);
                }
            }
            _ => {}
        }
    }

    /// Reverses the last [`Self::put`].
    fn undo_put(&mut self, prev_lease: i64) {
        let g = self.live_generation_mut();
        g.revs.pop();
        g.ver -= 1;
        if g.revs.is_empty() {
            *g = Generation::default();
        }
        self.lease = prev_lease;
        self.normalize();
    }

    /// Reverses the last [`Self::tombstone`].
    fn undo_tombstone(&mut self, prev_lease: i64) {
        self.generations_mut().pop();
        self.undo_put(prev_lease);
    }
}

/// The generation holding the write visible at `rev`, if the key existed then.
fn find_generation(gs: &[Generation], rev: i64) -> Option<&Generation> {
    let last = gs.len().checked_sub(1)?;
    for (i, g) in gs.iter().enumerate().rev() {
        let (Some(first), Some(end)) = (g.revs.first(), g.revs.last()) else {
            continue;
        };
        if i != last && end.main <= rev {
            // Deleted at or before `rev`, and not yet re-created (or we'd have matched).
            return None;
        }
        if first.main <= rev {
            return Some(g);
        }
    }
    None
}

/// Live: the last generation is not empty (the key exists at the newest revision).
impl Live for KeyIndex {
    fn is_live(&self) -> bool {
        match &self.hist {
            Hist::One(_) => true,
            Hist::Many(gs) => gs.last().is_some_and(|g| !g.is_empty()),
        }
    }
}

/// Start and end of a key range, as `BTreeMap::range` takes them.
type KeyBounds<'a> = (Bound<&'a [u8]>, Bound<&'a [u8]>);

/// Which keys a request names, from its `key` and `range_end` (etcd's rules).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyRange<'a> {
    /// Empty `range_end`: just `key`.
    Single(&'a [u8]),
    /// `range_end == "\0"`: every key ≥ `key` (with `key == "\0"`: all keys).
    FromKey(&'a [u8]),
    /// `[key, range_end)`; empty when `range_end <= key`.
    Span(&'a [u8], &'a [u8]),
}

impl<'a> KeyRange<'a> {
    pub fn new(key: &'a [u8], range_end: &'a [u8]) -> Self {
        match range_end {
            [] => Self::Single(key),
            [0] => Self::FromKey(key),
            end => Self::Span(key, end),
        }
    }

    /// The range as bounds; `None` when it names nothing.
    pub fn bounds(self) -> Option<KeyBounds<'a>> {
        match self {
            Self::Single(k) => Some((Bound::Included(k), Bound::Included(k))),
            Self::FromKey(k) => Some((Bound::Included(k), Bound::Unbounded)),
            // BTreeMap::range panics on an inverted range; an inverted request names nothing.
            Self::Span(k, end) if end <= k => None,
            Self::Span(k, end) => Some((Bound::Included(k), Bound::Excluded(end))),
        }
    }
}

/// One change made to the index, kept until the write transaction carrying it commits so that
/// a failed request or batch can be taken back out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Undo {
    pub key: Vec<u8>,
    pub rev: Revision,
    pub tombstone: bool,
    /// The lease the key's latest record named before this change.
    pub prev_lease: i64,
}

/// A key became live (created) or stopped being live (tombstoned) at `rev`. The key is
/// `len` bytes of the journal's arena from absolute offset `at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Flip {
    rev: Revision,
    at: usize,
    len: usize,
    live: bool,
}

/// The liveness flips after `floor`, oldest first (see the module doc). Their keys are
/// copied end to end into one arena, so a flip costs no allocation of its own; the arena
/// drops the bytes of forgotten flips once they are half of it.
#[derive(Debug, Clone, Default)]
struct Journal {
    flips: VecDeque<Flip>,
    /// The keys of `flips`, in order; `bytes[0]` is at absolute offset `base`.
    bytes: Vec<u8>,
    base: usize,
    /// Every flip at a main revision above this is in `flips`.
    floor: i64,
}

impl Journal {
    fn new() -> Self {
        Self {
            floor: -1,
            ..Self::default()
        }
    }

    fn key(&self, f: &Flip) -> &[u8] {
        &self.bytes[f.at - self.base..][..f.len]
    }

    fn record(&mut self, rev: Revision, key: &[u8], live: bool) {
        if self.flips.len() == JOURNAL_CAP {
            self.pop_front();
        }
        self.flips.push_back(Flip {
            rev,
            at: self.base + self.bytes.len(),
            len: key.len(),
            live,
        });
        self.bytes.extend_from_slice(key);
    }

    fn pop_front(&mut self) {
        let Some(old) = self.flips.pop_front() else {
            return;
        };
        self.floor = self.floor.max(old.rev.main);
        let dead = self
            .flips
            .front()
            .map_or(self.bytes.len(), |f| f.at - self.base);
        if dead > 4096 && dead * 2 > self.bytes.len() {
            self.bytes.drain(..dead);
            self.base += dead;
        }
    }

    /// Takes back the flip of an undone change, if it made one (it is then the newest).
    fn unrecord(&mut self, rev: Revision, key: &[u8]) {
        if let Some(&f) = self.flips.back()
            && f.rev == rev
            && self.key(&f) == key
        {
            self.flips.pop_back();
            self.bytes.truncate(f.at - self.base);
        }
    }

    /// Forgets flips at or below `rev`.
    fn trim(&mut self, rev: i64) {
        while self.flips.front().is_some_and(|f| f.rev.main <= rev) {
            self.pop_front();
        }
        self.floor = self.floor.max(rev);
    }

    /// The flips after `rev`, newest first, with their keys.
    fn since(&self, rev: i64) -> impl Iterator<Item = (&[u8], bool)> {
        self.flips
            .iter()
            .rev()
            .take_while(move |f| f.rev.main > rev)
            .map(|f| (self.key(f), f.live))
    }
}

/// Every key's [`KeyIndex`], ordered by key, counted by liveness (see the module doc).
#[derive(Debug, Clone)]
pub struct TreeIndex {
    keys: CountedMap<Box<[u8]>, KeyIndex>,
    /// The revision of the last compaction applied to the index (-1 before any): readers that
    /// share the index ([`crate::ReadView`]) refuse revisions below it.
    compacted: i64,
    journal: Journal,
}

impl Default for TreeIndex {
    fn default() -> Self {
        Self {
            keys: CountedMap::new(),
            compacted: -1,
            journal: Journal::new(),
        }
    }
}

/// Two indexes are equal when they index the same: the journal is a cache of the past.
impl PartialEq for TreeIndex {
    fn eq(&self, other: &Self) -> bool {
        self.compacted == other.compacted && self.keys == other.keys
    }
}

impl Eq for TreeIndex {}

impl TreeIndex {
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of keys with anything indexed (live or with history not yet compacted).
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The revision of the last compaction applied (-1 before any).
    pub fn compacted(&self) -> i64 {
        self.compacted
    }

    pub fn key_index(&self, key: &[u8]) -> Option<&KeyIndex> {
        self.keys.get(key)
    }

    /// Every key index, in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &KeyIndex)> {
        self.keys.iter().map(|(k, ki)| (&**k, ki))
    }

    /// Keys live at the newest revision.
    pub fn live_len(&self) -> usize {
        self.keys.live_len()
    }

    /// Every live key whose latest record names a lease, with it, in key order.
    pub fn leased(&self) -> impl Iterator<Item = (&[u8], i64)> {
        self.iter()
            .filter(|(_, ki)| ki.lease != 0 && ki.is_live())
            .map(|(k, ki)| (k, ki.lease))
    }

    /// A put without a lease.
    pub fn put(&mut self, key: &[u8], rev: Revision) {
        self.put_stamped(key, rev, 0);
    }

    /// A put whose record names `lease`.
    pub fn put_leased(&mut self, key: &[u8], rev: Revision, lease: i64) {
        self.put_stamped(key, rev, lease);
    }

    pub fn tombstone(&mut self, key: &[u8], rev: Revision) -> Result<(), RevisionNotFound> {
        self.tombstone_logged(key, rev).map(drop)
    }

    /// Inserts a key index rebuilt from disk (see [`KeyIndex::restore`]). Its history is not
    /// journaled: counts at or below its latest revision visit the keys instead.
    pub fn insert(&mut self, key: Vec<u8>, ki: KeyIndex) {
        self.journal.floor = self.journal.floor.max(ki.modified().main);
        self.keys.insert(key.into_boxed_slice(), ki);
    }

    pub fn get(&self, key: &[u8], at_rev: i64) -> Option<KeyRev> {
        self.keys.get(key)?.get(at_rev)
    }

    /// The keys of `range` that exist at `at_rev`, in key order, with the write visible there:
    /// at most `limit` of them (0: no limit), and how many there are in all (counted, not
    /// visited, past the limit: see [`Self::count`]).
    pub fn revisions(
        &self,
        range: KeyRange<'_>,
        at_rev: i64,
        limit: usize,
    ) -> (Vec<(&[u8], KeyRev)>, usize) {
        let mut out = Vec::new();
        let Some((start, end)) = range.bounds() else {
            return (out, 0);
        };
        for (key, ki) in self.keys.range(start, end) {
            if let Some(kr) = ki.get(at_rev) {
                if limit != 0 && out.len() == limit {
                    return (out, self.count(range, at_rev));
                }
                out.push((&**key, kr));
            }
        }
        let total = out.len();
        (out, total)
    }

    /// Every key of `range` that exists at `at_rev`, with the write visible there.
    pub fn range(&self, range: KeyRange<'_>, at_rev: i64) -> Vec<(&[u8], KeyRev)> {
        self.revisions(range, at_rev, 0).0
    }

    /// How many keys of `range` exist at `at_rev`: from the tree's live counts and the flip
    /// journal, O(log n + flips after `at_rev`); by visiting the range's keys when `at_rev`
    /// is below the journal's floor.
    pub fn count(&self, range: KeyRange<'_>, at_rev: i64) -> usize {
        if let KeyRange::Single(key) = range {
            return usize::from(self.get(key, at_rev).is_some());
        }
        let Some((start, end)) = range.bounds() else {
            return 0;
        };
        if at_rev < self.journal.floor {
            return self.count_visiting(range, at_rev);
        }
        let mut count = self.keys.count_live(start, end);
        let inside = |k: &[u8]| RangeBounds::<[u8]>::contains(&(start, end), k);
        for (key, live) in self.journal.since(at_rev) {
            if inside(key) {
                // Undo the flip: a key created after `at_rev` did not exist then, one deleted
                // after it did.
                count = if live {
                    count.saturating_sub(1)
                } else {
                    count + 1
                };
            }
        }
        count
    }

    /// [`Self::count`] by visiting every key of `range` (etcd's way, and the fallback).
    fn count_visiting(&self, range: KeyRange<'_>, at_rev: i64) -> usize {
        let mut total = 0;
        self.visit(range, |_, ki| {
            total += usize::from(ki.get(at_rev).is_some())
        });
        total
    }

    /// Compacts every key index at `at_rev`, dropping the ones left empty. Returns the revisions
    /// at or below `at_rev` that must stay in the backend; every other record at or below it can
    /// be deleted.
    /// What [`Self::compact`] at `at_rev` would keep, leaving the index as it is.
    pub fn keep(&self, at_rev: i64) -> HashSet<Revision> {
        let mut keep = HashSet::new();
        for ki in self.keys.values() {
            ki.keep(at_rev, &mut keep);
        }
        keep
    }

    pub fn compact(&mut self, at_rev: i64) -> HashSet<Revision> {
        self.start_compaction(at_rev);
        let mut keep = HashSet::new();
        self.keys.retain(|_, ki| {
            ki.compact(at_rev, &mut keep);
            !ki.is_empty()
        });
        keep
    }

    /// The part of [`Self::compact`] that is not per key: the compaction mark and the count
    /// journal. [`Self::compact_slice`] then compacts the keys a slice at a time.
    pub fn start_compaction(&mut self, at_rev: i64) {
        self.compacted = self.compacted.max(at_rev);
        // Nothing counts below the compaction any more.
        self.journal.trim(at_rev);
    }

    /// Compacts at `at_rev` at most `budget` key indexes from `from` on (inclusive), dropping
    /// the ones left empty and adding what they keep to `keep`; answers the key to resume from,
    /// `None` past the last key. Reads at or above `at_rev` see the same whether a key is
    /// compacted yet or not, and later writes only add revisions above it, so a compaction may
    /// run in slices between batches (after [`Self::start_compaction`]).
    pub fn compact_slice(
        &mut self,
        at_rev: i64,
        from: &[u8],
        budget: usize,
        keep: &mut HashSet<Revision>,
    ) -> Option<Vec<u8>> {
        let mut keys: Vec<Vec<u8>> = self
            .keys
            .range(Bound::Included(from), Bound::Unbounded)
            .take(budget.max(1) + 1)
            .map(|(k, _)| k.to_vec())
            .collect();
        let next = (keys.len() > budget.max(1)).then(|| keys.pop()).flatten();
        for key in keys {
            let emptied = self.keys.update(key.as_slice(), |ki| {
                ki.compact(at_rev, keep);
                ki.is_empty()
            });
            if emptied == Some(true) {
                self.keys.remove(key.as_slice());
            }
        }
        next
    }

    fn visit<'s>(&'s self, range: KeyRange<'_>, mut f: impl FnMut(&'s [u8], &'s KeyIndex)) {
        let Some((start, end)) = range.bounds() else {
            return;
        };
        for (key, ki) in self.keys.range(start, end) {
            f(key, ki);
        }
    }

    #[cfg(test)]
    pub(crate) fn put_logged(&mut self, key: &[u8], rev: Revision) -> Undo {
        self.put_stamped(key, rev, 0).0
    }

    /// A put whose record names `lease`, logged for undo, in one lookup; also answers the
    /// record's create revision and version (those of the live generation after the put).
    pub(crate) fn put_stamped(
        &mut self,
        key: &[u8],
        rev: Revision,
        lease: i64,
    ) -> (Undo, Revision, i64) {
        // One walk down the tree, inserting the key if it is new.
        let ((was_live, prev_lease, created, version), _) = self.keys.upsert(
            key,
            || (Box::from(key), KeyIndex::new()),
            |ki| {
                let (was_live, prev_lease) = (ki.is_live(), ki.lease);
                ki.put_leased(rev, lease);
                let (created, version) = ki.live();
                (was_live, prev_lease, created, version)
            },
        );
        if !was_live {
            self.journal.record(rev, key, true);
        }
        let undo = Undo {
            key: key.to_vec(),
            rev,
            tombstone: false,
            prev_lease,
        };
        (undo, created, version)
    }

    pub(crate) fn tombstone_logged(
        &mut self,
        key: &[u8],
        rev: Revision,
    ) -> Result<Undo, RevisionNotFound> {
        let prev_lease = self
            .keys
            .update(key, |ki| {
                let prev_lease = ki.lease;
                ki.tombstone(rev).map(|()| prev_lease)
            })
            .ok_or(RevisionNotFound)??;
        self.journal.record(rev, key, false);
        Ok(Undo {
            key: key.to_vec(),
            rev,
            tombstone: true,
            prev_lease,
        })
    }

    /// Takes back one change; changes must be undone newest first.
    pub(crate) fn undo(&mut self, u: &Undo) {
        let emptied = self.keys.update(&u.key[..], |ki| {
            if u.tombstone {
                ki.undo_tombstone(u.prev_lease);
            } else {
                ki.undo_put(u.prev_lease);
            }
            ki.is_empty()
        });
        if emptied == Some(true) {
            self.keys.remove(&u.key[..]);
        }
        self.journal.unrecord(u.rev, &u.key);
    }

    /// The keys of `range` that exist at `at_rev`, in key order, with the write visible there,
    /// one at a time: a reader takes as many as it needs (a RangeStream chunk) and no more, with
    /// no total count.
    pub fn visible<'s>(
        &'s self,
        range: KeyRange<'s>,
        at_rev: i64,
    ) -> impl Iterator<Item = (&'s [u8], KeyRev)> {
        let walk = range
            .bounds()
            .map(|(start, end)| self.keys.range(start, end));
        walk.into_iter()
            .flatten()
            .filter_map(move |(k, ki)| Some((&**k, ki.get(at_rev)?)))
    }
}

/// The key index shared by the store, its only writer, and the read views it publishes
/// ([`crate::ReadView`]), which read it under a read lock at the revision they were published
/// at: what the store writes after that revision (index entries of later revisions) is
/// invisible at it, and what it removes (compaction, [`TreeIndex::compacted`]) is checked.
/// The store takes the write lock once per batch.
#[derive(Debug, Clone, Default)]
pub(crate) struct SharedIndex(Arc<RwLock<TreeIndex>>);

impl SharedIndex {
    pub fn new(index: TreeIndex) -> Self {
        Self(Arc::new(RwLock::new(index)))
    }

    /// A panic while the lock was held leaves the member stopping anyway: read on.
    pub fn read(&self) -> RwLockReadGuard<'_, TreeIndex> {
        self.0.read().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn write(&self) -> RwLockWriteGuard<'_, TreeIndex> {
        self.0.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the writer could take its lock now (tests: is a reader holding it?).
    #[cfg(test)]
    pub fn writable_now(&self) -> bool {
        self.0.try_write().is_ok()
    }
}

#[cfg(test)]
#[path = "key_index_tests.rs"]
mod tests;
