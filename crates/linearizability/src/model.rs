//! The sequential specification: what one etcd-like store does with one
//! request at a time.
//!
//! Requests are first compiled (`compile`) into an interned form: keys and
//! values become small integers, so a state is a short sorted vector that is
//! cheap to clone, hash and compare, which the search does once per step.
//!
//! State: `key -> (value, mod_revision)` plus the store's revision. A write
//! request (put, delete of a present key, txn whose branch writes anything)
//! bumps the revision by exactly one and stamps every key it writes with the
//! new revision; a delete of nothing and a txn that writes nothing leave it.
//!
//! Two flavours (`Model::exact`):
//! - exact (`Mode::Whole`): the revision is known exactly (starting from
//!   [`crate::Options::initial_revision`]), every header revision and
//!   mod revision must equal the model's.
//! - bounded (`Mode::PerKey`): the model sees only one partition of the
//!   keys, and writes to other partitions bump the revision unseen, so the
//!   revision is a *lower bound*: a read's header must be `>=` it, a write's
//!   header `>` it, and it is raised to each header seen. A key's
//!   mod revision is exact once reported (by the put's header or a read) and
//!   otherwise a lower bound as well.

use std::collections::HashMap;

use crate::history::{CompareOp, CompareTarget, Input, OpResult, Operation, Output, TxnOp};

/// A key's current value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Entry {
    pub(crate) value: u32,
    /// Exact if `exact`, else a lower bound.
    pub(crate) mod_rev: i64,
    pub(crate) exact: bool,
}

/// The store: present keys sorted by id, and the revision (exact or lower
/// bound, see the module doc).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct State {
    pub(crate) kvs: Vec<(u32, Entry)>,
    pub(crate) rev: i64,
}

impl State {
    fn get(&self, k: u32) -> Option<Entry> {
        self.kvs
            .binary_search_by_key(&k, |e| e.0)
            .ok()
            .and_then(|i| self.kvs.get(i))
            .map(|e| e.1)
    }
    fn set(&mut self, k: u32, e: Entry) {
        match self.kvs.binary_search_by_key(&k, |e| e.0) {
            Ok(i) => {
                if let Some(slot) = self.kvs.get_mut(i) {
                    slot.1 = e;
                }
            }
            Err(i) => self.kvs.insert(i, (k, e)),
        }
    }
    fn remove(&mut self, k: u32) -> bool {
        match self.kvs.binary_search_by_key(&k, |e| e.0) {
            Ok(i) => {
                self.kvs.remove(i);
                true
            }
            Err(_) => false,
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum KOp {
    Put(u32, u32),
    Get(u32),
    Del(u32),
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum KRes {
    Put,
    Get {
        value: Option<u32>,
        mod_rev: Option<i64>,
    },
    Del {
        deleted: Option<u64>,
    },
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum Cmp {
    Value(CompareOp, u32),
    ModRev(CompareOp, i64),
}

#[derive(Clone, Debug)]
pub(crate) enum CInput {
    Single(KOp),
    Txn {
        key: u32,
        cmp: Cmp,
        then: Vec<KOp>,
        els: Vec<KOp>,
    },
}

#[derive(Clone, Debug)]
pub(crate) enum COut {
    Unknown,
    Single {
        res: KRes,
        rev: Option<i64>,
    },
    Txn {
        succeeded: bool,
        results: Vec<KRes>,
        rev: Option<i64>,
    },
}

/// One compiled operation.
#[derive(Clone, Debug)]
pub(crate) struct COp {
    pub(crate) call: u64,
    /// `None`: maybe applied, returns "at infinity".
    pub(crate) ret: Option<u64>,
    pub(crate) input: CInput,
    pub(crate) output: COut,
    pub(crate) keys: Vec<u32>,
}

impl COp {
    /// The highest store revision this op can be linearized after, if its
    /// header revision is known: revisions never decrease, so a state above
    /// it can never reach this op. A put (or a txn whose taken branch puts)
    /// bumps the revision, so it needs `header - 1`; anything else at most
    /// `header`. Only meaningful for ops that returned.
    pub(crate) fn rev_bound(&self) -> Option<i64> {
        match &self.output {
            COut::Unknown => None,
            COut::Single { res, rev } => {
                rev.map(|h| h.saturating_sub(i64::from(matches!(res, KRes::Put))))
            }
            COut::Txn { succeeded, rev, .. } => {
                let branch = match &self.input {
                    CInput::Txn { then, els, .. } => {
                        if *succeeded {
                            then.as_slice()
                        } else {
                            els.as_slice()
                        }
                    }
                    CInput::Single(_) => &[],
                };
                let puts = branch.iter().any(|o| matches!(o, KOp::Put(..)));
                rev.map(|h| h.saturating_sub(i64::from(puts)))
            }
        }
    }
}

/// Keys and values as small integers.
#[derive(Default, Debug)]
pub(crate) struct Interner {
    ids: HashMap<Vec<u8>, u32>,
    pub(crate) names: Vec<Vec<u8>>,
}

impl Interner {
    pub(crate) fn id(&mut self, b: &[u8]) -> u32 {
        if let Some(&i) = self.ids.get(b) {
            return i;
        }
        let i = self.names.len() as u32;
        self.names.push(b.to_vec());
        self.ids.insert(b.to_vec(), i);
        i
    }
}

/// Interned keys and values of a compiled history.
#[derive(Default, Debug)]
pub(crate) struct Tables {
    pub(crate) keys: Interner,
    pub(crate) values: Interner,
}

/// Compiles one operation; `Err` names what is malformed.
pub(crate) fn compile(op: &Operation, t: &mut Tables) -> Result<COp, String> {
    if let Some(ret) = op.ret
        && ret < op.call
    {
        return Err(format!("returns ({ret}) before it is called ({})", op.call));
    }
    let mut keys = Vec::new();
    let kop = |o: &TxnOp, t: &mut Tables, keys: &mut Vec<u32>| {
        let k = t.keys.id(o.key());
        keys.push(k);
        match o {
            TxnOp::Put { value, .. } => KOp::Put(k, t.values.id(value)),
            TxnOp::Get { .. } => KOp::Get(k),
            TxnOp::Delete { .. } => KOp::Del(k),
        }
    };
    let input = match &op.input {
        Input::Put { key, value } => CInput::Single(kop(
            &TxnOp::Put {
                key: key.clone(),
                value: value.clone(),
            },
            t,
            &mut keys,
        )),
        Input::Get { key } => CInput::Single(kop(&TxnOp::Get { key: key.clone() }, t, &mut keys)),
        Input::Delete { key } => {
            CInput::Single(kop(&TxnOp::Delete { key: key.clone() }, t, &mut keys))
        }
        Input::Txn(txn) => {
            let key = t.keys.id(&txn.compare.key);
            keys.push(key);
            let cmp = match &txn.compare.target {
                CompareTarget::Value(v) => Cmp::Value(txn.compare.op, t.values.id(v)),
                CompareTarget::ModRevision(r) => Cmp::ModRev(txn.compare.op, *r),
            };
            let then = txn.then.iter().map(|o| kop(o, t, &mut keys)).collect();
            let els = txn.otherwise.iter().map(|o| kop(o, t, &mut keys)).collect();
            CInput::Txn {
                key,
                cmp,
                then,
                els,
            }
        }
    };
    keys.sort_unstable();
    keys.dedup();
    let res = |r: &OpResult, t: &mut Tables| match r {
        OpResult::Put => KRes::Put,
        OpResult::Get {
            value,
            mod_revision,
        } => KRes::Get {
            value: value.as_deref().map(|v| t.values.id(v)),
            mod_rev: *mod_revision,
        },
        OpResult::Delete { deleted } => KRes::Del { deleted: *deleted },
    };
    let output = if op.ret.is_none() {
        COut::Unknown
    } else {
        match (&op.input, &op.output) {
            (_, Output::Unknown) => COut::Unknown,
            (Input::Put { .. }, Output::Put { revision }) => COut::Single {
                res: KRes::Put,
                rev: *revision,
            },
            (
                Input::Get { .. },
                Output::Get {
                    value,
                    mod_revision,
                    revision,
                },
            ) => COut::Single {
                res: res(
                    &OpResult::Get {
                        value: value.clone(),
                        mod_revision: *mod_revision,
                    },
                    t,
                ),
                rev: *revision,
            },
            (Input::Delete { .. }, Output::Delete { deleted, revision }) => COut::Single {
                res: KRes::Del { deleted: *deleted },
                rev: *revision,
            },
            (
                Input::Txn(_),
                Output::Txn {
                    succeeded,
                    results,
                    revision,
                },
            ) => COut::Txn {
                succeeded: *succeeded,
                results: results.iter().map(|r| res(r, t)).collect(),
                rev: *revision,
            },
            _ => return Err("output kind does not match input kind".into()),
        }
    };
    Ok(COp {
        call: op.call,
        ret: op.ret,
        input,
        output,
        keys,
    })
}

/// The sequential spec (see the module doc).
#[derive(Debug)]
pub(crate) struct Model<'a> {
    /// Exact revisions (whole history) or lower bounds (one partition).
    pub(crate) exact: bool,
    /// Value bytes by id, for `<`/`>` value compares.
    pub(crate) values: &'a [Vec<u8>],
}

impl Model<'_> {
    pub(crate) fn init(&self, revision: i64) -> State {
        State {
            kvs: Vec::new(),
            rev: revision,
        }
    }

    /// Every state the op can lead to from `s` given its output; empty if
    /// the output is impossible from `s`.
    pub(crate) fn step(&self, s: &State, input: &CInput, out: &COut) -> Vec<State> {
        match input {
            CInput::Single(kop) => {
                let (res, hdr) = match out {
                    COut::Unknown => (None, None),
                    COut::Single { res, rev } => (Some(std::slice::from_ref(res)), *rev),
                    COut::Txn { .. } => return Vec::new(),
                };
                self.apply(s.clone(), std::slice::from_ref(kop), res, hdr)
                    .into_iter()
                    .collect()
            }
            CInput::Txn {
                key,
                cmp,
                then,
                els,
            } => {
                let (want, results, hdr) = match out {
                    COut::Unknown => (None, None, None),
                    COut::Txn {
                        succeeded,
                        results,
                        rev,
                    } => (Some(*succeeded), Some(results.as_slice()), *rev),
                    COut::Single { .. } => return Vec::new(),
                };
                let mut next = Vec::new();
                for (branch, base) in self.compare(s, *key, *cmp) {
                    if want.is_some_and(|w| w != branch) {
                        continue;
                    }
                    let ops = if branch { then } else { els };
                    if let Some(ns) = self.apply(base, ops, results, hdr) {
                        next.push(ns);
                    }
                }
                next
            }
        }
    }

    /// The possible outcomes of a compare: (result, state refined by it).
    fn compare(&self, s: &State, key: u32, cmp: Cmp) -> Vec<(bool, State)> {
        let entry = s.get(key);
        let decided = |b: bool| vec![(b, s.clone())];
        match cmp {
            Cmp::Value(op, v) => {
                let Some(e) = entry else {
                    return decided(false);
                };
                let (cur, want) = (
                    self.values.get(e.value as usize),
                    self.values.get(v as usize),
                );
                decided(match op {
                    CompareOp::Equal => e.value == v,
                    CompareOp::NotEqual => e.value != v,
                    CompareOp::Less => cur < want,
                    CompareOp::Greater => cur > want,
                })
            }
            Cmp::ModRev(op, r) => {
                let (m, exact) = entry.map_or((0, true), |e| (e.mod_rev, e.exact));
                if exact {
                    return decided(match op {
                        CompareOp::Equal => m == r,
                        CompareOp::NotEqual => m != r,
                        CompareOp::Less => m < r,
                        CompareOp::Greater => m > r,
                    });
                }
                // The true mod revision is some unknown value >= m.
                let pinned = || {
                    let mut ns = s.clone();
                    if let Some(e) = entry {
                        ns.set(
                            key,
                            Entry {
                                mod_rev: r,
                                exact: true,
                                ..e
                            },
                        );
                    }
                    ns.rev = ns.rev.max(r);
                    ns
                };
                let mut out = Vec::new();
                match op {
                    CompareOp::Equal => {
                        if r >= m {
                            out.push((true, pinned()));
                        }
                        out.push((false, s.clone()));
                    }
                    CompareOp::NotEqual => {
                        out.push((true, s.clone()));
                        if r >= m {
                            out.push((false, pinned()));
                        }
                    }
                    CompareOp::Less => {
                        if m < r {
                            out.push((true, s.clone()));
                        }
                        out.push((false, s.clone()));
                    }
                    CompareOp::Greater => {
                        out.push((true, s.clone()));
                        if m <= r {
                            out.push((false, s.clone()));
                        }
                    }
                }
                out
            }
        }
    }

    /// Applies a list of ops atomically (one revision bump if anything
    /// changed), checking each reported result and the header revision.
    fn apply(
        &self,
        mut st: State,
        ops: &[KOp],
        results: Option<&[KRes]>,
        hdr: Option<i64>,
    ) -> Option<State> {
        if results.is_some_and(|r| r.len() != ops.len()) {
            return None;
        }
        let before = st.rev;
        // The revision writes are stamped with (a lower bound if not exact).
        let (wrev, wexact) = match (self.exact, hdr) {
            (true, _) => (before.saturating_add(1), true),
            (false, Some(h)) => (h, true),
            (false, None) => (before.saturating_add(1), false),
        };
        let mut changed = false;
        let mut max_seen = i64::MIN;
        for (i, op) in ops.iter().enumerate() {
            let res = results.and_then(|r| r.get(i));
            match *op {
                KOp::Put(k, v) => {
                    if !matches!(res, None | Some(KRes::Put)) {
                        return None;
                    }
                    st.set(
                        k,
                        Entry {
                            value: v,
                            mod_rev: wrev,
                            exact: wexact,
                        },
                    );
                    changed = true;
                }
                KOp::Get(k) => match res {
                    None => {}
                    Some(&KRes::Get { value, mod_rev }) => {
                        let cur = st.get(k);
                        match (cur, value) {
                            (None, None) => {
                                if mod_rev.is_some_and(|m| m != 0) {
                                    return None;
                                }
                            }
                            (Some(e), Some(v)) if e.value == v => {
                                if let Some(m) = mod_rev {
                                    if e.exact {
                                        if m != e.mod_rev {
                                            return None;
                                        }
                                    } else {
                                        if m < e.mod_rev {
                                            return None;
                                        }
                                        st.set(
                                            k,
                                            Entry {
                                                mod_rev: m,
                                                exact: true,
                                                ..e
                                            },
                                        );
                                    }
                                    max_seen = max_seen.max(m);
                                }
                            }
                            _ => return None,
                        }
                    }
                    Some(_) => return None,
                },
                KOp::Del(k) => {
                    let existed = st.remove(k);
                    changed |= existed;
                    let ok = match res {
                        None => true,
                        Some(&KRes::Del { deleted }) => {
                            deleted.is_none_or(|d| d == u64::from(existed))
                        }
                        Some(_) => false,
                    };
                    if !ok {
                        return None;
                    }
                }
            }
        }
        let after = if changed {
            before.saturating_add(1)
        } else {
            before
        };
        if self.exact {
            if hdr.is_some_and(|h| h != after) {
                return None;
            }
            st.rev = after;
        } else {
            st.rev = match hdr {
                Some(h) if h < after => return None,
                Some(h) => h,
                None => after,
            };
        }
        // A mod revision read can never exceed the revision it was read at.
        if max_seen > st.rev {
            if self.exact || hdr.is_some() {
                return None;
            }
            st.rev = max_seen;
        }
        Some(st)
    }
}
