//! The Wing–Gong/Lowe search (Lowe, "Testing for linearizability", 2017).
//!
//! Every op contributes a call entry and a return entry to a doubly linked
//! list sorted by time (an op that never returned has its return at +inf,
//! after every real return). The search walks the list from its head: a call
//! entry is a candidate to linearize next; the first return entry met means
//! that op had to be linearized already, so the search backtracks. To
//! linearize an op, the model must accept it from the current state; the op's
//! two entries are then unlinked ("lifted") and the walk restarts at the
//! head. Each (set of linearized ops, state) pair is remembered, and a
//! candidate leading to a pair already explored is skipped: that is what
//! makes the search practical (Lowe's memoization). A model step may have
//! several successor states (maybe-applied txns, bounded revisions); each is
//! a separate branch, tried in turn on backtracking.
//!
//! Pruning: revisions never decrease, so a successor state whose revision
//! is already above what some pending returned op requires (its header
//! revision, minus one if it writes) can never be completed and is skipped.
//! Without it, ops that failed and were never applied stay candidates
//! forever and every subset of them gets tried (exponential in exact-revision
//! mode).
//!
//! The search succeeds as soon as every op that returned is linearized: ops
//! that never returned and were not needed are taken as "not applied".
//!
//! Memory and time per step are independent of the history's length: the
//! memo holds a 128-bit fingerprint of each (linearized set, state) pair,
//! not the pair (a set is an n-bit vector: 12 KB per entry for 10^5 ops).
//! The set's half is a Zobrist hash (one random 128-bit word per op, xored
//! in and out as ops are linearized and undone), the state's a SipHash.
//! Two distinct pairs sharing a fingerprint would make the search skip an
//! unexplored branch; with at most 10^9 entries the odds are below 10^-20.
//! The longest prefix (for the report) is kept incrementally.

use std::collections::{BTreeMap, HashSet};
use std::hash::{Hash, Hasher};

use crate::model::{CInput, COp, Model, State};

const NIL: usize = usize::MAX;

pub(crate) enum Search {
    Ok,
    /// Not linearizable: the longest linearizable prefix found (local op
    /// indices in linearization order) and the state after it.
    Fail {
        prefix: Vec<usize>,
        state: State,
    },
    OutOfSteps,
}

/// splitmix64, for the Zobrist words.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The Zobrist fingerprint of the set of linearized ops.
struct Bits {
    words: Vec<u128>,
    fp: u128,
}

impl Bits {
    fn new(n: usize) -> Self {
        let words = (0..n as u64)
            .map(|i| (u128::from(mix(2 * i)) << 64) | u128::from(mix(2 * i + 1)))
            .collect();
        Bits { words, fp: 0 }
    }
    fn flip(&mut self, i: usize) {
        if let Some(w) = self.words.get(i) {
            self.fp ^= *w;
        }
    }
    /// The memo key of (this set, `s`).
    fn key(&self, s: &State) -> u128 {
        let mut a = std::hash::DefaultHasher::new();
        s.hash(&mut a);
        let mut b = std::hash::DefaultHasher::new();
        0x5bd1_e995u32.hash(&mut b);
        s.hash(&mut b);
        self.fp ^ ((u128::from(a.finish()) << 64) | u128::from(b.finish()))
    }
}

struct Frame {
    op: usize,
    old: State,
    /// Successor states not tried yet.
    rest: std::vec::IntoIter<State>,
}

struct List {
    next: Vec<usize>,
    prev: Vec<usize>,
    /// Per node: the op it belongs to, and whether it is its call.
    op: Vec<usize>,
    is_call: Vec<bool>,
    /// Per op: its call node and return node.
    call_node: Vec<usize>,
    ret_node: Vec<usize>,
    head: usize,
}

fn at(v: &[usize], i: usize) -> usize {
    v.get(i).copied().unwrap_or(NIL)
}

fn put(v: &mut [usize], i: usize, x: usize) {
    if let Some(s) = v.get_mut(i) {
        *s = x;
    }
}

impl List {
    fn new(ops: &[&COp]) -> Self {
        let n = ops.len();
        // (time, return?, maybe?, op): calls before returns at equal times
        // (touching intervals count as concurrent), real returns before the
        // +inf ones of ops that never returned.
        let mut ev: Vec<(u64, bool, bool, usize)> = Vec::with_capacity(2 * n);
        for (i, op) in ops.iter().enumerate() {
            ev.push((op.call, false, false, i));
            ev.push((op.ret.unwrap_or(u64::MAX), true, op.ret.is_none(), i));
        }
        ev.sort_unstable();
        let head = 2 * n;
        let mut l = List {
            next: vec![NIL; 2 * n + 1],
            prev: vec![NIL; 2 * n + 1],
            op: vec![0; 2 * n],
            is_call: vec![false; 2 * n],
            call_node: vec![NIL; n],
            ret_node: vec![NIL; n],
            head,
        };
        let mut last = head;
        for (node, &(_, is_ret, _, op)) in ev.iter().enumerate() {
            put(&mut l.op, node, op);
            if let Some(c) = l.is_call.get_mut(node) {
                *c = !is_ret;
            }
            if is_ret {
                put(&mut l.ret_node, op, node);
            } else {
                put(&mut l.call_node, op, node);
            }
            put(&mut l.next, last, node);
            put(&mut l.prev, node, last);
            last = node;
        }
        l
    }
    fn unlink(&mut self, x: usize) {
        let (p, n) = (at(&self.prev, x), at(&self.next, x));
        put(&mut self.next, p, n);
        if n != NIL {
            put(&mut self.prev, n, p);
        }
    }
    /// Undoes `unlink(x)`; valid in LIFO order since x keeps its own links.
    fn relink(&mut self, x: usize) {
        let (p, n) = (at(&self.prev, x), at(&self.next, x));
        put(&mut self.next, p, x);
        if n != NIL {
            put(&mut self.prev, n, x);
        }
    }
    fn lift(&mut self, op: usize) {
        self.unlink(at(&self.call_node, op));
        self.unlink(at(&self.ret_node, op));
    }
    fn unlift(&mut self, op: usize) {
        self.relink(at(&self.ret_node, op));
        self.relink(at(&self.call_node, op));
    }
}

struct Searcher<'o> {
    ops: &'o [&'o COp],
    list: List,
    pending: usize,
    bits: Bits,
    seen: HashSet<u128>,
    stack: Vec<Frame>,
    /// The longest prefix linearized so far, the state after it, and how
    /// long a prefix of it the stack still shares (so it is updated in
    /// amortized O(1) per push).
    best: Vec<usize>,
    best_state: State,
    shared: usize,
    state: State,
    /// Per op: [`COp::rev_bound`] if it returned.
    bound: Vec<Option<i64>>,
    /// Multiset of the bounds of the pending (not linearized) ops.
    bounds: BTreeMap<i64, usize>,
}

impl Searcher<'_> {
    fn returned(&self, op: usize) -> bool {
        self.ops.get(op).is_some_and(|o| o.ret.is_some())
    }

    /// Tried in the second pass (see [`search`]).
    fn lazy(&self, op: usize) -> bool {
        self.ops
            .get(op)
            .is_some_and(|o| o.ret.is_none() && matches!(o.input, CInput::Lease(_)))
    }

    fn bound_of(&self, op: usize) -> Option<i64> {
        self.bound.get(op).copied().flatten()
    }

    fn drop_bound(&mut self, op: usize) {
        if let Some(b) = self.bound_of(op)
            && let Some(c) = self.bounds.get_mut(&b)
        {
            *c -= 1;
            if *c == 0 {
                self.bounds.remove(&b);
            }
        }
    }

    fn add_bound(&mut self, op: usize) {
        if let Some(b) = self.bound_of(op) {
            *self.bounds.entry(b).or_insert(0) += 1;
        }
    }

    /// Tries the successor states `cands` of linearizing `op` after `old`
    /// in turn; on the first unexplored one, commits to it (pushes a frame,
    /// lifts the op) and returns true. Otherwise leaves `state = old`.
    fn enter(&mut self, op: usize, old: State, mut cands: std::vec::IntoIter<State>) -> bool {
        self.bits.flip(op);
        self.drop_bound(op);
        let limit = self.bounds.keys().next().copied().unwrap_or(i64::MAX);
        for s in cands.by_ref() {
            if s.rev <= limit && self.seen.insert(self.bits.key(&s)) {
                self.stack.push(Frame {
                    op,
                    old,
                    rest: cands,
                });
                if self.stack.len() > self.best.len() {
                    let from = self.shared.min(self.best.len());
                    self.best.truncate(from);
                    self.best
                        .extend(self.stack.get(from..).unwrap_or(&[]).iter().map(|f| f.op));
                    self.best_state = s.clone();
                    self.shared = self.stack.len();
                }
                self.state = s;
                self.list.lift(op);
                if self.returned(op) {
                    self.pending -= 1;
                }
                return true;
            }
        }
        self.add_bound(op);
        self.bits.flip(op);
        self.state = old;
        false
    }

    /// Pops the last linearized op; false if there is none.
    fn leave(&mut self) -> Option<Frame> {
        let f = self.stack.pop()?;
        self.shared = self.shared.min(self.stack.len());
        self.list.unlift(f.op);
        if self.returned(f.op) {
            self.pending += 1;
        }
        self.bits.flip(f.op);
        self.add_bound(f.op);
        Some(f)
    }
}

/// Searches for a linearization of `ops` (one partition) from `init`.
/// `steps` is decremented per model step; at zero the search gives up.
pub(crate) fn search(ops: &[&COp], model: &Model<'_>, init: State, steps: &mut u64) -> Search {
    let n = ops.len();
    let mut s = Searcher {
        ops,
        list: List::new(ops),
        pending: ops.iter().filter(|o| o.ret.is_some()).count(),
        bits: Bits::new(n),
        seen: HashSet::new(),
        stack: Vec::new(),
        best: Vec::new(),
        best_state: init.clone(),
        shared: 0,
        state: init,
        bound: ops.iter().map(|o| o.ret.and(o.rev_bound())).collect(),
        bounds: BTreeMap::new(),
    };
    for op in 0..n {
        s.add_bound(op);
    }
    let mut cur = at(&s.list.next, s.list.head);
    // Candidates are tried in two passes: first all but the lazy ones, then
    // (once the walk meets a return entry) the lazy ones: maybe-applied
    // lease requests and expiries. They are then linearized only where no
    // other op can go next without them, instead of everywhere first: an
    // expiry (or a failed grant or revoke) that deletes nothing leaves the
    // revision alone, so nothing prunes it early, and tried at every point
    // of its window (seconds) each try would be explored until something
    // contradicts it. Maybe-applied writes stay eager: placed late they
    // fill revision gaps later and cost more. Every candidate is still
    // tried before backtracking, so the verdict is the same.
    let mut pass2 = false;
    loop {
        if s.pending == 0 {
            return Search::Ok;
        }
        let node = cur;
        if node != NIL && s.list.is_call.get(node).copied().unwrap_or(false) {
            let op = at(&s.list.op, node);
            if s.lazy(op) != pass2 {
                cur = at(&s.list.next, node);
                continue;
            }
            if *steps == 0 {
                return Search::OutOfSteps;
            }
            *steps -= 1;
            let Some(o) = ops.get(op) else {
                return Search::OutOfSteps;
            };
            let mut cands = model.step(&s.state, &o.input, &o.output);
            if o.ret.is_none() {
                // A maybe-applied op that changes nothing here is the same
                // as one never applied: not worth a branch.
                cands.retain(|c| *c != s.state);
            }
            let old = s.state.clone();
            cur = if s.enter(op, old, cands.into_iter()) {
                pass2 = false;
                at(&s.list.next, s.list.head)
            } else {
                at(&s.list.next, node)
            };
            continue;
        }
        // A return entry (or, defensively, the end of the list): the op
        // returning here should have been linearized already. Try the
        // maybe-applied candidates, then backtrack.
        if !pass2 {
            pass2 = true;
            cur = at(&s.list.next, s.list.head);
            continue;
        }
        let Some(f) = s.leave() else {
            return Search::Fail {
                prefix: s.best,
                state: s.best_state,
            };
        };
        let Frame { op, old, rest } = f;
        // Resume the pass the popped op was tried in, after it.
        pass2 = s.lazy(op);
        cur = if s.enter(op, old, rest) {
            pass2 = false;
            at(&s.list.next, s.list.head)
        } else {
            at(&s.list.next, at(&s.list.call_node, op))
        };
    }
}
