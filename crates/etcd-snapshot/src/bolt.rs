//! etcd's backend file format (bbolt 1.3), written and read without bbolt.
//!
//! etcd's `Snapshot` RPC streams its bbolt file, and `etcdutl snapshot status|restore` open
//! such files; so a snapshot that etcd's tools accept, and an actcd that restores etcd's
//! snapshots, need this format, not LMDB's. Only what etcd's backend uses is supported: named
//! top-level buckets of key/value pairs, no nested buckets.
//!
//! ## The format, as far as it matters here
//! A file is an array of pages of `page_size` bytes (4096 here). Every page starts with a
//! 16-byte header: page id (u64), flags (u16: branch 0x01, leaf 0x02, meta 0x04, freelist
//! 0x10), element count (u16), overflow (u32: how many further pages this one spans). All
//! integers are little-endian.
//! - Pages 0 and 1 are meta pages: magic `0xED0CDAED`, version 2, page size, flags, the root
//!   bucket (root page id, sequence), the freelist page id, the high-water page id, the
//!   transaction id, and an FNV-64a checksum of the 56 bytes before it. A reader uses the valid
//!   meta with the higher transaction id.
//! - A leaf element is `flags u32, pos u32, ksize u32, vsize u32`, `pos` counting from the
//!   element itself to its key, the value following the key. A branch element is
//!   `pos u32, ksize u32, child page id u64`, its key the first key under the child.
//! - The root bucket's leaf elements carry flag 0x01 and a 16-byte bucket header (root page id,
//!   sequence) as value; a root id of 0 means the bucket's page is inline, right after the
//!   header in the value.
//!
//! [`Writer`] lays buckets out bottom-up, densely, with an empty freelist: every page below
//! the high-water mark is reachable exactly once, which is what `bbolt check` (run by
//! `etcdutl snapshot status`) demands. [`read`] accepts anything bbolt writes (inline
//! buckets, branch pages, overflow pages, any page size) and checks every offset, so a damaged
//! file is an error, never a panic.

use std::collections::HashSet;

use crate::EtcdSnapshotError;

const MAGIC: u32 = 0xED0C_DAED;
const VERSION: u32 = 2;
/// The page size written; bbolt uses the OS page size, 4096 on the machines etcd runs on.
pub const PAGE_SIZE: usize = 4096;
const HEADER: usize = 16;
const ELEMENT: usize = 16;
const BRANCH: u16 = 0x01;
const LEAF: u16 = 0x02;
const META: u16 = 0x04;
const FREELIST: u16 = 0x10;
const BUCKET_LEAF: u32 = 0x01;
/// Deeper than any real tree (bbolt keeps pages at least half full); stops page cycles.
const MAX_DEPTH: usize = 64;

/// A key and its value, borrowed (tests).
#[cfg(test)]
type Pair<'a> = (&'a [u8], &'a [u8]);

/// One bucket: its name and its pairs in key order.
pub type Bucket = (Vec<u8>, Vec<(Vec<u8>, Vec<u8>)>);

/// A database read from a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoltDb {
    pub page_size: usize,
    /// Pages in use (the meta's high-water mark): `page_size * high_water` is what bbolt
    /// reports as the database's size.
    pub high_water: u64,
    /// Buckets in name order, each with its pairs in key order.
    pub buckets: Vec<Bucket>,
}

impl BoltDb {
    /// The size bbolt reports for the database (`tx.Size()`).
    pub fn size(&self) -> u64 {
        self.high_water.saturating_mul(self.page_size as u64)
    }
}

fn bad(what: impl Into<String>) -> EtcdSnapshotError {
    EtcdSnapshotError::Bolt(what.into())
}

fn fnv64a(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in data {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

// ---- writing --------------------------------------------------------------------------------

/// One thing a [`Source`] hands the writer: a bucket (then its pairs), or a pair of the
/// bucket last announced.
pub enum Item<'a> {
    Bucket(&'a [u8]),
    Pair(&'a [u8], &'a [u8]),
}

/// A database to write, replayed in bbolt's order as often as the writer asks: once to plan the
/// pages, once to write them. Both replays must hand over the same items.
pub trait Source {
    /// Calls `f` with every bucket (names in order, each once, empty ones too), each followed
    /// by its pairs (keys in order, each once, not empty).
    fn visit(
        &mut self,
        f: &mut dyn FnMut(Item<'_>) -> Result<(), EtcdSnapshotError>,
    ) -> Result<(), EtcdSnapshotError>;
}

/// Pages needed by a page body of `len` bytes (header included), at least one.
fn span_of(body_len: usize) -> u64 {
    (HEADER + body_len).div_ceil(PAGE_SIZE).max(1) as u64
}

/// One planned page: its element count, the pages it spans, and its first key.
#[derive(Debug)]
struct Planned {
    count: usize,
    span: u64,
    first: Vec<u8>,
}

/// Cuts a sequence of elements into pages: each takes elements while they fit (at least one;
/// an element too big for a page gets one with overflow to itself).
#[derive(Default)]
struct Packer {
    pages: Vec<Planned>,
    size: usize,
    count: usize,
    first: Vec<u8>,
}

impl Packer {
    fn add(&mut self, key: &[u8], data_len: usize) {
        let add = ELEMENT + data_len;
        if self.count > 0 && HEADER + self.size + add > PAGE_SIZE {
            self.close();
        }
        if self.count == 0 {
            self.first = key.to_vec();
        }
        self.size += add;
        self.count += 1;
    }

    fn close(&mut self) {
        self.pages.push(Planned {
            count: self.count,
            span: span_of(self.size),
            first: std::mem::take(&mut self.first),
        });
        self.size = 0;
        self.count = 0;
    }

    /// The pages, an empty one if nothing was added.
    fn finish(mut self) -> Vec<Planned> {
        if self.count > 0 || self.pages.is_empty() {
            self.close();
        }
        self.pages
    }
}

/// One tree: its leaf pages and each branch level above them, the root level last; its pages
/// are numbered from `first_id` in that order.
#[derive(Debug)]
struct Tree {
    levels: Vec<Vec<Planned>>,
    first_id: u64,
}

impl Tree {
    fn over(leaves: Vec<Planned>) -> Tree {
        let mut levels = vec![leaves];
        while let Some(level) = levels.last().filter(|l| l.len() > 1) {
            let mut packer = Packer::default();
            for page in level {
                packer.add(&page.first, page.first.len());
            }
            let next = packer.finish();
            levels.push(next);
        }
        Tree {
            levels,
            first_id: 0,
        }
    }

    fn pages(&self) -> u64 {
        self.levels.iter().flatten().map(|p| p.span).sum()
    }

    /// The ids of the pages of level `l`, in order.
    fn ids(&self, l: usize) -> Vec<u64> {
        let mut next = self.first_id
            + self.levels[..l]
                .iter()
                .flatten()
                .map(|p| p.span)
                .sum::<u64>();
        self.levels[l]
            .iter()
            .map(|p| {
                let id = next;
                next += p.span;
                id
            })
            .collect()
    }

    fn root(&self) -> u64 {
        self.ids(self.levels.len() - 1)[0]
    }
}

/// The bytes of one page: header, element headers, then keys and values, padded to its span.
fn page(id: u64, flags: u16, elements: &[(u32, &[u8], &[u8])]) -> Vec<u8> {
    let n = elements.len();
    // A branch element's child id sits in the element itself; only its key is data.
    let data: usize = elements
        .iter()
        .map(|(_, k, v)| k.len() + if flags == BRANCH { 0 } else { v.len() })
        .sum();
    let body_len = n * ELEMENT + data;
    let span = span_of(body_len);
    let mut p = vec![0u8; span as usize * PAGE_SIZE];
    p[0..8].copy_from_slice(&id.to_le_bytes());
    p[8..10].copy_from_slice(&flags.to_le_bytes());
    p[10..12].copy_from_slice(&(n as u16).to_le_bytes());
    p[12..16].copy_from_slice(&((span - 1) as u32).to_le_bytes());
    let mut at_data = HEADER + n * ELEMENT;
    for (i, (eflags, key, value)) in elements.iter().enumerate() {
        let at = HEADER + i * ELEMENT;
        let pos = (at_data - at) as u32;
        if flags == BRANCH {
            // Branch element: pos, key size, child page id (carried in `value`).
            p[at..at + 4].copy_from_slice(&pos.to_le_bytes());
            p[at + 4..at + 8].copy_from_slice(&(key.len() as u32).to_le_bytes());
            p[at + 8..at + 16].copy_from_slice(value);
            p[at_data..at_data + key.len()].copy_from_slice(key);
            at_data += key.len();
        } else {
            p[at..at + 4].copy_from_slice(&eflags.to_le_bytes());
            p[at + 4..at + 8].copy_from_slice(&pos.to_le_bytes());
            p[at + 8..at + 12].copy_from_slice(&(key.len() as u32).to_le_bytes());
            p[at + 12..at + 16].copy_from_slice(&(value.len() as u32).to_le_bytes());
            p[at_data..at_data + key.len()].copy_from_slice(key);
            p[at_data + key.len()..at_data + key.len() + value.len()].copy_from_slice(value);
            at_data += key.len() + value.len();
        }
    }
    p
}

/// The branch pages of every level above the leaves of `tree`.
fn branch_pages(
    tree: &Tree,
    sink: &mut dyn FnMut(&[u8]) -> Result<(), EtcdSnapshotError>,
) -> Result<(), EtcdSnapshotError> {
    for l in 1..tree.levels.len() {
        let children = &tree.levels[l - 1];
        let child_ids = tree.ids(l - 1);
        let mut next_child = 0;
        for (page_at, id) in tree.levels[l].iter().zip(tree.ids(l)) {
            let ids: Vec<[u8; 8]> = child_ids[next_child..next_child + page_at.count]
                .iter()
                .map(|c| c.to_le_bytes())
                .collect();
            let elements: Vec<(u32, &[u8], &[u8])> = children
                [next_child..next_child + page_at.count]
                .iter()
                .zip(&ids)
                .map(|(c, cid)| (0, c.first.as_slice(), cid.as_slice()))
                .collect();
            let bytes = page(id, BRANCH, &elements);
            if bytes.len() as u64 != page_at.span * PAGE_SIZE as u64 {
                return Err(bad("a branch page does not fit its plan"));
            }
            sink(&bytes)?;
            next_child += page_at.count;
        }
    }
    Ok(())
}

fn changed() -> EtcdSnapshotError {
    bad("the database changed between the writer's two passes")
}

/// A bbolt file laid out for a [`Source`]: plan it, learn its size, then write it.
#[derive(Debug)]
pub struct Writer {
    names: Vec<Vec<u8>>,
    trees: Vec<Tree>,
    root: Tree,
    high_water: u64,
}

impl Writer {
    /// Reads `source` once and lays out every page.
    pub fn plan(source: &mut dyn Source) -> Result<Writer, EtcdSnapshotError> {
        let mut names: Vec<Vec<u8>> = Vec::new();
        let mut leaves: Vec<Vec<Planned>> = Vec::new();
        let mut packer: Option<Packer> = None;
        let mut last_key: Option<Vec<u8>> = None;
        source.visit(&mut |item| {
            match item {
                Item::Bucket(name) => {
                    if name.is_empty() || names.last().is_some_and(|l| l.as_slice() >= name) {
                        return Err(bad(
                            "bucket names must be given once each, in order, not empty",
                        ));
                    }
                    if let Some(p) = packer.take() {
                        leaves.push(p.finish());
                    }
                    names.push(name.to_vec());
                    packer = Some(Packer::default());
                    last_key = None;
                }
                Item::Pair(key, value) => {
                    let p = packer
                        .as_mut()
                        .ok_or_else(|| bad("a pair before any bucket"))?;
                    if key.is_empty() || last_key.as_deref().is_some_and(|l| l >= key) {
                        return Err(bad("keys must be given once each, in order, not empty"));
                    }
                    p.add(key, key.len() + value.len());
                    last_key = Some(key.to_vec());
                }
            }
            Ok(())
        })?;
        if let Some(p) = packer.take() {
            leaves.push(p.finish());
        }
        let mut next = 3;
        let mut trees = Vec::with_capacity(leaves.len());
        for l in leaves {
            let mut t = Tree::over(l);
            t.first_id = next;
            next += t.pages();
            trees.push(t);
        }
        let mut packer = Packer::default();
        for name in &names {
            packer.add(name, name.len() + 16);
        }
        let mut root = Tree::over(packer.finish());
        root.first_id = next;
        next += root.pages();
        Ok(Writer {
            names,
            trees,
            root,
            high_water: next,
        })
    }

    /// The file's size in bytes.
    pub fn size(&self) -> u64 {
        self.high_water * PAGE_SIZE as u64
    }

    /// Reads `source` again and hands `sink` every page, in file order.
    pub fn write(
        &self,
        source: &mut dyn Source,
        sink: &mut dyn FnMut(&[u8]) -> Result<(), EtcdSnapshotError>,
    ) -> Result<(), EtcdSnapshotError> {
        let root = self.root.root();
        for (page_id, txid) in [(0u64, 0u64), (1, 1)] {
            let mut p = vec![0u8; PAGE_SIZE];
            p[0..8].copy_from_slice(&page_id.to_le_bytes());
            p[8..10].copy_from_slice(&META.to_le_bytes());
            let m = &mut p[HEADER..HEADER + 64];
            m[0..4].copy_from_slice(&MAGIC.to_le_bytes());
            m[4..8].copy_from_slice(&VERSION.to_le_bytes());
            m[8..12].copy_from_slice(&(PAGE_SIZE as u32).to_le_bytes());
            m[16..24].copy_from_slice(&root.to_le_bytes());
            m[32..40].copy_from_slice(&2u64.to_le_bytes());
            m[40..48].copy_from_slice(&self.high_water.to_le_bytes());
            m[48..56].copy_from_slice(&txid.to_le_bytes());
            let sum = fnv64a(&m[..56]);
            m[56..64].copy_from_slice(&sum.to_le_bytes());
            sink(&p)?;
        }
        // Page 2: an empty freelist (every page is in use).
        let mut free = vec![0u8; PAGE_SIZE];
        free[0..8].copy_from_slice(&2u64.to_le_bytes());
        free[8..10].copy_from_slice(&FREELIST.to_le_bytes());
        sink(&free)?;

        // Each bucket's leaves as its pairs come, then its branches.
        let mut bucket: Option<usize> = None;
        let mut leaf = 0;
        let mut ids: Vec<u64> = Vec::new();
        let mut pending: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let finish = |b: usize,
                      leaf: usize,
                      ids: &[u64],
                      pending: &mut Vec<(Vec<u8>, Vec<u8>)>,
                      sink: &mut dyn FnMut(&[u8]) -> Result<(), EtcdSnapshotError>|
         -> Result<(), EtcdSnapshotError> {
            let tree = &self.trees[b];
            let leaves = &tree.levels[0];
            // Only an empty bucket has a leaf left: its one empty page.
            if leaf + 1 == leaves.len() && leaves[leaf].count == 0 && pending.is_empty() {
                sink(&page(ids[leaf], LEAF, &[]))?;
            } else if leaf != leaves.len() || !pending.is_empty() {
                return Err(changed());
            }
            branch_pages(tree, sink)
        };
        source.visit(&mut |item| {
            match item {
                Item::Bucket(name) => {
                    if let Some(b) = bucket {
                        finish(b, leaf, &ids, &mut pending, sink)?;
                    }
                    let b = bucket.map_or(0, |b| b + 1);
                    if self.names.get(b).map(Vec::as_slice) != Some(name) {
                        return Err(changed());
                    }
                    bucket = Some(b);
                    leaf = 0;
                    ids = self.trees[b].ids(0);
                }
                Item::Pair(key, value) => {
                    let b = bucket.ok_or_else(changed)?;
                    let planned = self.trees[b].levels[0].get(leaf).ok_or_else(changed)?;
                    pending.push((key.to_vec(), value.to_vec()));
                    if pending.len() == planned.count {
                        let elements: Vec<(u32, &[u8], &[u8])> = pending
                            .iter()
                            .map(|(k, v)| (0, k.as_slice(), v.as_slice()))
                            .collect();
                        if elements[0].1 != planned.first.as_slice() {
                            return Err(changed());
                        }
                        let bytes = page(ids[leaf], LEAF, &elements);
                        if bytes.len() as u64 != planned.span * PAGE_SIZE as u64 {
                            return Err(changed());
                        }
                        sink(&bytes)?;
                        pending.clear();
                        leaf += 1;
                    }
                }
            }
            Ok(())
        })?;
        match bucket {
            Some(b) if b + 1 == self.names.len() => finish(b, leaf, &ids, &mut pending, sink)?,
            None if self.names.is_empty() => {}
            _ => return Err(changed()),
        }

        // The root bucket: each bucket's name and header (its root page, sequence 0).
        let headers: Vec<[u8; 16]> = self
            .trees
            .iter()
            .map(|t| {
                let mut h = [0u8; 16];
                h[..8].copy_from_slice(&t.root().to_le_bytes());
                h
            })
            .collect();
        let root_ids = self.root.ids(0);
        let mut next = 0;
        for (planned, id) in self.root.levels[0].iter().zip(root_ids) {
            let elements: Vec<(u32, &[u8], &[u8])> = self.names[next..next + planned.count]
                .iter()
                .zip(&headers[next..next + planned.count])
                .map(|(n, h)| (BUCKET_LEAF, n.as_slice(), h.as_slice()))
                .collect();
            sink(&page(id, LEAF, &elements))?;
            next += planned.count;
        }
        branch_pages(&self.root, sink)
    }
}

/// Buckets held in memory, as a [`Source`] (tests).
#[cfg(test)]
struct InMemory<'a> {
    buckets: Vec<(&'a [u8], Vec<Pair<'a>>)>,
}

#[cfg(test)]
impl Source for InMemory<'_> {
    fn visit(
        &mut self,
        f: &mut dyn FnMut(Item<'_>) -> Result<(), EtcdSnapshotError>,
    ) -> Result<(), EtcdSnapshotError> {
        for (name, pairs) in &self.buckets {
            f(Item::Bucket(name))?;
            for (k, v) in pairs {
                f(Item::Pair(k, v))?;
            }
        }
        Ok(())
    }
}

/// A bbolt file holding `buckets` (sorted here by name, and each bucket's pairs by key;
/// duplicate keys keep the last value), built in memory: for tests, which check files against
/// what they were made of. Bucket names and keys must be non-empty.
#[cfg(test)]
pub fn write<N, K, V>(buckets: &[(N, Vec<(K, V)>)]) -> Result<Vec<u8>, EtcdSnapshotError>
where
    N: AsRef<[u8]>,
    K: AsRef<[u8]>,
    V: AsRef<[u8]>,
{
    let mut sorted: Vec<(&[u8], Vec<Pair<'_>>)> = Vec::with_capacity(buckets.len());
    for (name, pairs) in buckets {
        let name = name.as_ref();
        if name.is_empty() || pairs.iter().any(|(k, _)| k.as_ref().is_empty()) {
            return Err(bad("empty bucket names and keys cannot be written"));
        }
        let mut p: Vec<Pair<'_>> = pairs
            .iter()
            .map(|(k, v)| (k.as_ref(), v.as_ref()))
            .collect();
        p.sort_by(|a, b| a.0.cmp(b.0));
        p.dedup_by(|later, earlier| {
            if later.0 == earlier.0 {
                earlier.1 = later.1;
                true
            } else {
                false
            }
        });
        sorted.push((name, p));
    }
    sorted.sort_by(|a, b| a.0.cmp(b.0));
    if sorted.windows(2).any(|w| w[0].0 == w[1].0) {
        return Err(bad("two buckets with one name"));
    }
    let mut source = InMemory { buckets: sorted };
    let writer = Writer::plan(&mut source)?;
    let mut out = Vec::with_capacity(writer.size() as usize);
    writer.write(&mut source, &mut |p| {
        out.extend_from_slice(p);
        Ok(())
    })?;
    debug_assert_eq!(out.len() as u64, writer.size());
    Ok(out)
}

// ---- reading --------------------------------------------------------------------------------

/// Where a file's bytes are read from, a few at a time: [`FileBytes`] reads a file on disk
/// page by page (so reading a file of any size takes a page or two of memory), a byte slice
/// reads memory.
pub trait ReadAt {
    /// How many bytes there are.
    fn size(&self) -> u64;
    /// Fills `buf` with the bytes at `offset`; the caller keeps within [`ReadAt::size`].
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()>;
}

impl<T: ReadAt + ?Sized> ReadAt for &T {
    fn size(&self) -> u64 {
        (**self).size()
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        (**self).read_at(buf, offset)
    }
}

impl ReadAt for [u8] {
    fn size(&self) -> u64 {
        self.len() as u64
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        let bytes = usize::try_from(offset)
            .ok()
            .and_then(|at| self.get(at..at.checked_add(buf.len())?))
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::UnexpectedEof))?;
        buf.copy_from_slice(bytes);
        Ok(())
    }
}

/// The first `len` bytes of a file, read in place with positioned reads: a snapshot's
/// database without the checksum after it. Nothing of the file is held in memory; the kernel's
/// page cache keeps what it likes, outside the process.
#[derive(Debug)]
pub struct FileBytes {
    file: std::fs::File,
    len: u64,
}

impl FileBytes {
    /// `file`'s first `len` bytes (a file shorter than that fails where a read reaches its end).
    pub fn new(file: std::fs::File, len: u64) -> Self {
        Self { file, len }
    }

    /// The first `len` of these bytes (all of them if there are fewer).
    pub fn prefix(self, len: u64) -> Self {
        Self {
            len: len.min(self.len),
            file: self.file,
        }
    }
}

impl ReadAt for FileBytes {
    fn size(&self) -> u64 {
        self.len
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        let end = offset.checked_add(buf.len() as u64);
        if end.is_none_or(|end| end > self.len) {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        std::os::unix::fs::FileExt::read_exact_at(&self.file, buf, offset)
    }
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

#[derive(Debug, Clone, Copy)]
struct Meta {
    page_size: usize,
    root: u64,
    high_water: u64,
    txid: u64,
}

fn meta_at(src: &dyn ReadAt, at: usize) -> Result<Meta, EtcdSnapshotError> {
    let mut m = [0u8; 64];
    let start = (at + HEADER) as u64;
    if start + 64 > src.size() {
        return Err(bad("file too small for a meta page"));
    }
    src.read_at(&mut m, start)?;
    let word = |o| u32_at(&m, o).unwrap_or(0);
    let long = |o| u64_at(&m, o).unwrap_or(0);
    if word(0) != MAGIC {
        return Err(bad("invalid database (not a bbolt file)"));
    }
    if word(4) != VERSION {
        return Err(bad("version mismatch"));
    }
    let sum = long(56);
    if sum != 0 && sum != fnv64a(&m[..56]) {
        return Err(bad("checksum error"));
    }
    let page_size = word(8) as usize;
    if !(512..=1 << 20).contains(&page_size) || !page_size.is_power_of_two() {
        return Err(bad(format!("invalid page size {page_size}")));
    }
    Ok(Meta {
        page_size,
        root: long(16),
        high_water: long(40),
        txid: long(48),
    })
}

/// A bbolt file opened for reading: its meta pages checked, its pages not read yet. As a
/// [`Source`] it hands over every bucket and pair in order, read page by page as it goes, each
/// pair borrowed from the page being read: memory stays at one page per tree level (and the
/// largest value's overflow pages), plus a bit per page of the file, whatever the file's size.
/// A visit that meets damage ends with an error after handing over what came before it.
#[derive(Debug)]
pub struct Db<R> {
    src: R,
    meta: Meta,
}

impl<R: ReadAt> Db<R> {
    /// Reads the meta pages (the valid one with the higher transaction id serves) and checks
    /// that the file holds the pages they count.
    pub fn open(src: R) -> Result<Self, EtcdSnapshotError> {
        let first = meta_at(&src, 0);
        let page_size = match &first {
            Ok(m) => m.page_size,
            Err(_) => PAGE_SIZE,
        };
        let second = meta_at(&src, page_size);
        let meta = match (first, second) {
            (Ok(a), Ok(b)) => {
                if b.txid > a.txid {
                    b
                } else {
                    a
                }
            }
            (Ok(m), Err(_)) | (Err(_), Ok(m)) => m,
            (Err(e), Err(_)) => return Err(e),
        };
        if src.size() / (meta.page_size as u64) < meta.high_water {
            return Err(bad(format!(
                "file size {} is below the high-water mark of {} pages",
                src.size(),
                meta.high_water
            )));
        }
        Ok(Self { src, meta })
    }

    pub fn page_size(&self) -> usize {
        self.meta.page_size
    }

    /// Pages in use (the meta's high-water mark).
    pub fn high_water(&self) -> u64 {
        self.meta.high_water
    }

    /// The size bbolt reports for the database (`tx.Size()`).
    pub fn size(&self) -> u64 {
        self.meta
            .high_water
            .saturating_mul(self.meta.page_size as u64)
    }
}

impl<R: ReadAt> Source for Db<R> {
    fn visit(
        &mut self,
        f: &mut dyn FnMut(Item<'_>) -> Result<(), EtcdSnapshotError>,
    ) -> Result<(), EtcdSnapshotError> {
        let pages = self.src.size() / self.meta.page_size as u64;
        let mut walker = Walker {
            src: &self.src,
            page_size: self.meta.page_size,
            high_water: self.meta.high_water,
            taken: vec![0u64; pages.div_ceil(64) as usize],
            budget: self.src.size(),
        };
        let mut seen: HashSet<Vec<u8>> = HashSet::new();
        let mut root = Vec::new();
        walker.read_page(self.meta.root, &mut root)?;
        walker.walk(&root, 0, &mut |w, flags, name, header| {
            if flags & BUCKET_LEAF == 0 {
                return Err(bad("a key outside any bucket"));
            }
            if !seen.insert(name.to_vec()) {
                return Err(bad("two buckets with one name"));
            }
            w.spend(name.len())?;
            f(Item::Bucket(name))?;
            let root = u64_at(header, 0).ok_or_else(|| bad("bucket header too short"))?;
            let mut own = Vec::new();
            let page = if root == 0 {
                header
                    .get(16..)
                    .filter(|p| p.len() >= HEADER)
                    .ok_or_else(|| bad("inline bucket without a page"))?
            } else {
                w.read_page(root, &mut own)?;
                &own
            };
            w.walk(page, 1, &mut |w, flags, k, v| {
                if flags & BUCKET_LEAF != 0 {
                    return Err(bad("nested buckets are not supported"));
                }
                w.spend(k.len() + v.len())?;
                f(Item::Pair(k, v))
            })
        })
    }
}

/// A leaf element as [`Walker::walk`] hands it over: the walker (to read further pages),
/// the element's flags, key and value.
type LeafFn<'f, 'r> =
    dyn FnMut(&mut Walker<'r>, u32, &[u8], &[u8]) -> Result<(), EtcdSnapshotError> + 'f;

/// One pass over a file's trees.
struct Walker<'r> {
    src: &'r dyn ReadAt,
    page_size: usize,
    high_water: u64,
    /// A bit for every page of the file, set once the page is read (overflow pages included):
    /// in a bbolt tree each page has one parent, so a page met twice is a cycle or a shared
    /// subtree, refused (a file of a few pages would otherwise make the walk exponential: a
    /// branch page listing itself thirty times).
    taken: Vec<u64>,
    /// Bytes handed over: names, keys and values never overlap in a bbolt file, so they add
    /// up to less than the file; elements of a damaged page that point at the same bytes
    /// could otherwise hand over a page's worth thousands of times.
    budget: u64,
}

impl<'r> Walker<'r> {
    fn spend(&mut self, n: usize) -> Result<(), EtcdSnapshotError> {
        self.budget = self
            .budget
            .checked_sub(n as u64)
            .ok_or_else(|| bad("elements overlap (more bytes in them than in the file)"))?;
        Ok(())
    }

    /// Reads page `id`, overflow pages included, into `buf` (resized to it).
    fn read_page(&mut self, id: u64, buf: &mut Vec<u8>) -> Result<(), EtcdSnapshotError> {
        if id >= self.high_water {
            return Err(bad(format!("page {id} above the high-water mark")));
        }
        let len = self.src.size();
        let start = id
            .checked_mul(self.page_size as u64)
            .ok_or_else(|| bad("page offset overflows"))?;
        if start + HEADER as u64 > len {
            return Err(bad("page beyond the end"));
        }
        let beyond = || bad(format!("page {id} beyond the end of the file"));
        // The first page (an overflowing page's length is in its header), then the rest.
        if start + self.page_size as u64 > len {
            return Err(beyond());
        }
        buf.resize(self.page_size, 0);
        self.src.read_at(buf, start)?;
        let overflow = u32_at(buf, 12).ok_or_else(|| bad("page beyond the end"))?;
        if overflow > 0 {
            let total = (overflow as usize + 1)
                .checked_mul(self.page_size)
                .ok_or_else(|| bad("page length overflows"))?;
            if start + total as u64 > len {
                return Err(beyond());
            }
            buf.resize(total, 0);
            self.src
                .read_at(&mut buf[self.page_size..], start + self.page_size as u64)?;
        }
        // Within the file (checked above), so within the bitmap.
        for pgid in id..=id + u64::from(overflow) {
            let (word, bit) = ((pgid / 64) as usize, 1u64 << (pgid % 64));
            let slot = self.taken.get_mut(word).ok_or_else(beyond)?;
            if *slot & bit != 0 {
                return Err(bad(format!("page {pgid} is reached twice")));
            }
            *slot |= bit;
        }
        Ok(())
    }

    /// Hands `f` every leaf element under `page` (a bucket's inline page, or one read), in
    /// key order. A branch reads its children one at a time into one buffer.
    fn walk(
        &mut self,
        page: &[u8],
        depth: usize,
        f: &mut LeafFn<'_, 'r>,
    ) -> Result<(), EtcdSnapshotError> {
        if depth > MAX_DEPTH {
            return Err(bad("tree too deep (a page cycle?)"));
        }
        let flags = u16_at(page, 8).ok_or_else(|| bad("truncated page"))?;
        let count = u16_at(page, 10).ok_or_else(|| bad("truncated page"))? as usize;
        let slice = |at: usize, len: usize| -> Result<&[u8], EtcdSnapshotError> {
            page.get(
                at..at
                    .checked_add(len)
                    .ok_or_else(|| bad("element overflows"))?,
            )
            .ok_or_else(|| bad("element beyond its page"))
        };
        let mut child = Vec::new();
        for i in 0..count {
            let at = HEADER + i * ELEMENT;
            let e = slice(at, ELEMENT)?;
            let word = |o| u32_at(e, o).unwrap_or(0) as usize;
            if flags & LEAF != 0 {
                let (eflags, pos, ksize, vsize) = (word(0) as u32, word(4), word(8), word(12));
                let key = slice(at + pos, ksize)?;
                let value = slice(at + pos + ksize, vsize)?;
                f(self, eflags, key, value)?;
            } else if flags & BRANCH != 0 {
                let id = u64_at(e, 8).unwrap_or(0);
                self.read_page(id, &mut child)?;
                self.walk(&child, depth + 1, f)?;
            } else {
                return Err(bad(format!("invalid page type {flags:#x} in a tree")));
            }
        }
        Ok(())
    }
}

/// Reads every bucket of a bbolt file into memory ([`Db`] reads one without holding it).
/// `data` may carry trailing bytes (a snapshot's checksum) beyond the last page.
pub fn read(data: &[u8]) -> Result<BoltDb, EtcdSnapshotError> {
    let mut db = Db::open(data)?;
    let mut buckets: Vec<Bucket> = Vec::new();
    db.visit(&mut |item| {
        match item {
            Item::Bucket(name) => buckets.push((name.to_vec(), Vec::new())),
            Item::Pair(k, v) => buckets
                .last_mut()
                .ok_or_else(|| bad("a pair before any bucket"))?
                .1
                .push((k.to_vec(), v.to_vec())),
        }
        Ok(())
    })?;
    Ok(BoltDb {
        page_size: db.page_size(),
        high_water: db.high_water(),
        buckets,
    })
}

/// Bytes in memory read as a file is, counting what is read (tests): a streaming reader has
/// read little more than it has handed over at any point, a reader of the whole file all of it.
#[cfg(test)]
#[derive(Debug, Default)]
pub(crate) struct Counting<'a> {
    pub data: &'a [u8],
    /// Bytes read so far.
    pub read: std::cell::Cell<u64>,
    /// The largest single read.
    pub largest: std::cell::Cell<u64>,
}

#[cfg(test)]
impl ReadAt for Counting<'_> {
    fn size(&self) -> u64 {
        self.data.len() as u64
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.read.set(self.read.get() + buf.len() as u64);
        self.largest.set(self.largest.get().max(buf.len() as u64));
        self.data.read_at(buf, offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket(name: &str, pairs: &[(&[u8], &[u8])]) -> Bucket {
        (
            name.as_bytes().to_vec(),
            pairs
                .iter()
                .map(|(k, v)| (k.to_vec(), v.to_vec()))
                .collect(),
        )
    }

    #[test]
    fn what_is_written_reads_back_in_order() {
        let mut big = Vec::new();
        for i in 0..5000u32 {
            big.push((
                format!("key{i:06}").into_bytes(),
                vec![(i % 251) as u8; (i % 97) as usize],
            ));
        }
        let huge = vec![7u8; 3 * PAGE_SIZE + 5];
        let buckets = vec![
            (
                "meta".as_bytes().to_vec(),
                vec![(b"term".to_vec(), vec![1])],
            ),
            ("alarm".as_bytes().to_vec(), vec![]),
            ("key".as_bytes().to_vec(), big.clone()),
            bucket("lease", &[(b"b", &huge), (b"a", b"1"), (b"c", b"")]),
        ];
        let file = write(&buckets).unwrap();
        assert_eq!(file.len() % PAGE_SIZE, 0);
        let db = read(&file).unwrap();
        assert_eq!(db.size(), file.len() as u64);
        let names: Vec<&[u8]> = db.buckets.iter().map(|b| b.0.as_slice()).collect();
        assert_eq!(names, [&b"alarm"[..], b"key", b"lease", b"meta"]);
        assert!(db.buckets[0].1.is_empty());
        assert_eq!(db.buckets[1].1, big);
        let lease: Vec<&[u8]> = db.buckets[2].1.iter().map(|p| p.0.as_slice()).collect();
        assert_eq!(lease, [&b"a"[..], b"b", b"c"]);
        assert_eq!(db.buckets[2].1[1].1, huge);
        // Trailing bytes (a snapshot's checksum) are ignored.
        let mut with_sum = file.clone();
        with_sum.extend_from_slice(&[1u8; 32]);
        assert_eq!(read(&with_sum).unwrap(), db);
    }

    #[test]
    fn every_page_is_reachable_exactly_once() {
        // What `bbolt check` demands: each page below the high-water mark is a meta page, the
        // freelist, or reached once from the root.
        struct Case {
            name: &'static str,
            key_len: usize,
            value_len: usize,
            records: u32,
        }
        let cases = [
            Case {
                name: "small keys",
                key_len: 4,
                value_len: 40,
                records: 3000,
            },
            // A revision's 17 bytes: 167 leaves, so a branch page holds 123 children, full
            // (a branch element's child id is in its header, not after its key).
            Case {
                name: "full branch pages",
                key_len: 17,
                value_len: 300,
                records: 2000,
            },
        ];
        for c in cases {
            let pairs: Vec<_> = (0..c.records)
                .map(|i| {
                    let mut k = vec![0u8; c.key_len];
                    k[c.key_len - 4..].copy_from_slice(&i.to_be_bytes());
                    (k, vec![0u8; c.value_len])
                })
                .collect();
            let file = write(&[(b"key".to_vec(), pairs.clone())]).unwrap();
            check_reachable(&file, c.name);
            assert_eq!(read(&file).unwrap().buckets[0].1, pairs, "{}", c.name);
        }
    }

    fn check_reachable(file: &[u8], name: &str) {
        let high_water = file.len() / PAGE_SIZE;
        let mut seen = vec![0u32; high_water];
        seen[0] = 1;
        seen[1] = 1;
        seen[2] = 1;
        fn visit(file: &[u8], id: usize, seen: &mut [u32]) {
            let p = &file[id * PAGE_SIZE..];
            let flags = u16_at(p, 8).unwrap();
            let count = u16_at(p, 10).unwrap() as usize;
            let overflow = u32_at(p, 12).unwrap() as usize;
            for extra in 0..=overflow {
                seen[id + extra] += 1;
            }
            for i in 0..count {
                let e = HEADER + i * ELEMENT;
                if flags & BRANCH != 0 {
                    visit(file, u64_at(p, e + 8).unwrap() as usize, seen);
                } else if u32_at(p, e).unwrap() & BUCKET_LEAF != 0 {
                    let pos = u32_at(p, e + 4).unwrap() as usize;
                    let ksize = u32_at(p, e + 8).unwrap() as usize;
                    visit(file, u64_at(p, e + pos + ksize).unwrap() as usize, seen);
                }
            }
        }
        let root = u64_at(file, PAGE_SIZE + HEADER + 16).unwrap() as usize;
        visit(file, root, &mut seen);
        assert!(seen.iter().all(|n| *n == 1), "{name}: {seen:?}");
    }

    #[test]
    fn damage_is_an_error_not_a_panic() {
        let pairs: Vec<_> = (0..400u32)
            .map(|i| (i.to_be_bytes().to_vec(), vec![1u8; 30]))
            .collect();
        let file = write(&[(b"key".to_vec(), pairs)]).unwrap();
        assert!(read(&file[..PAGE_SIZE]).is_err());
        assert!(read(b"not a database").is_err());
        // Flip bytes all over: every outcome is Ok or Err.
        for at in (0..file.len()).step_by(97) {
            let mut bad = file.clone();
            bad[at] ^= 0xA5;
            let _ = read(&bad);
        }
        // Both metas broken: refused.
        let mut bad = file.clone();
        bad[HEADER] ^= 1;
        bad[PAGE_SIZE + HEADER] ^= 1;
        assert!(read(&bad).is_err());
        // One meta broken: the other still serves.
        let mut one = file.clone();
        one[PAGE_SIZE + HEADER + 20] ^= 1;
        assert!(read(&one).is_ok());
    }

    /// A source whose second replay differs from its first (one more pair each time).
    struct Growing {
        pairs: usize,
    }

    impl Source for Growing {
        fn visit(
            &mut self,
            f: &mut dyn FnMut(Item<'_>) -> Result<(), EtcdSnapshotError>,
        ) -> Result<(), EtcdSnapshotError> {
            f(Item::Bucket(b"key"))?;
            for i in 0..self.pairs {
                f(Item::Pair(&(i as u32).to_be_bytes(), &[0u8; 100]))?;
            }
            self.pairs += 1;
            Ok(())
        }
    }

    #[test]
    fn a_source_that_changes_between_passes_is_an_error() {
        for start in [0, 1, 39, 40, 41, 500] {
            let mut source = Growing { pairs: start };
            let writer = Writer::plan(&mut source).unwrap();
            let mut written = 0u64;
            let got = writer.write(&mut source, &mut |p| {
                written += p.len() as u64;
                Ok(())
            });
            assert!(got.is_err(), "{start} pairs, then one more");
            assert!(written <= writer.size());
        }
        // Unordered keys are refused while planning.
        struct Unordered;
        impl Source for Unordered {
            fn visit(
                &mut self,
                f: &mut dyn FnMut(Item<'_>) -> Result<(), EtcdSnapshotError>,
            ) -> Result<(), EtcdSnapshotError> {
                f(Item::Bucket(b"b"))?;
                f(Item::Pair(b"2", b""))?;
                f(Item::Pair(b"1", b""))
            }
        }
        assert!(Writer::plan(&mut Unordered).is_err());
    }

    #[test]
    fn bad_input_to_write_is_refused() {
        let none: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        assert!(write(&[(Vec::new(), none.clone())]).is_err());
        assert!(write(&[(b"a".to_vec(), vec![(Vec::new(), b"v".to_vec())])]).is_err());
        assert!(write(&[(b"a".to_vec(), none.clone()), (b"a".to_vec(), none)]).is_err());
    }

    /// Reading hands pairs over as it reads pages: at every pair it has read little more than
    /// it handed over (a page per tree level ahead), each page once, never the whole file in
    /// one go; what it hands over is what was written.
    #[test]
    fn pairs_come_as_their_pages_are_read() {
        let big = vec![9u8; 5 * PAGE_SIZE];
        let mut pairs: Vec<(Vec<u8>, Vec<u8>)> = (0..20_000u32)
            .map(|i| {
                (
                    i.to_be_bytes().to_vec(),
                    vec![(i % 251) as u8; 30 + (i % 50) as usize],
                )
            })
            .collect();
        pairs.push((b"zz".to_vec(), big.clone()));
        let file = write(&[
            (b"a".to_vec(), vec![(b"k".to_vec(), b"v".to_vec())]),
            (b"key".to_vec(), pairs.clone()),
        ])
        .unwrap();
        assert!(file.len() > 300 * PAGE_SIZE, "{} bytes", file.len());
        let src = Counting {
            data: &file,
            ..Default::default()
        };
        let mut db = Db::open(&src).unwrap();
        let mut handed = 0u64;
        let mut got: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let mut worst_ahead = 0u64;
        db.visit(&mut |item| {
            if let Item::Pair(k, v) = item {
                handed += (k.len() + v.len()) as u64;
                // Read so far, beyond twice what was handed over (pages are at least half
                // keys and values here): the pages in flight.
                let ahead = src.read.get().saturating_sub(2 * handed);
                worst_ahead = worst_ahead.max(ahead);
                got.push((k.to_vec(), v.to_vec()));
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(&got[1..], &pairs[..]);
        assert!(
            worst_ahead <= 8 * PAGE_SIZE as u64 + big.len() as u64,
            "read {worst_ahead} bytes ahead of the pairs handed over"
        );
        assert!(src.largest.get() <= (big.len() + PAGE_SIZE) as u64);
        // Each page once: the metas (read by open) and the freelist are not reached.
        let metas = 2 * 64;
        assert_eq!(
            src.read.get(),
            file.len() as u64 - 3 * PAGE_SIZE as u64 + metas
        );
    }
}

#[cfg(test)]
mod etcd_file {
    use super::*;

    /// A snapshot `etcdctl snapshot save` took from etcd 3.5.1 after `put s/1 v1`,
    /// `put s/2 v2`, `put s/3 v3`, `del s/2`: inline buckets, 4096-byte pages, no freelist
    /// page, and the 32-byte SHA-256 after the last page.
    const ETCD: &[u8] = include_bytes!("../tests/fixtures/etcd-3.5.1-snapshot.db");

    #[test]
    fn reads_what_etcd_wrote() {
        let db = read(ETCD).unwrap();
        assert_eq!(db.size(), 24576);
        let names: Vec<String> = db
            .buckets
            .iter()
            .map(|b| String::from_utf8_lossy(&b.0).into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "alarm",
                "auth",
                "authRoles",
                "authUsers",
                "cluster",
                "key",
                "lease",
                "members",
                "members_removed",
                "meta"
            ]
        );
        let total: usize = db.buckets.iter().map(|b| b.1.len()).sum();
        assert_eq!(total, 10, "etcdutl snapshot status says totalKey 10");
        let key = &db.buckets[5].1;
        assert_eq!(key.len(), 4);
        assert_eq!(key[3].0.last(), Some(&b't'), "the delete's tombstone");
        // Written again by us, it reads back the same.
        assert_eq!(
            read(&write(&db.buckets).unwrap()).unwrap().buckets,
            db.buckets
        );
    }

    /// A 512-byte-page file: two metas (root at page 2), then `pages` from page 2 on, each
    /// `(flags, elements)` with elements written as given and `tail` bytes after them.
    fn hand_made(pages: &[(u16, u16, Vec<u8>)]) -> Vec<u8> {
        const SIZE: usize = 512;
        let high_water = 2 + pages.len() as u64;
        let mut out = Vec::new();
        for id in 0..2u64 {
            let mut page = vec![0u8; SIZE];
            page[..8].copy_from_slice(&id.to_le_bytes());
            page[8..10].copy_from_slice(&META.to_le_bytes());
            let m = &mut page[HEADER..];
            m[0..4].copy_from_slice(&MAGIC.to_le_bytes());
            m[4..8].copy_from_slice(&VERSION.to_le_bytes());
            m[8..12].copy_from_slice(&(SIZE as u32).to_le_bytes());
            m[16..24].copy_from_slice(&2u64.to_le_bytes());
            m[40..48].copy_from_slice(&high_water.to_le_bytes());
            m[48..56].copy_from_slice(&id.to_le_bytes());
            out.extend(page);
        }
        for (i, (flags, count, body)) in pages.iter().enumerate() {
            let mut page = vec![0u8; SIZE];
            page[..8].copy_from_slice(&(2 + i as u64).to_le_bytes());
            page[8..10].copy_from_slice(&flags.to_le_bytes());
            page[10..12].copy_from_slice(&count.to_le_bytes());
            page[HEADER..HEADER + body.len()].copy_from_slice(body);
            out.extend(page);
        }
        out
    }

    fn leaf_element(flags: u32, pos: u32, ksize: u32, vsize: u32) -> Vec<u8> {
        [flags, pos, ksize, vsize]
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect()
    }

    /// The root leaf: one bucket `b` whose tree starts at page 3.
    fn root_with_bucket_at_3() -> (u16, u16, Vec<u8>) {
        let mut body = leaf_element(BUCKET_LEAF, ELEMENT as u32, 1, 16);
        body.push(b'b');
        body.extend(3u64.to_le_bytes());
        body.extend(0u64.to_le_bytes());
        (LEAF, 1, body)
    }

    /// Found by the `snapshot` fuzz target's kind of input: a branch page that lists itself
    /// thirty times made the walk take 30^64 steps before the depth limit; every page may now
    /// be reached once.
    #[test]
    fn a_page_reached_twice_is_refused_at_once() {
        let mut branch = Vec::new();
        for _ in 0..30 {
            branch.extend(0u32.to_le_bytes());
            branch.extend(0u32.to_le_bytes());
            branch.extend(3u64.to_le_bytes());
        }
        let file = hand_made(&[root_with_bucket_at_3(), (BRANCH, 30, branch)]);
        let started = std::time::Instant::now();
        let err = read(&file).unwrap_err().to_string();
        assert!(err.contains("page 3 is reached twice"), "{err}");
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
    }

    /// Leaf elements that all point at the same large value would copy it once each: a
    /// 1 MiB file could ask for 16 GiB (4096 elements of a 1 MiB page each). Reading
    /// copies no more bytes than the file holds.
    #[test]
    fn overlapping_elements_cannot_copy_more_than_the_file() {
        let count = 20u16;
        let mut leaf = Vec::new();
        for i in 0..u32::from(count) {
            // Each element's key is the first byte after the element array, its value the
            // rest of the page: 20 copies of 171 bytes out of a 2048-byte file.
            let pos = (u32::from(count) - i) * ELEMENT as u32;
            leaf.extend(leaf_element(0, pos, 1, 170));
        }
        leaf.extend([b'k'; 171]);
        let file = hand_made(&[root_with_bucket_at_3(), (LEAF, count, leaf)]);
        let err = read(&file).unwrap_err().to_string();
        assert!(err.contains("elements overlap"), "{err}");
        // The same page with its elements apart reads.
        let mut apart = Vec::new();
        for i in 0..2u32 {
            apart.extend(leaf_element(0, (2 - i) * ELEMENT as u32 + i * 41, 1, 40));
        }
        apart.extend([b'k'; 82]);
        let db = read(&hand_made(&[root_with_bucket_at_3(), (LEAF, 2, apart)])).unwrap();
        assert_eq!(db.buckets[0].1.len(), 2);
    }
}
