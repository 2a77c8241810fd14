//! Splitting a history into independently checkable parts
//! (P-compositionality, Horn & Kroening 2015).
//!
//! Linearizability is local: a history over independent objects is
//! linearizable iff each object's sub-history is. Single-key requests touch
//! one object; a txn touching several keys glues them into one object
//! (union-find over key ids). The global revision couples *every* key, so a
//! per-key check cannot verify revisions exactly; the model then treats the
//! revision as a lower bound (see [`crate::model`]). `Mode::Whole` keeps one
//! partition and checks revisions exactly.

use crate::model::COp;

/// Union-find over key ids, with path halving and union by size.
#[derive(Debug)]
struct Dsu {
    parent: Vec<usize>,
    size: Vec<usize>,
}

impl Dsu {
    fn new(n: usize) -> Self {
        Dsu {
            parent: (0..n).collect(),
            size: vec![1; n],
        }
    }
    fn find(&mut self, mut x: usize) -> usize {
        while let Some(&p) = self.parent.get(x) {
            if p == x {
                break;
            }
            let gp = self.parent.get(p).copied().unwrap_or(p);
            if let Some(slot) = self.parent.get_mut(x) {
                *slot = gp;
            }
            x = gp;
        }
        x
    }
    fn union(&mut self, a: usize, b: usize) {
        let (mut a, mut b) = (self.find(a), self.find(b));
        if a == b {
            return;
        }
        let size = |d: &Self, i: usize| d.size.get(i).copied().unwrap_or(0);
        if size(self, a) < size(self, b) {
            std::mem::swap(&mut a, &mut b);
        }
        if let Some(slot) = self.parent.get_mut(b) {
            *slot = a;
        }
        let sb = size(self, b);
        if let Some(slot) = self.size.get_mut(a) {
            *slot += sb;
        }
    }
}

/// Groups op indices by connected key sets; each group is in history order,
/// and groups are sorted smallest first (so the first failure found is in
/// the smallest failing partition).
pub(crate) fn by_key(ops: &[COp], key_count: usize) -> Vec<Vec<usize>> {
    let mut dsu = Dsu::new(key_count);
    for op in ops {
        if let Some((&first, rest)) = op.keys.split_first() {
            for &k in rest {
                dsu.union(first as usize, k as usize);
            }
        }
    }
    let mut slot_of_root = vec![usize::MAX; key_count];
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        let Some(&k) = op.keys.first() else { continue };
        let root = dsu.find(k as usize);
        let Some(slot) = slot_of_root.get_mut(root) else {
            continue;
        };
        if *slot == usize::MAX {
            *slot = groups.len();
            groups.push(Vec::new());
        }
        if let Some(g) = groups.get_mut(*slot) {
            g.push(i);
        }
    }
    groups.sort_by_key(Vec::len);
    groups
}
