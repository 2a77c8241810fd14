//! The recorded history: one [`Operation`] per client request, with the
//! moment it was sent, the moment its answer came back (if it did), what was
//! asked and what was answered.

/// One client request as the robustness harness saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Operation {
    /// Which client sent it (for humans; the checker does not use it).
    pub client: u64,
    /// When the request was sent, in monotonic nanoseconds.
    pub call: u64,
    /// When the answer arrived. `None` means the request failed or timed
    /// out: it may or may not have been applied, and if it was, its
    /// linearization point may be arbitrarily late. Its `output` is ignored.
    pub ret: Option<u64>,
    /// What was asked.
    pub input: Input,
    /// What was answered (ignored when `ret` is `None`).
    pub output: Output,
}

/// A request. Keys and values are bytes, as in etcd.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// Put one key.
    Put { key: Vec<u8>, value: Vec<u8> },
    /// Linearizable single-key read. Serializable reads must not be recorded
    /// here: they may legitimately be stale.
    Get { key: Vec<u8> },
    /// Delete one key.
    Delete { key: Vec<u8> },
    /// A transaction with one compare.
    Txn(Txn),
    /// Put one key attached to a lease (etcd's `lease` field). Answered
    /// [`Output::Put`], or [`Output::LeaseNotFound`] (a definite failure:
    /// the lease did not exist when it was applied).
    PutLease {
        key: Vec<u8>,
        value: Vec<u8>,
        lease: i64,
    },
    /// LeaseGrant with a client-chosen id (so a maybe-applied grant is
    /// known by its id). Answered [`Output::Lease`].
    LeaseGrant { lease: i64, ttl: i64 },
    /// LeaseRevoke: deletes every key attached to the lease in one revision
    /// (none if it has no keys). Answered [`Output::Lease`] or
    /// [`Output::LeaseNotFound`].
    LeaseRevoke { lease: i64 },
    /// The server revoking an expired lease by itself: same effect as a
    /// revoke. Not a client request: the harness adds one per granted lease
    /// with `call` the earliest instant the lease may expire and `ret: None`
    /// (it may happen at any time after, or never).
    LeaseExpire { lease: i64 },
    /// One keepalive: answered [`Output::LeaseTtl`] (TTL > 0: the lease
    /// existed; TTL <= 0: it did not) or [`Output::LeaseNotFound`].
    LeaseKeepAlive { lease: i64 },
    /// LeaseTimeToLive: answered [`Output::LeaseTtl`]; TTL > 0 means the
    /// lease existed, with exactly `keys` attached if they were asked for.
    /// TTL <= 0 is not checked (an expired lease not yet revoked answers a
    /// negative remaining TTL), [`Output::LeaseNotFound`] means it did not.
    LeaseTimeToLive { lease: i64 },
}

/// `if compare { then } else { otherwise }`, applied atomically.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Txn {
    pub compare: Compare,
    pub then: Vec<TxnOp>,
    pub otherwise: Vec<TxnOp>,
}

/// One compare on one key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Compare {
    pub key: Vec<u8>,
    pub op: CompareOp,
    pub target: CompareTarget,
}

/// The relation between the key's current field and the target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CompareOp {
    Equal,
    NotEqual,
    Less,
    Greater,
}

/// What is compared. As in etcd, a value compare on a missing key is false
/// whatever the relation, and a missing key's mod revision is 0.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CompareTarget {
    Value(Vec<u8>),
    ModRevision(i64),
}

/// One operation inside a transaction branch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxnOp {
    Put { key: Vec<u8>, value: Vec<u8> },
    Get { key: Vec<u8> },
    Delete { key: Vec<u8> },
}

/// An answer. Every field that is `None` is simply not checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// Nothing known about the answer (the op still took effect if it
    /// returned).
    Unknown,
    /// `revision` is the response header's revision: the put's own revision.
    Put { revision: Option<i64> },
    /// `value: None` means the key was absent.
    Get {
        value: Option<Vec<u8>>,
        mod_revision: Option<i64>,
        revision: Option<i64>,
    },
    /// `deleted` is the number of keys deleted (0 or 1).
    Delete {
        deleted: Option<u64>,
        revision: Option<i64>,
    },
    /// `results` has one entry per op of the branch taken.
    Txn {
        succeeded: bool,
        results: Vec<OpResult>,
        revision: Option<i64>,
    },
    /// A lease grant or revoke that succeeded, with its header revision.
    Lease { revision: Option<i64> },
    /// `etcdserver: requested lease not found`: a definite answer (the op
    /// took no effect).
    LeaseNotFound,
    /// A keepalive's or TimeToLive's remaining TTL, and (TimeToLive with
    /// `keys`) the keys attached.
    LeaseTtl {
        ttl: i64,
        keys: Option<Vec<Vec<u8>>>,
    },
}

/// The result of one operation inside a transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpResult {
    Put,
    Get {
        value: Option<Vec<u8>>,
        mod_revision: Option<i64>,
    },
    Delete {
        deleted: Option<u64>,
    },
}

impl Input {
    pub fn put(key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) -> Self {
        Input::Put {
            key: key.into(),
            value: value.into(),
        }
    }
    pub fn get(key: impl Into<Vec<u8>>) -> Self {
        Input::Get { key: key.into() }
    }
    pub fn delete(key: impl Into<Vec<u8>>) -> Self {
        Input::Delete { key: key.into() }
    }
    /// Every key the request names (the compare key first for a txn; none
    /// for a lease request, whose keys are those attached at the time).
    pub fn keys(&self) -> Vec<&[u8]> {
        match self {
            Input::Put { key, .. }
            | Input::Get { key }
            | Input::Delete { key }
            | Input::PutLease { key, .. } => vec![key],
            Input::LeaseGrant { .. }
            | Input::LeaseRevoke { .. }
            | Input::LeaseExpire { .. }
            | Input::LeaseKeepAlive { .. }
            | Input::LeaseTimeToLive { .. } => Vec::new(),
            Input::Txn(t) => {
                let mut v: Vec<&[u8]> = vec![&t.compare.key];
                v.extend(t.then.iter().chain(&t.otherwise).map(TxnOp::key));
                v
            }
        }
    }
}

impl TxnOp {
    pub fn key(&self) -> &[u8] {
        match self {
            TxnOp::Put { key, .. } | TxnOp::Get { key } | TxnOp::Delete { key } => key,
        }
    }
}

/// Bytes for humans: UTF-8 where it is, escapes where not.
pub(crate) fn show(b: &[u8]) -> String {
    b.escape_ascii().to_string()
}

fn show_cmp(op: CompareOp) -> &'static str {
    match op {
        CompareOp::Equal => "==",
        CompareOp::NotEqual => "!=",
        CompareOp::Less => "<",
        CompareOp::Greater => ">",
    }
}

fn show_txn_op(o: &TxnOp) -> String {
    match o {
        TxnOp::Put { key, value } => format!("put {}={}", show(key), show(value)),
        TxnOp::Get { key } => format!("get {}", show(key)),
        TxnOp::Delete { key } => format!("delete {}", show(key)),
    }
}

fn show_opt_val(v: &Option<Vec<u8>>) -> String {
    v.as_deref().map_or_else(|| "<absent>".to_string(), show)
}

fn show_rev(r: Option<i64>) -> String {
    r.map_or_else(|| "?".to_string(), |r| r.to_string())
}

fn show_result(r: &OpResult) -> String {
    match r {
        OpResult::Put => "ok".into(),
        OpResult::Get {
            value,
            mod_revision,
        } => format!("{}@{}", show_opt_val(value), show_rev(*mod_revision)),
        OpResult::Delete { deleted } => format!("deleted {}", show_rev(deleted.map(|d| d as i64))),
    }
}

impl std::fmt::Display for Input {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Input::Put { key, value } => write!(f, "put {}={}", show(key), show(value)),
            Input::Get { key } => write!(f, "get {}", show(key)),
            Input::Delete { key } => write!(f, "delete {}", show(key)),
            Input::PutLease { key, value, lease } => {
                write!(f, "put {}={} lease {lease:x}", show(key), show(value))
            }
            Input::LeaseGrant { lease, ttl } => write!(f, "grant lease {lease:x} ttl {ttl}"),
            Input::LeaseRevoke { lease } => write!(f, "revoke lease {lease:x}"),
            Input::LeaseExpire { lease } => write!(f, "expiry of lease {lease:x}"),
            Input::LeaseKeepAlive { lease } => write!(f, "keepalive lease {lease:x}"),
            Input::LeaseTimeToLive { lease } => write!(f, "timetolive lease {lease:x}"),
            Input::Txn(t) => {
                let target = match &t.compare.target {
                    CompareTarget::Value(v) => format!("value {}", show(v)),
                    CompareTarget::ModRevision(r) => format!("mod_rev {r}"),
                };
                let list =
                    |ops: &[TxnOp]| ops.iter().map(show_txn_op).collect::<Vec<_>>().join("; ");
                write!(
                    f,
                    "txn if {} {} {} then [{}] else [{}]",
                    show(&t.compare.key),
                    show_cmp(t.compare.op),
                    target,
                    list(&t.then),
                    list(&t.otherwise)
                )
            }
        }
    }
}

impl std::fmt::Display for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Output::Unknown => write!(f, "?"),
            Output::Put { revision } => write!(f, "ok rev {}", show_rev(*revision)),
            Output::Get {
                value,
                mod_revision,
                revision,
            } => write!(
                f,
                "{} mod_rev {} rev {}",
                show_opt_val(value),
                show_rev(*mod_revision),
                show_rev(*revision)
            ),
            Output::Delete { deleted, revision } => write!(
                f,
                "deleted {} rev {}",
                show_rev(deleted.map(|d| d as i64)),
                show_rev(*revision)
            ),
            Output::Txn {
                succeeded,
                results,
                revision,
            } => write!(
                f,
                "{} [{}] rev {}",
                if *succeeded { "then" } else { "else" },
                results
                    .iter()
                    .map(show_result)
                    .collect::<Vec<_>>()
                    .join("; "),
                show_rev(*revision)
            ),
            Output::Lease { revision } => write!(f, "ok rev {}", show_rev(*revision)),
            Output::LeaseNotFound => write!(f, "lease not found"),
            Output::LeaseTtl { ttl, keys } => {
                write!(f, "ttl {ttl}")?;
                if let Some(keys) = keys {
                    let k: Vec<String> = keys.iter().map(|k| show(k)).collect();
                    write!(f, " keys [{}]", k.join(", "))?;
                }
                Ok(())
            }
        }
    }
}

impl std::fmt::Display for Operation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.ret {
            Some(ret) => write!(
                f,
                "client {} [{}, {}] {} -> {}",
                self.client, self.call, ret, self.input, self.output
            ),
            None => write!(
                f,
                "client {} [{}, failed] {} -> maybe applied",
                self.client, self.call, self.input
            ),
        }
    }
}
