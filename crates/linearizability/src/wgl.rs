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

use std::collections::{BTreeMap, HashSet};

use crate::model::{COp, Model, State};

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

/// A fixed-size bit set of linearized ops.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Bits(Box<[u64]>);

impl Bits {
    fn new(n: usize) -> Self {
        Bits(vec![0; n.div_ceil(64)].into_boxed_slice())
    }
    fn flip(&mut self, i: usize) {
        if let Some(w) = self.0.get_mut(i / 64) {
            *w ^= 1 << (i % 64);
        }
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
    seen: HashSet<(Bits, State)>,
    stack: Vec<Frame>,
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
            if s.rev <= limit && self.seen.insert((self.bits.clone(), s.clone())) {
                self.stack.push(Frame {
                    op,
                    old,
                    rest: cands,
                });
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
        state: init,
        bound: ops.iter().map(|o| o.ret.and(o.rev_bound())).collect(),
        bounds: BTreeMap::new(),
    };
    for op in 0..n {
        s.add_bound(op);
    }
    let mut best: (Vec<usize>, State) = (Vec::new(), s.state.clone());
    let mut cur = at(&s.list.next, s.list.head);
    loop {
        if s.pending == 0 {
            return Search::Ok;
        }
        if s.stack.len() > best.0.len() {
            best = (s.stack.iter().map(|f| f.op).collect(), s.state.clone());
        }
        let node = cur;
        if node != NIL && s.list.is_call.get(node).copied().unwrap_or(false) {
            let op = at(&s.list.op, node);
            if *steps == 0 {
                return Search::OutOfSteps;
            }
            *steps -= 1;
            let Some(o) = ops.get(op) else {
                return Search::OutOfSteps;
            };
            let cands = model.step(&s.state, &o.input, &o.output);
            let old = s.state.clone();
            cur = if s.enter(op, old, cands.into_iter()) {
                at(&s.list.next, s.list.head)
            } else {
                at(&s.list.next, node)
            };
            continue;
        }
        // A return entry (or, defensively, the end of the list): the op
        // returning here should have been linearized already. Backtrack.
        let Some(f) = s.leave() else {
            return Search::Fail {
                prefix: best.0,
                state: best.1,
            };
        };
        let Frame { op, old, rest } = f;
        cur = if s.enter(op, old, rest) {
            at(&s.list.next, s.list.head)
        } else {
            at(&s.list.next, at(&s.list.call_node, op))
        };
    }
}
