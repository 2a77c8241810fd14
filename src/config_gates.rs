//! `--feature-gates` (`ETCD_FEATURE_GATES`, the config file's `feature-gates:`), etcd 3.6 and
//! 3.7's server feature gates (`server/features/etcd_features.go`), with the rules of etcd's
//! `pkg/featuregate`:
//!
//! - the value is `Name=bool,Other=bool`; empty items are skipped, names and values trimmed,
//!   the booleans Go's (`1`, `t`, `TRUE`, …); etcd's words for a missing value (`missing bool
//!   value for X`), a bad one (`invalid value of X=maybe, err: strconv.ParseBool: parsing
//!   "maybe": invalid syntax`), an unknown gate (`unrecognized feature gate: X`) and a gate
//!   locked to its default (`cannot set feature gate X to false, feature is locked to true`);
//! - each occurrence of the flag is one `Set`: later ones add to (and override) earlier ones;
//! - `AllAlpha` / `AllBeta` set every alpha / beta gate not set explicitly (in this or an
//!   earlier occurrence);
//! - a gate not set has its default.
//!
//! The gates and their stages are etcd 3.7's, plus `AutoPromoteLearners`, the gate etcd's
//! unmerged PR #21744 proposes (actcd builds it ahead of etcd, alpha and off, as proposed;
//! `AllAlpha` turns it on with the rest). Their defaults are etcd's except where actcd has
//! always behaved otherwise (the table's `default`, like etcd's own `OverrideDefault`): the
//! corruption checks, which actcd runs by default, and lease checkpoints, which actcd always
//! takes and persists. [`GATES`] says for each what it does here; docs/operations.md's "Feature gates"
//! table is the same list.

use std::collections::BTreeMap;

/// `FastLeaseKeepAlive` (etcd #20589, beta in 3.7, on): the leader renews a lease it knows
/// without first waiting until it has applied everything committed.
pub const FAST_LEASE_KEEP_ALIVE: &str = "FastLeaseKeepAlive";
/// `InitialCorruptCheck`: `--experimental-initial-corrupt-check`.
pub const INITIAL_CORRUPT_CHECK: &str = "InitialCorruptCheck";
/// `CompactHashCheck`: `--experimental-compact-hash-check-enabled`.
pub const COMPACT_HASH_CHECK: &str = "CompactHashCheck";
/// `TxnModeWriteWithSharedBuffer`: `--experimental-txn-mode-write-with-shared-buffer`.
pub const TXN_MODE_WRITE_WITH_SHARED_BUFFER: &str = "TxnModeWriteWithSharedBuffer";
/// `LeaseCheckpoint`: `--experimental-enable-lease-checkpoint`.
pub const LEASE_CHECKPOINT: &str = "LeaseCheckpoint";
/// `LeaseCheckpointPersist`: `--experimental-enable-lease-checkpoint-persist`.
pub const LEASE_CHECKPOINT_PERSIST: &str = "LeaseCheckpointPersist";
/// `StopGRPCServiceOnDefrag`: `--experimental-stop-grpc-service-on-defrag`.
pub const STOP_GRPC_SERVICE_ON_DEFRAG: &str = "StopGRPCServiceOnDefrag";
/// `PriorityRequest` (etcd 3.7, #20492): a LeaseRevoke is taken up to twice the apply gap that
/// refuses other writes.
pub const PRIORITY_REQUEST: &str = "PriorityRequest";
/// `SetMemberLocalAddr` (etcd #17661, #19413, alpha in 3.6): peer connections leave from the
/// first eligible IP of `--initial-advertise-peer-urls` (`local_addr.rs`).
pub const SET_MEMBER_LOCAL_ADDR: &str = "SetMemberLocalAddr";
/// `AutoPromoteLearners` (proposed in etcd PR #21744 for #15107 / #21611, unmerged; alpha,
/// off): the leader promotes a learner that has kept up (`actcd_front::auto_promote_learners`).
pub const AUTO_PROMOTE_LEARNERS: &str = "AutoPromoteLearners";
const ALL_ALPHA: &str = "AllAlpha";
const ALL_BETA: &str = "AllBeta";

/// A gate's maturity, as etcd's `featuregate` names it (the `stage` label of
/// `etcd_server_feature_enabled`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Alpha,
    Beta,
    Ga,
    Deprecated,
}

impl Stage {
    /// etcd's `prerelease` string: `ALPHA`, `BETA`, empty for GA, `DEPRECATED`.
    pub fn label(self) -> &'static str {
        match self {
            Stage::Alpha => "ALPHA",
            Stage::Beta => "BETA",
            Stage::Ga => "",
            Stage::Deprecated => "DEPRECATED",
        }
    }
}

/// What a gate does in actcd.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Meaning {
    /// It does what etcd's does; the text says through what.
    Implemented(&'static str),
    /// Accepted, but changes nothing here; the text says why (logged when the gate is set).
    NoEffect(&'static str),
}

/// One gate: etcd 3.7's name, stage and default, actcd's default and what it does here.
#[derive(Debug, Clone, Copy)]
pub struct GateSpec {
    pub name: &'static str,
    pub stage: Stage,
    /// etcd 3.7's default.
    pub etcd_default: bool,
    /// actcd's default (etcd's unless actcd always behaved otherwise).
    pub default: bool,
    /// Locked to its default: setting it otherwise is refused (none of etcd's today).
    pub locked: bool,
    /// The etcd pull request that added it.
    pub pr: u32,
    pub meaning: Meaning,
}

/// Every gate etcd 3.7 knows (`AllAlpha` and `AllBeta` are `featuregate`'s own), by name.
pub const GATES: &[GateSpec] = &[
    GateSpec {
        name: ALL_ALPHA,
        stage: Stage::Alpha,
        etcd_default: false,
        default: false,
        locked: false,
        pr: 0,
        meaning: Meaning::Implemented("sets every alpha gate not set explicitly"),
    },
    GateSpec {
        name: ALL_BETA,
        stage: Stage::Beta,
        etcd_default: false,
        default: false,
        locked: false,
        pr: 0,
        meaning: Meaning::Implemented("sets every beta gate not set explicitly"),
    },
    GateSpec {
        name: AUTO_PROMOTE_LEARNERS,
        stage: Stage::Alpha,
        etcd_default: false,
        default: false,
        locked: false,
        pr: 21744,
        meaning: Meaning::Implemented(
            "the leader promotes a learner that has published itself, kept its peer stream up for 5 s and stayed within 90% of the leader's log for two rounds of 4 s, one at a time and only when the grown cluster keeps a connected majority (etcd: proposed in PR #21744, not merged)",
        ),
    },
    GateSpec {
        name: COMPACT_HASH_CHECK,
        stage: Stage::Alpha,
        etcd_default: false,
        default: true,
        locked: false,
        pr: 14120,
        meaning: Meaning::Implemented(
            "the leader compares the peers' hashes at each compacted revision every --compact-hash-check-time (as --experimental-compact-hash-check-enabled, on by default here)",
        ),
    },
    GateSpec {
        name: FAST_LEASE_KEEP_ALIVE,
        stage: Stage::Beta,
        etcd_default: true,
        default: true,
        locked: false,
        pr: 20589,
        meaning: Meaning::Implemented(
            "the leader renews a lease it knows at once; only a keepalive of a lease it does not know waits until it has applied everything committed (off: every keepalive waits, as in etcd 3.5)",
        ),
    },
    GateSpec {
        name: INITIAL_CORRUPT_CHECK,
        stage: Stage::Alpha,
        etcd_default: false,
        default: true,
        locked: false,
        pr: 10524,
        meaning: Meaning::Implemented(
            "before serving clients, the member compares its hash with its peers' (as --experimental-initial-corrupt-check, on by default here)",
        ),
    },
    GateSpec {
        name: LEASE_CHECKPOINT,
        stage: Stage::Alpha,
        etcd_default: false,
        default: true,
        locked: false,
        pr: 13508,
        meaning: Meaning::NoEffect(
            "remaining-TTL checkpoints are always on (false is not honoured)",
        ),
    },
    GateSpec {
        name: LEASE_CHECKPOINT_PERSIST,
        stage: Stage::Alpha,
        etcd_default: false,
        default: true,
        locked: false,
        pr: 13508,
        meaning: Meaning::NoEffect(
            "checkpointed remaining TTLs are always persisted, as in etcd 3.6 (false is not honoured)",
        ),
    },
    GateSpec {
        name: PRIORITY_REQUEST,
        stage: Stage::Alpha,
        etcd_default: false,
        default: false,
        locked: false,
        pr: 20492,
        meaning: Meaning::Implemented(
            "while commit runs more than 5000 entries ahead of apply, a LeaseRevoke is still taken up to 10000 (other writes: etcdserver: too many requests)",
        ),
    },
    GateSpec {
        name: SET_MEMBER_LOCAL_ADDR,
        stage: Stage::Alpha,
        etcd_default: false,
        default: false,
        locked: false,
        pr: 17661,
        meaning: Meaning::Implemented(
            "peer connections leave from the first IP host of --initial-advertise-peer-urls that is neither loopback nor unspecified",
        ),
    },
    GateSpec {
        name: STOP_GRPC_SERVICE_ON_DEFRAG,
        stage: Stage::Alpha,
        etcd_default: false,
        default: false,
        locked: false,
        pr: 18279,
        meaning: Meaning::NoEffect(
            "there is no gRPC health service (grpc.health.v1) to report NOT_SERVING during a defragmentation",
        ),
    },
    GateSpec {
        name: TXN_MODE_WRITE_WITH_SHARED_BUFFER,
        stage: Stage::Beta,
        etcd_default: true,
        default: true,
        locked: false,
        pr: 12896,
        meaning: Meaning::NoEffect(
            "a bbolt read-buffer detail; LMDB write transactions read their own writes",
        ),
    },
];

fn spec(name: &str) -> Option<&'static GateSpec> {
    GATES.iter().find(|g| g.name == name)
}

/// Go's `strconv.ParseBool`, with its error text.
fn parse_bool(v: &str) -> Result<bool, String> {
    crate::config::parse_go_bool(v)
        .map_err(|_| format!("strconv.ParseBool: parsing {v:?}: invalid syntax"))
}

/// One `--feature-gates` value as etcd's `featureGate.Set` splits it: `(name, value)` pairs in
/// order, or etcd's error for a missing or bad value, an unknown gate, or a locked one.
pub fn parse(value: &str) -> Result<Vec<(String, bool)>, String> {
    let mut pairs = Vec::new();
    for item in value.split(',') {
        if item.is_empty() {
            continue;
        }
        let (k, v) = match item.split_once('=') {
            Some((k, v)) => (k.trim(), v.trim()),
            None => return Err(format!("missing bool value for {}", item.trim())),
        };
        let b = parse_bool(v).map_err(|e| format!("invalid value of {k}={v}, err: {e}"))?;
        pairs.push((k.to_string(), b));
    }
    for (k, v) in &pairs {
        let Some(s) = spec(k) else {
            return Err(format!("unrecognized feature gate: {k}"));
        };
        refuse_locked(s, *v)?;
    }
    Ok(pairs)
}

/// featuregate's rule for a gate locked to its default.
fn refuse_locked(s: &GateSpec, v: bool) -> Result<(), String> {
    if s.locked && s.default != v {
        return Err(format!(
            "cannot set feature gate {} to {v}, feature is locked to {}",
            s.name, s.default
        ));
    }
    Ok(())
}

/// The clap value parser of `--feature-gates`: one occurrence, checked, kept as given.
pub fn parse_flag(value: &str) -> Result<String, String> {
    parse(value).map(|_| value.to_string())
}

/// The server's gates: the ones set (explicitly, or through `AllAlpha`/`AllBeta`) and the
/// defaults for the rest.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FeatureGates {
    set: BTreeMap<&'static str, bool>,
}

impl FeatureGates {
    /// Every gate at its default.
    pub fn new() -> Self {
        Self::default()
    }

    /// One `--feature-gates` value (etcd's `Set`).
    pub fn set(&mut self, value: &str) -> Result<(), String> {
        let pairs = parse(value)?;
        self.set_pairs(&pairs);
        Ok(())
    }

    /// Pairs already checked by [`parse`] (etcd's `SetFromMap`): the named gates first, then
    /// `AllAlpha`/`AllBeta` fill the gates of their stage that are still unset (Go visits the
    /// map in any order; this is the order that gives its result every time).
    pub fn set_pairs(&mut self, pairs: &[(String, bool)]) {
        let mut last: BTreeMap<&'static str, bool> = BTreeMap::new();
        for (k, v) in pairs {
            if let Some(s) = spec(k) {
                last.insert(s.name, *v);
            }
        }
        for (&k, &v) in &last {
            self.set.insert(k, v);
        }
        for (special, stage) in [(ALL_ALPHA, Stage::Alpha), (ALL_BETA, Stage::Beta)] {
            if let Some(&v) = last.get(special) {
                for g in GATES.iter().filter(|g| g.stage == stage) {
                    self.set.entry(g.name).or_insert(v);
                }
            }
        }
    }

    /// Whether `name` is on. Panics for a name that is not a gate, as etcd's `Enabled` does
    /// (a bug in the caller, never the user's input).
    pub fn enabled(&self, name: &str) -> bool {
        let s = spec(name).unwrap_or_else(|| panic!("feature {name:?} is not registered"));
        self.set.get(s.name).copied().unwrap_or(s.default)
    }

    /// Whether `name` was set (explicitly or by `AllAlpha`/`AllBeta`).
    pub fn is_set(&self, name: &str) -> bool {
        self.set.contains_key(name)
    }

    /// The gates set, `k=v` sorted and comma-joined (etcd's `String`).
    pub fn set_string(&self) -> String {
        self.set
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// `(name, stage label, enabled)` for every gate: `etcd_server_feature_enabled`.
    pub fn metric_rows(&self) -> Vec<(String, &'static str, bool)> {
        GATES
            .iter()
            .map(|g| (g.name.to_string(), g.stage.label(), self.enabled(g.name)))
            .collect()
    }

    /// The gates set that change nothing here, with the reason (logged at start-up).
    pub fn without_effect(&self) -> Vec<(&'static str, bool, &'static str)> {
        GATES
            .iter()
            .filter(|g| self.is_set(g.name))
            .filter_map(|g| match g.meaning {
                Meaning::NoEffect(why) => Some((g.name, self.enabled(g.name), why)),
                Meaning::Implemented(_) => None,
            })
            .collect()
    }
}

/// etcd's `KnownFeatures`: `Name=true|false (STAGE - default=bool)`, sorted, GA and deprecated
/// gates left out.
pub fn known_features() -> Vec<String> {
    let mut known: Vec<String> = GATES
        .iter()
        .filter(|g| !matches!(g.stage, Stage::Ga | Stage::Deprecated))
        .map(|g| {
            format!(
                "{}=true|false ({} - default={})",
                g.name,
                g.stage.label(),
                g.default
            )
        })
        .collect();
    known.sort();
    known
}

/// `--feature-gates`'s help: etcd's text and list, then which gates change nothing here.
pub fn flag_help() -> String {
    let no_effect: Vec<&str> = GATES
        .iter()
        .filter(|g| matches!(g.meaning, Meaning::NoEffect(_)))
        .map(|g| g.name)
        .collect();
    format!(
        "A set of key=value pairs that describe feature gates for alpha/experimental features. Options are:\n{}\nAccepted but without effect in actcd (see docs/operations.md): {}.",
        known_features().join("\n"),
        no_effect.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gates_are_etcd_3_7s_with_their_stages_and_defaults() {
        let etcd: &[(&str, Stage, bool)] = &[
            ("AllAlpha", Stage::Alpha, false),
            ("AllBeta", Stage::Beta, false),
            ("CompactHashCheck", Stage::Alpha, false),
            ("FastLeaseKeepAlive", Stage::Beta, true),
            ("InitialCorruptCheck", Stage::Alpha, false),
            ("LeaseCheckpoint", Stage::Alpha, false),
            ("LeaseCheckpointPersist", Stage::Alpha, false),
            ("PriorityRequest", Stage::Alpha, false),
            ("SetMemberLocalAddr", Stage::Alpha, false),
            ("StopGRPCServiceOnDefrag", Stage::Alpha, false),
            ("TxnModeWriteWithSharedBuffer", Stage::Beta, true),
        ];
        let got: Vec<(&str, Stage, bool)> = GATES
            .iter()
            .filter(|g| g.name != AUTO_PROMOTE_LEARNERS)
            .map(|g| (g.name, g.stage, g.etcd_default))
            .collect();
        assert_eq!(got, etcd);
        // Plus the gate etcd's PR #21744 proposes, as proposed: alpha, off.
        let proposed = spec(AUTO_PROMOTE_LEARNERS).unwrap();
        assert_eq!(
            (
                proposed.stage,
                proposed.etcd_default,
                proposed.default,
                proposed.pr
            ),
            (Stage::Alpha, false, false, 21744)
        );
        // actcd's own defaults differ only where it always behaved otherwise.
        let differ: Vec<&str> = GATES
            .iter()
            .filter(|g| g.default != g.etcd_default)
            .map(|g| g.name)
            .collect();
        assert_eq!(
            differ,
            [
                "CompactHashCheck",
                "InitialCorruptCheck",
                "LeaseCheckpoint",
                "LeaseCheckpointPersist"
            ]
        );
        let fg = FeatureGates::new();
        assert!(fg.enabled(FAST_LEASE_KEEP_ALIVE));
        assert!(!fg.enabled(STOP_GRPC_SERVICE_ON_DEFRAG));
        assert_eq!(fg.set_string(), "");
    }

    #[test]
    fn values_parse_as_etcds_featuregate_set_parses_them() {
        let mut fg = FeatureGates::new();
        fg.set(" FastLeaseKeepAlive = false ,,StopGRPCServiceOnDefrag=T")
            .unwrap();
        assert!(!fg.enabled(FAST_LEASE_KEEP_ALIVE));
        assert!(fg.enabled(STOP_GRPC_SERVICE_ON_DEFRAG));
        assert_eq!(
            fg.set_string(),
            "FastLeaseKeepAlive=false,StopGRPCServiceOnDefrag=true"
        );
        // A later occurrence adds to and overrides an earlier one.
        fg.set("FastLeaseKeepAlive=1").unwrap();
        assert!(fg.enabled(FAST_LEASE_KEEP_ALIVE));
        assert!(fg.enabled(STOP_GRPC_SERVICE_ON_DEFRAG));
        fg.set("").unwrap();
        for (value, want) in [
            (
                "FastLeaseKeepAlive",
                "missing bool value for FastLeaseKeepAlive",
            ),
            (
                "FastLeaseKeepAlive=maybe",
                "invalid value of FastLeaseKeepAlive=maybe, err: strconv.ParseBool: parsing \"maybe\": invalid syntax",
            ),
            ("NoSuchGate=true", "unrecognized feature gate: NoSuchGate"),
            (
                "fastleasekeepalive=true",
                "unrecognized feature gate: fastleasekeepalive",
            ),
            (
                "FastLeaseKeepAlive=true,Nope",
                "missing bool value for Nope",
            ),
        ] {
            assert_eq!(
                FeatureGates::new().set(value),
                Err(want.to_string()),
                "{value}"
            );
        }
    }

    #[test]
    fn all_alpha_and_all_beta_fill_only_the_gates_not_set() {
        let mut fg = FeatureGates::new();
        fg.set("AllAlpha=true,SetMemberLocalAddr=false").unwrap();
        assert!(fg.enabled(STOP_GRPC_SERVICE_ON_DEFRAG));
        assert!(fg.enabled("PriorityRequest"));
        assert!(!fg.enabled("SetMemberLocalAddr"));
        assert!(fg.enabled(FAST_LEASE_KEEP_ALIVE), "beta: untouched");
        // As in etcd: the gates AllAlpha set stay set when a later occurrence turns it off.
        fg.set("AllAlpha=false").unwrap();
        assert!(fg.enabled(STOP_GRPC_SERVICE_ON_DEFRAG));
        let mut fg = FeatureGates::new();
        fg.set("AllBeta=false").unwrap();
        assert!(!fg.enabled(FAST_LEASE_KEEP_ALIVE));
        assert!(!fg.enabled(TXN_MODE_WRITE_WITH_SHARED_BUFFER));
        assert!(fg.is_set(FAST_LEASE_KEEP_ALIVE));
        // AllAlpha=false turns actcd's default-on alpha gates off too.
        let mut fg = FeatureGates::new();
        fg.set("AllAlpha=false").unwrap();
        assert!(!fg.enabled(INITIAL_CORRUPT_CHECK));
    }

    #[test]
    fn a_locked_gate_refuses_another_value() {
        // etcd has no locked server gate today; the rule is featuregate's.
        let locked = GateSpec {
            locked: true,
            ..GATES[0]
        };
        assert_eq!(
            refuse_locked(&locked, true),
            Err("cannot set feature gate AllAlpha to true, feature is locked to false".into())
        );
        assert_eq!(refuse_locked(&locked, false), Ok(()));
        assert!(GATES.iter().all(|g| !g.locked));
    }

    #[test]
    fn help_and_metric_rows_list_every_gate() {
        let known = known_features();
        assert_eq!(known.len(), GATES.len());
        assert!(known.contains(&"FastLeaseKeepAlive=true|false (BETA - default=true)".to_string()));
        assert!(
            known.contains(&"InitialCorruptCheck=true|false (ALPHA - default=true)".to_string())
        );
        assert!(flag_help().contains("StopGRPCServiceOnDefrag"));
        let mut fg = FeatureGates::new();
        fg.set("FastLeaseKeepAlive=false").unwrap();
        let rows = fg.metric_rows();
        assert!(rows.contains(&("FastLeaseKeepAlive".into(), "BETA", false)));
        assert!(rows.contains(&("AllAlpha".into(), "ALPHA", false)));
        assert_eq!(rows.len(), GATES.len());
        fg.set("TxnModeWriteWithSharedBuffer=false,CompactHashCheck=false")
            .unwrap();
        let quiet: Vec<&str> = fg.without_effect().iter().map(|g| g.0).collect();
        assert_eq!(quiet, ["TxnModeWriteWithSharedBuffer"]);
    }
}
