//! `--recheck history.jsonl`: runs the linearizability checker again on a
//! kept history (the lines with a `checked_index`, in that order), in both
//! modes, printing the verdict and the time taken.

use std::path::Path;
use std::time::Instant;

use actcd_linearizability::{
    self as lin, Compare, CompareOp, CompareTarget, Input, Mode, OpResult, Operation, Options,
    Outcome, Output, Txn, TxnOp,
};
use serde_json::Value;

fn bytes(v: &Value) -> Vec<u8> {
    v.as_str().unwrap_or_default().as_bytes().to_vec()
}

fn lease(v: &Value) -> i64 {
    i64::from_str_radix(v["lease"].as_str().unwrap_or("0"), 16).unwrap_or(0)
}

fn opt_bytes(v: &Value) -> Option<Vec<u8>> {
    v.as_str().map(|s| s.as_bytes().to_vec())
}

fn txn_op(v: &Value) -> TxnOp {
    let key = bytes(&v["key"]);
    match v["op"].as_str() {
        Some("put") => TxnOp::Put {
            key,
            value: bytes(&v["value"]),
        },
        Some("delete") => TxnOp::Delete { key },
        _ => TxnOp::Get { key },
    }
}

fn input(v: &Value) -> Result<Input, String> {
    let key = bytes(&v["key"]);
    Ok(match v["op"].as_str().unwrap_or_default() {
        "put" if v.get("lease").is_some() => Input::PutLease {
            key,
            value: bytes(&v["value"]),
            lease: lease(v),
        },
        "put" => Input::Put {
            key,
            value: bytes(&v["value"]),
        },
        "get" => Input::Get { key },
        "delete" => Input::Delete { key },
        "lease-grant" => Input::LeaseGrant {
            lease: lease(v),
            ttl: v["ttl"].as_i64().unwrap_or(0),
        },
        "lease-revoke" => Input::LeaseRevoke { lease: lease(v) },
        "lease-expiry" => Input::LeaseExpire { lease: lease(v) },
        "lease-keepalive" => Input::LeaseKeepAlive { lease: lease(v) },
        "lease-timetolive" => Input::LeaseTimeToLive { lease: lease(v) },
        "txn" => {
            let c = &v["compare"];
            let target = if c["target"] == "value" {
                CompareTarget::Value(bytes(&c["against"]))
            } else {
                CompareTarget::ModRevision(c["against"].as_i64().unwrap_or(0))
            };
            let op = match c["relation"].as_str() {
                Some("NotEqual") => CompareOp::NotEqual,
                Some("Less") => CompareOp::Less,
                Some("Greater") => CompareOp::Greater,
                _ => CompareOp::Equal,
            };
            let list = |k: &str| {
                v[k].as_array()
                    .map(|a| a.iter().map(txn_op).collect())
                    .unwrap_or_default()
            };
            Input::Txn(Txn {
                compare: Compare {
                    key: bytes(&c["key"]),
                    op,
                    target,
                },
                then: list("then"),
                otherwise: list("else"),
            })
        }
        other => return Err(format!("unknown op {other:?}")),
    })
}

fn output(i: &Input, v: &Value) -> Output {
    if v.is_null() {
        return Output::Unknown;
    }
    if v.get("lease_not_found").is_some() {
        return Output::LeaseNotFound;
    }
    let revision = v["revision"].as_i64();
    match i {
        Input::Put { .. } | Input::PutLease { .. } => Output::Put { revision },
        Input::Get { .. } => Output::Get {
            value: opt_bytes(&v["value"]),
            mod_revision: v["mod_revision"].as_i64(),
            revision,
        },
        Input::Delete { .. } => Output::Delete {
            deleted: v["deleted"].as_u64(),
            revision,
        },
        Input::LeaseGrant { .. } | Input::LeaseRevoke { .. } => Output::Lease { revision },
        Input::LeaseExpire { .. } => Output::Unknown,
        Input::LeaseKeepAlive { .. } | Input::LeaseTimeToLive { .. } => Output::LeaseTtl {
            ttl: v["ttl"].as_i64().unwrap_or(0),
            keys: v["keys"].as_array().map(|a| a.iter().map(bytes).collect()),
        },
        Input::Txn(_) => Output::Txn {
            succeeded: v["succeeded"].as_bool().unwrap_or(false),
            revision,
            results: v["results"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|r| match r["op"].as_str() {
                            Some("put") => OpResult::Put,
                            Some("delete") => OpResult::Delete {
                                deleted: r["deleted"].as_u64(),
                            },
                            _ => OpResult::Get {
                                value: opt_bytes(&r["value"]),
                                mod_revision: r["mod_revision"].as_i64(),
                            },
                        })
                        .collect()
                })
                .unwrap_or_default(),
        },
    }
}

/// Reads the checked ops of a `history.jsonl`, in `checked_index` order.
pub fn load(path: &Path) -> Result<Vec<Operation>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut ops: Vec<(u64, Operation)> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let v: Value = serde_json::from_str(line).map_err(|e| format!("line {}: {e}", n + 1))?;
        let Some(idx) = v["checked_index"].as_u64() else {
            continue;
        };
        let i = input(&v["input"]).map_err(|e| format!("line {}: {e}", n + 1))?;
        let o = output(&i, &v["output"]);
        ops.push((
            idx,
            Operation {
                client: v["client"].as_u64().unwrap_or(0),
                call: v["call"].as_u64().unwrap_or(0),
                ret: v["ret"].as_u64(),
                input: i,
                output: o,
            },
        ));
    }
    ops.sort_by_key(|(i, _)| *i);
    Ok(ops.into_iter().map(|(_, o)| o).collect())
}

/// Checks `path` again; 0 linearizable, 1 violation, 2 undecided or unreadable.
pub fn run(path: &Path, max_steps: u64, whole_max_steps: u64) -> u8 {
    let history = match load(path) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("actcd-robustness: {e}");
            return 2;
        }
    };
    println!("{} checked ops", history.len());
    let mut worst = 0;
    for (mode, steps) in [(Mode::PerKey, max_steps), (Mode::Whole, whole_max_steps)] {
        let t = Instant::now();
        let out = lin::check(
            &history,
            &Options {
                mode,
                max_steps: steps,
                ..Options::default()
            },
        );
        let secs = t.elapsed().as_secs_f64();
        match out {
            Outcome::Linearizable => println!("{mode:?}: linearizable ({secs:.2}s)"),
            Outcome::Violation(v) => {
                println!("{mode:?}: VIOLATION ({secs:.2}s)\n{v}");
                worst = 1;
            }
            Outcome::Unknown { keys, steps } => {
                println!(
                    "{mode:?}: undecided after {steps} steps on {} key(s) ({secs:.2}s)",
                    keys.len()
                );
                worst = worst.max(2);
            }
            Outcome::Malformed { index, reason } => {
                println!("{mode:?}: malformed op #{index}: {reason}");
                worst = 2;
            }
        }
    }
    worst
}
