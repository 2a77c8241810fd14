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
//!
//! Leases: the state also holds the set of live leases, and each key the
//! lease it is attached to (a put without a lease detaches it, a delete
//! drops it). A lease is interned as a pseudo-key (`\0lease/<id>`), so
//! the partitioning joins a lease with every key ever attached to it: a
//! revoke deletes them all in one revision, which must be seen by one search.
//! Grant adds a live lease; revoke and expiry (a maybe-applied op the
//! harness adds at the earliest instant the lease may expire) delete its
//! keys (one revision bump if there were any) and end it; a put with a
//! lease needs it live (else the answer must be `lease not found`); a
//! keepalive or TimeToLive reporting TTL > 0 needs it live (TimeToLive:
//! with exactly the keys it reports), a keepalive reporting TTL <= 0 or
//! `lease not found` needs it gone.

use std::collections::HashMap;

use crate::history::{CompareOp, CompareTarget, Input, OpResult, Operation, Output, TxnOp};

/// A key's current value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Entry {
    pub(crate) value: u32,
    /// The lease it is attached to (its pseudo-key id), or [`NO_LEASE`].
    pub(crate) lease: u32,
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
    /// Live leases (pseudo-key ids), sorted.
    pub(crate) leases: Vec<u32>,
}

fn lop_lease(l: LOp) -> u32 {
    match l {
        LOp::Grant(x)
        | LOp::Revoke(x)
        | LOp::Expire(x)
        | LOp::KeepAlive(x)
        | LOp::TimeToLive(x) => x,
    }
}

/// [`Entry::lease`] of a key attached to no lease.
pub(crate) const NO_LEASE: u32 = u32::MAX;

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
    pub(crate) fn alive(&self, l: u32) -> bool {
        self.leases.binary_search(&l).is_ok()
    }
    /// The keys attached to lease `l`, sorted.
    fn attached(&self, l: u32) -> Vec<u32> {
        self.kvs
            .iter()
            .filter(|(_, e)| e.lease == l)
            .map(|(k, _)| *k)
            .collect()
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
    /// Put attached to a lease: key, value, lease.
    PutL(u32, u32, u32),
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

/// A lease request (lease pseudo-key ids).
#[derive(Clone, Copy, Debug)]
pub(crate) enum LOp {
    Grant(u32),
    Revoke(u32),
    Expire(u32),
    KeepAlive(u32),
    TimeToLive(u32),
}

#[derive(Clone, Debug)]
pub(crate) enum CInput {
    Single(KOp),
    Lease(LOp),
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
    /// A lease grant or revoke that succeeded.
    Lease {
        rev: Option<i64>,
    },
    /// `requested lease not found`.
    NoLease,
    /// A keepalive's or TimeToLive's TTL (and attached keys, sorted).
    LeaseTtl {
        ttl: i64,
        keys: Option<Vec<u32>>,
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
            COut::Unknown | COut::NoLease | COut::LeaseTtl { .. } => None,
            // A revoke may or may not write: `header` is a safe bound.
            COut::Lease { rev } => *rev,
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
                    CInput::Single(_) | CInput::Lease(_) => &[],
                };
                let puts = branch
                    .iter()
                    .any(|o| matches!(o, KOp::Put(..) | KOp::PutL(..)));
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
    let lease_id = |t: &mut Tables, l: i64| t.keys.id(format!("\0lease/{l:x}").as_bytes());
    let input = match &op.input {
        Input::PutLease { key, value, lease } => {
            let k = t.keys.id(key);
            let l = lease_id(t, *lease);
            keys.extend([k, l]);
            CInput::Single(KOp::PutL(k, t.values.id(value), l))
        }
        Input::LeaseGrant { lease, .. }
        | Input::LeaseRevoke { lease }
        | Input::LeaseExpire { lease }
        | Input::LeaseKeepAlive { lease }
        | Input::LeaseTimeToLive { lease } => {
            let l = lease_id(t, *lease);
            keys.push(l);
            CInput::Lease(match &op.input {
                Input::LeaseGrant { .. } => LOp::Grant(l),
                Input::LeaseRevoke { .. } => LOp::Revoke(l),
                Input::LeaseExpire { .. } => LOp::Expire(l),
                Input::LeaseKeepAlive { .. } => LOp::KeepAlive(l),
                _ => LOp::TimeToLive(l),
            })
        }
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
    if matches!(op.input, Input::LeaseExpire { .. }) && op.ret.is_some() {
        return Err("a lease expiry has no return".into());
    }
    let output = if op.ret.is_none() {
        COut::Unknown
    } else {
        match (&op.input, &op.output) {
            (_, Output::Unknown) => COut::Unknown,
            (
                Input::PutLease { .. } | Input::LeaseRevoke { .. } | Input::LeaseKeepAlive { .. },
                Output::LeaseNotFound,
            ) => COut::NoLease,
            (Input::LeaseTimeToLive { .. }, Output::LeaseNotFound) => COut::NoLease,
            (Input::PutLease { .. }, Output::Put { revision }) => COut::Single {
                res: KRes::Put,
                rev: *revision,
            },
            (Input::LeaseGrant { .. } | Input::LeaseRevoke { .. }, Output::Lease { revision }) => {
                COut::Lease { rev: *revision }
            }
            (
                Input::LeaseKeepAlive { .. } | Input::LeaseTimeToLive { .. },
                Output::LeaseTtl { ttl, keys },
            ) => COut::LeaseTtl {
                ttl: *ttl,
                keys: keys.as_ref().map(|ks| {
                    let mut ids: Vec<u32> = ks.iter().map(|k| t.keys.id(k)).collect();
                    ids.sort_unstable();
                    ids.dedup();
                    ids
                }),
            },
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
            leases: Vec::new(),
        }
    }

    /// Checks a header revision against a request that moved the store
    /// from `before` to `st` (`st.rev` already bumped if it wrote): exact
    /// equality, or a lower bound the header raises.
    fn header(&self, mut st: State, hdr: Option<i64>) -> Option<State> {
        match hdr {
            None => Some(st),
            Some(h) if self.exact => (h == st.rev).then_some(st),
            Some(h) if h < st.rev => None,
            Some(h) => {
                st.rev = h;
                Some(st)
            }
        }
    }

    /// Ends lease `l` (live in `s`): its keys deleted in one revision.
    fn end_lease(&self, s: &State, l: u32, hdr: Option<i64>) -> Option<State> {
        let mut st = s.clone();
        let before = st.kvs.len();
        st.kvs.retain(|(_, e)| e.lease != l);
        if st.kvs.len() != before {
            st.rev = st.rev.saturating_add(1);
        }
        st.leases.retain(|&x| x != l);
        self.header(st, hdr)
    }

    fn lease_step(&self, s: &State, lop: LOp, out: &COut) -> Vec<State> {
        let one = |o: Option<State>| o.into_iter().collect::<Vec<_>>();
        if self.exact {
            return self.lease_step_exact(s, lop, out);
        }
        match (lop, out) {
            (LOp::Grant(l), COut::Unknown | COut::Lease { .. }) => {
                if s.alive(l) {
                    return Vec::new();
                }
                let mut st = s.clone();
                if let Err(i) = st.leases.binary_search(&l) {
                    st.leases.insert(i, l);
                }
                let hdr = match out {
                    COut::Lease { rev } => *rev,
                    _ => None,
                };
                one(self.header(st, hdr))
            }
            (LOp::Revoke(l), COut::Unknown | COut::Lease { .. })
            | (LOp::Expire(l), COut::Unknown) => {
                if !s.alive(l) {
                    return Vec::new();
                }
                let hdr = match out {
                    COut::Lease { rev } => *rev,
                    _ => None,
                };
                one(self.end_lease(s, l, hdr))
            }
            (LOp::Revoke(l) | LOp::KeepAlive(l) | LOp::TimeToLive(l), COut::NoLease) => {
                if s.alive(l) {
                    Vec::new()
                } else {
                    vec![s.clone()]
                }
            }
            (LOp::KeepAlive(_) | LOp::TimeToLive(_), COut::Unknown) => vec![s.clone()],
            (LOp::KeepAlive(l), COut::LeaseTtl { ttl, .. }) => {
                if s.alive(l) == (*ttl > 0) {
                    vec![s.clone()]
                } else {
                    Vec::new()
                }
            }
            (LOp::TimeToLive(l), COut::LeaseTtl { ttl, keys }) => {
                if *ttl <= 0 {
                    return vec![s.clone()];
                }
                if !s.alive(l) || keys.as_ref().is_some_and(|k| *k != s.attached(l)) {
                    return Vec::new();
                }
                vec![s.clone()]
            }
            _ => Vec::new(),
        }
    }

    /// Leases in exact mode (whole history), which follows the per-key
    /// check: that one checked lease lifetimes, so here mostly what moves the
    /// revision is modelled. No live set: maybe-applied grants, and revokes
    /// or expiries that delete nothing, would each double the states without
    /// ever touching a revision, and the search would try every subset of
    /// them at every dead end. Instead `State::leases` holds the leases known
    /// dead: ended by an acknowledged revoke, or by a maybe-applied revoke or
    /// an expiry that deleted keys (one revision); a maybe-applied one that
    /// would delete nothing is left out. A keepalive or TimeToLive answering
    /// TTL > 0, or a put with the lease, needs it not dead: that refutes an
    /// expiry placed too early as soon as the lease is used again, not only
    /// when its keys are read. Everything else about leases is accepted, so
    /// this admits at least the orders the lease rules do: it never invents a
    /// violation.
    fn lease_step_exact(&self, s: &State, lop: LOp, out: &COut) -> Vec<State> {
        let l = lop_lease(lop);
        let has_keys = s.kvs.iter().any(|(_, e)| e.lease == l);
        let dead = s.alive(l); // `leases` is the dead set here
        let kill = |hdr: Option<i64>| -> Vec<State> {
            let mut st = s.clone();
            let before = st.kvs.len();
            st.kvs.retain(|(_, e)| e.lease != l);
            if st.kvs.len() != before {
                st.rev = st.rev.saturating_add(1);
            }
            if let Err(i) = st.leases.binary_search(&l) {
                st.leases.insert(i, l);
            }
            self.header(st, hdr).into_iter().collect()
        };
        match (lop, out) {
            // Maybe-applied and deleting nothing: left out.
            (LOp::Grant(_) | LOp::Revoke(_) | LOp::Expire(_), COut::Unknown) if !has_keys => {
                Vec::new()
            }
            (LOp::Grant(_), COut::Lease { rev }) => {
                self.header(s.clone(), *rev).into_iter().collect()
            }
            (LOp::Revoke(_) | LOp::Expire(_), COut::Unknown) => kill(None),
            (LOp::Revoke(_), COut::Lease { rev }) => kill(*rev),
            (LOp::KeepAlive(_) | LOp::TimeToLive(_), COut::LeaseTtl { ttl, .. })
                if *ttl > 0 && dead =>
            {
                Vec::new()
            }
            (LOp::KeepAlive(_) | LOp::TimeToLive(_), _) | (LOp::Revoke(_), COut::NoLease) => {
                vec![s.clone()]
            }
            _ => Vec::new(),
        }
    }

    /// A put with a lease: applied if the lease is live, else `not found`
    /// (exact mode: if it is not known dead; see [`Self::lease_step_exact`]).
    fn put_lease(&self, s: &State, kop: KOp, l: u32, out: &COut) -> Vec<State> {
        let alive = if self.exact { !s.alive(l) } else { s.alive(l) };
        match out {
            COut::NoLease if !alive || self.exact => vec![s.clone()],
            COut::Unknown if alive => self
                .apply(s.clone(), std::slice::from_ref(&kop), None, None)
                .into_iter()
                .collect(),
            COut::Single { res, rev } if alive => self
                .apply(
                    s.clone(),
                    std::slice::from_ref(&kop),
                    Some(std::slice::from_ref(res)),
                    *rev,
                )
                .into_iter()
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Every state the op can lead to from `s` given its output; empty if
    /// the output is impossible from `s`.
    pub(crate) fn step(&self, s: &State, input: &CInput, out: &COut) -> Vec<State> {
        match input {
            CInput::Lease(lop) => self.lease_step(s, *lop, out),
            CInput::Single(kop @ KOp::PutL(_, _, l)) => self.put_lease(s, *kop, *l, out),
            CInput::Single(kop) => {
                let (res, hdr) = match out {
                    COut::Unknown => (None, None),
                    COut::Single { res, rev } => (Some(std::slice::from_ref(res)), *rev),
                    _ => return Vec::new(),
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
                    _ => return Vec::new(),
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
                KOp::Put(k, v) | KOp::PutL(k, v, _) => {
                    if !matches!(res, None | Some(KRes::Put)) {
                        return None;
                    }
                    st.set(
                        k,
                        Entry {
                            value: v,
                            lease: match *op {
                                KOp::PutL(_, _, l) => l,
                                _ => NO_LEASE,
                            },
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
