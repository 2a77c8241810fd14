//! Linearizability checker for recorded histories of an etcd-like KV store.
//!
//! The robustness suite records every client request against a running
//! cluster (when it was sent, when and what it answered, or that it failed)
//! and asks [`check`] whether some total order of the requests exists that
//! (1) respects real time (an op that returned before another was sent comes
//! first) and (2) is a legal run of the sequential KV spec ([`model`]). If
//! none exists, the cluster broke linearizability, and the answer says where.
//!
//! # Algorithm and cost
//!
//! Wing & Gong's search with Lowe's improvements ("Testing for
//! linearizability", 2017), as porcupine implements it for etcd's suite:
//! a time-sorted linked list of call/return entries, depth-first choice of
//! the next op to linearize among those whose call precedes the first
//! pending return (ops that returned first, then maybe-applied lease
//! requests and expiries), backtracking, and memoization of every explored
//! (linearized set, model state) pair as a 128-bit fingerprint ([`wgl`]:
//! memory per explored pair does not grow with the history; a maybe-applied
//! op that would change nothing is not branched on). The worst case is
//! exponential (the problem is NP-complete), but the memo bounds the work by
//! the number of distinct (set, state) pairs, which for a history with at most
//! `c` concurrent clients is about `n * 2^c * states`: with 8 clients, linear
//! in practice. Before searching, the history is split by key
//! (P-compositionality, Horn & Kroening 2015; [`partition`]): each part is
//! searched alone, smallest first, and the smallest failing part is reported.
//! A step budget ([`Options::max_steps`]) turns a blow-up into
//! [`Outcome::Unknown`] instead of a hang.
//!
//! # The model's rules
//!
//! State is `key -> (value, mod_revision)` and the store's revision (empty at
//! [`Options::initial_revision`], 1 for a fresh etcd). Put always writes;
//! delete writes if the key exists; a txn evaluates its one compare (a value
//! compare on a missing key is false, a missing key's mod revision is 0, as in
//! etcd) and applies the chosen branch in order, its gets seeing its own
//! earlier writes. A request that wrote anything bumps the revision by exactly
//! one and stamps the keys it wrote with it. Every reported field is checked:
//! values read, `deleted` counts, txn `succeeded` and per-op results,
//! mod revisions, and the header revision (the revision after the request).
//!
//! A request that failed or timed out (`ret: None`) may or may not have been
//! applied, at any time after its call: its return is placed at +inf and the
//! search may linearize it (with any output the model allows) or leave it
//! out. The search succeeds once every *returned* request is placed.
//!
//! Two modes, because the global revision couples all keys:
//! - [`Mode::PerKey`] (default, fast): one search per partition of keys
//!   (measured, release: 10,000 ops over 100 keys from 8 clients with 3%
//!   failed requests in 8-10 ms; an injected stale read found in 4-8 ms). A
//!   partition does not see the other keys' writes, so revisions are only
//!   checked as lower bounds: header revisions never go backwards within a
//!   partition, each write's header is above everything seen before it, a key's
//!   mod revision is exact once reported and a read must report it. Values
//!   are checked exactly.
//! - [`Mode::Whole`] (exact, slower, for small histories): first the
//!   per-key check (a necessary condition: its violations are reported as
//!   found in `PerKey` mode), then one search over the whole history where
//!   every header and mod revision must equal the model's exactly. This
//!   assumes the recorded clients are the only writers. Failed writes that
//!   were never applied make this search branch (which of them filled a
//!   revision gap is only settled when their key is read again), so a
//!   revision-only violation deep in a long history with many failed writes
//!   may exhaust the budget: the answer is then [`Outcome::Unknown`], never a
//!   wrong verdict. Measured: 2,000 and 5,000 linearizable ops (20 keys, 8
//!   clients, 3% failed) in 22 ms and 0.2 s; 10,000 ops over 100 keys
//!   exhausted the budget. 10^5 ops over 100 keys: per-key decides in about
//!   a second (debug build, idle machine: a few seconds), whole mode stops
//!   at its budget (test `hundred_thousand_ops_per_key_and_whole_mode_bounded`).
//!   A refutation is the costly case: every maybe-applied op pending where
//!   a violation is must be tried at every earlier point, so a violation in a
//!   partition with hundreds of them may come back undecided.
//!
//! Leases ([`Input::LeaseGrant`] and the other lease requests): the state
//! also holds the live leases and each key's lease. A lease is a pseudo-key
//! to the partitioning, so a lease and every key ever attached to it are
//! searched together (a revoke deletes them all in one revision); the
//! harness should keep each lease's keys apart from other leases' keys, or
//! the partitions grow. A revoke or expiry deletes the attached keys in one
//! revision (none if they are gone) and ends the lease; an expiry is a
//! maybe-applied op from the earliest instant the lease may expire, which
//! the caller supplies ([`Input::LeaseExpire`]). A put with a lease needs it
//! live, else its answer must be `lease not found`; a keepalive or
//! TimeToLive reporting TTL > 0 needs it live (and TimeToLive the exact
//! attached keys), a keepalive reporting TTL 0 or not found needs it gone.
//! Whole mode then models leases only as far as revisions go (see
//! `model::Model::lease_step_exact`).
//!
//! Not checked: serializable reads (they may legitimately be stale; record
//! only linearizable reads), ranges, create revision and version, lease
//! TTL values, watches, and per-client monotonicity of revisions. Keys the
//! history never wrote are assumed absent at the start.
//!
//! # Why our own crate
//!
//! Evaluated on crates.io (`cargo search` failed against the registry mirror
//! with a 404, so candidates were looked up by name with `cargo info`):
//! - `stateright` 0.31 has a `LinearizabilityTester`, but it is built for its
//!   model checker: histories are fed as per-thread invoke/return events
//!   without timestamps, it searches permutations recursively without
//!   memoization or partitioning (exponential on thousands of ops), has no
//!   notion of a maybe-applied op with an unknown output, and brings an actor
//!   runtime with an HTTP explorer (`tiny_http`, `dashmap`, `parking_lot`...).
//! - `lincheck` 0.2 tests in-memory concurrent data structures by running
//!   them under `loom` with `proptest`; it cannot take a recorded history.
//! - `porcupine` on crates.io is an unrelated Win32 wrapper; the Go
//!   porcupine that etcd uses has no Rust port.
//!
//! None checks a recorded history with maybe-applied operations, so this is a
//! small implementation of the published algorithm, in our own words.
//!
//! # Layout
//!
//! - [`history`]: the recorded [`Operation`]s (public input).
//! - [`model`]: interning of keys/values and the sequential spec.
//! - [`partition`]: union-find of keys into independent parts.
//! - [`wgl`]: the search.
//! - this file: [`check`], [`Options`], [`Outcome`], [`Violation`].

pub mod history;
pub mod model;
pub mod partition;
pub mod wgl;

use std::fmt;

pub use history::{
    Compare, CompareOp, CompareTarget, Input, OpResult, Operation, Output, Txn, TxnOp,
};

use model::{COp, Model, State, Tables};

/// How revisions are checked (see the crate doc).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// Partition by key; revisions checked as lower bounds.
    #[default]
    PerKey,
    /// One partition; revisions checked exactly.
    Whole,
}

/// Knobs of [`check`].
#[derive(Clone, Debug)]
pub struct Options {
    pub mode: Mode,
    /// Total model steps over all partitions before giving up with
    /// [`Outcome::Unknown`].
    pub max_steps: u64,
    /// The store's revision before the history (1 for a fresh etcd); its
    /// keys are assumed empty.
    pub initial_revision: i64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            mode: Mode::PerKey,
            max_steps: 20_000_000,
            initial_revision: 1,
        }
    }
}

/// The verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Linearizable,
    Violation(Violation),
    /// The step budget ran out before every partition was decided (and no
    /// decided one failed). `keys` are those of the undecided partitions.
    Unknown {
        keys: Vec<Vec<u8>>,
        steps: u64,
    },
    /// The history itself is inconsistent (an op returning before its call,
    /// an output of the wrong kind): `index` is the op's position.
    Malformed {
        index: usize,
        reason: String,
    },
}

/// A non-linearizable partition, with what a human needs to see why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    pub mode: Mode,
    /// The partition's keys.
    pub keys: Vec<Vec<u8>>,
    /// The partition's ops (indices into the history, in history order).
    pub ops: Vec<usize>,
    /// The longest linearizable prefix found, in linearization order.
    pub prefix: Vec<usize>,
    /// The store after that prefix, rendered.
    pub state: String,
    /// The op that had to come next (the earliest return not yet
    /// linearized) and could not.
    pub blocked: Option<usize>,
    /// Ops concurrent with that point that could have gone next, none
    /// leading to a full linearization.
    pub candidates: Vec<usize>,
    /// Rendered ops by index, for `Display`.
    shown: Vec<(usize, String)>,
}

impl Violation {
    fn show(&self, i: usize) -> &str {
        self.shown
            .iter()
            .find(|(j, _)| *j == i)
            .map_or("?", |(_, s)| s.as_str())
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys: Vec<String> = self.keys.iter().map(|k| history::show(k)).collect();
        writeln!(
            f,
            "not linearizable ({:?} mode): keys [{}], {} ops in the partition",
            self.mode,
            keys.join(", "),
            self.ops.len()
        )?;
        let tail = self.prefix.len().saturating_sub(10);
        writeln!(
            f,
            "longest linearizable prefix: {} ops{}",
            self.prefix.len(),
            if tail > 0 { " (last 10 shown)" } else { "" }
        )?;
        for &i in self.prefix.iter().skip(tail) {
            writeln!(f, "  #{i} {}", self.show(i))?;
        }
        writeln!(f, "store after it: {}", self.state)?;
        if let Some(b) = self.blocked {
            writeln!(
                f,
                "must come next (returned earliest): #{b} {}",
                self.show(b)
            )?;
        }
        if !self.candidates.is_empty() {
            writeln!(f, "none of these fits next:")?;
            for &i in &self.candidates {
                writeln!(f, "  #{i} {}", self.show(i))?;
            }
        }
        Ok(())
    }
}

/// Checks `history` for linearizability against the KV model.
pub fn check(history: &[Operation], opts: &Options) -> Outcome {
    let mut tables = Tables::default();
    let mut ops = Vec::with_capacity(history.len());
    for (index, op) in history.iter().enumerate() {
        match model::compile(op, &mut tables) {
            Ok(c) => ops.push(c),
            Err(reason) => return Outcome::Malformed { index, reason },
        }
    }
    // Whole mode first runs the per-key check: restricting a whole-history
    // linearization to one partition gives a per-key one, so a per-key
    // violation is a whole-history violation too, and it is found (and
    // reported on a small partition) far faster than the exact search, which
    // must refute every placement of the maybe-applied writes before it.
    if opts.mode == Mode::Whole {
        let per_key = Options {
            mode: Mode::PerKey,
            ..opts.clone()
        };
        if let v @ Outcome::Violation(_) = check_compiled(history, &ops, &tables, &per_key) {
            return v;
        }
    }
    check_compiled(history, &ops, &tables, opts)
}

fn check_compiled(history: &[Operation], ops: &[COp], tables: &Tables, opts: &Options) -> Outcome {
    let parts = match opts.mode {
        Mode::PerKey => partition::by_key(ops, tables.keys.names.len()),
        Mode::Whole if ops.is_empty() => Vec::new(),
        Mode::Whole => vec![(0..ops.len()).collect()],
    };
    let model = Model {
        exact: opts.mode == Mode::Whole,
        values: &tables.values.names,
    };
    let mut steps = opts.max_steps;
    let mut undecided: Vec<Vec<u8>> = Vec::new();
    for part in &parts {
        let sub: Vec<&COp> = part.iter().filter_map(|&i| ops.get(i)).collect();
        let init = model.init(opts.initial_revision);
        match wgl::search(&sub, &model, init, &mut steps) {
            wgl::Search::Ok => {}
            wgl::Search::OutOfSteps => {
                undecided.extend(part_keys(&sub, tables));
                // Give the remaining partitions a chance with what is left:
                // nothing, so they are undecided too.
            }
            wgl::Search::Fail { prefix, state } => {
                return Outcome::Violation(violation(
                    history, opts.mode, part, &sub, prefix, &state, tables,
                ));
            }
        }
    }
    if undecided.is_empty() {
        Outcome::Linearizable
    } else {
        undecided.sort();
        undecided.dedup();
        Outcome::Unknown {
            keys: undecided,
            steps: opts.max_steps,
        }
    }
}

fn part_keys(sub: &[&COp], tables: &Tables) -> Vec<Vec<u8>> {
    let mut ids: Vec<u32> = sub.iter().flat_map(|o| o.keys.iter().copied()).collect();
    ids.sort_unstable();
    ids.dedup();
    let mut keys: Vec<Vec<u8>> = ids
        .iter()
        .filter_map(|&k| tables.keys.names.get(k as usize).cloned())
        .collect();
    keys.sort();
    keys
}

fn render_state(s: &State, tables: &Tables, exact: bool) -> String {
    let name = |t: &model::Interner, i: u32| {
        t.names
            .get(i as usize)
            .map_or_else(|| "?".into(), |b| history::show(b))
    };
    let kvs: Vec<String> = s
        .kvs
        .iter()
        .map(|(k, e)| {
            format!(
                "{}={}@{}{}{}",
                name(&tables.keys, *k),
                name(&tables.values, e.value),
                if e.exact { "" } else { ">=" },
                e.mod_rev,
                if e.lease == model::NO_LEASE {
                    String::new()
                } else {
                    format!(" ({})", name(&tables.keys, e.lease))
                }
            )
        })
        .collect();
    let leases: Vec<String> = s.leases.iter().map(|&l| name(&tables.keys, l)).collect();
    format!(
        "{{{}}} revision {}{}{}",
        kvs.join(", "),
        if exact { "" } else { ">=" },
        s.rev,
        if leases.is_empty() {
            String::new()
        } else {
            format!(", live leases [{}]", leases.join(", "))
        }
    )
}

#[allow(clippy::too_many_arguments)] // one call site, all needed
fn violation(
    history: &[Operation],
    mode: Mode,
    part: &[usize],
    sub: &[&COp],
    prefix: Vec<usize>,
    state: &State,
    tables: &Tables,
) -> Violation {
    let global = |local: usize| part.get(local).copied().unwrap_or(usize::MAX);
    let mut done = vec![false; sub.len()];
    for &l in &prefix {
        if let Some(d) = done.get_mut(l) {
            *d = true;
        }
    }
    // The op that had to be linearized next: earliest return not done.
    let blocked = sub
        .iter()
        .enumerate()
        .filter(|(l, o)| !done.get(*l).copied().unwrap_or(true) && o.ret.is_some())
        .min_by_key(|(_, o)| o.ret)
        .map(|(l, o)| (l, o.ret.unwrap_or(u64::MAX)));
    let mut candidates = Vec::new();
    if let Some((b, deadline)) = blocked {
        for (l, o) in sub.iter().enumerate() {
            if l != b && !done.get(l).copied().unwrap_or(true) && o.call <= deadline {
                candidates.push(global(l));
            }
        }
    }
    let blocked = blocked.map(|(b, _)| global(b));
    let prefix: Vec<usize> = prefix.into_iter().map(global).collect();
    let mut shown = Vec::new();
    let tail = prefix.len().saturating_sub(10);
    for &i in prefix
        .iter()
        .skip(tail)
        .chain(blocked.iter())
        .chain(candidates.iter())
    {
        if let Some(op) = history.get(i) {
            shown.push((i, op.to_string()));
        }
    }
    Violation {
        mode,
        keys: part_keys(sub, tables),
        ops: part.to_vec(),
        prefix,
        state: render_state(state, tables, mode == Mode::Whole),
        blocked,
        candidates,
        shown,
    }
}
