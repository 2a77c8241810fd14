//! Table-driven cases. Each draws its timeline: one line per client, `[...]`
//! an op from call to return, `[...->` one that failed (maybe applied).

use actcd_linearizability::{
    Compare, CompareOp, CompareTarget, Input, Mode, OpResult, Operation, Options, Outcome, Output,
    Txn, TxnOp, check,
};

fn put(client: u64, call: u64, ret: u64, k: &str, v: &str, rev: Option<i64>) -> Operation {
    Operation {
        client,
        call,
        ret: Some(ret),
        input: Input::put(k, v),
        output: Output::Put { revision: rev },
    }
}

fn failed_put(client: u64, call: u64, k: &str, v: &str) -> Operation {
    Operation {
        client,
        call,
        ret: None,
        input: Input::put(k, v),
        output: Output::Unknown,
    }
}

/// A read with its value (None = absent), mod revision and header revision.
fn get(
    client: u64,
    call: u64,
    ret: u64,
    k: &str,
    v: Option<&str>,
    mod_rev: Option<i64>,
    rev: Option<i64>,
) -> Operation {
    Operation {
        client,
        call,
        ret: Some(ret),
        input: Input::get(k),
        output: Output::Get {
            value: v.map(|v| v.as_bytes().to_vec()),
            mod_revision: mod_rev,
            revision: rev,
        },
    }
}

fn del(client: u64, call: u64, ret: u64, k: &str, deleted: u64, rev: Option<i64>) -> Operation {
    Operation {
        client,
        call,
        ret: Some(ret),
        input: Input::delete(k),
        output: Output::Delete {
            deleted: Some(deleted),
            revision: rev,
        },
    }
}

fn tput(k: &str, v: &str) -> TxnOp {
    TxnOp::Put {
        key: k.into(),
        value: v.into(),
    }
}

fn tget(k: &str) -> TxnOp {
    TxnOp::Get { key: k.into() }
}

/// `txn if key == value then [...] else [...]` with its answer.
#[allow(clippy::too_many_arguments)]
fn txn(
    client: u64,
    call: u64,
    ret: Option<u64>,
    key: &str,
    target: CompareTarget,
    then: Vec<TxnOp>,
    otherwise: Vec<TxnOp>,
    out: Output,
) -> Operation {
    Operation {
        client,
        call,
        ret,
        input: Input::Txn(Txn {
            compare: Compare {
                key: key.into(),
                op: CompareOp::Equal,
                target,
            },
            then,
            otherwise,
        }),
        output: out,
    }
}

fn val(v: &str) -> CompareTarget {
    CompareTarget::Value(v.into())
}

fn tres(succeeded: bool, results: Vec<OpResult>, rev: Option<i64>) -> Output {
    Output::Txn {
        succeeded,
        results,
        revision: rev,
    }
}

fn rget(v: Option<&str>, mod_rev: Option<i64>) -> OpResult {
    OpResult::Get {
        value: v.map(|v| v.as_bytes().to_vec()),
        mod_revision: mod_rev,
    }
}

/// Which modes must accept the history (the others must reject it).
#[derive(Clone, Copy, Debug)]
enum Expect {
    Pass,
    Fail,
    /// Only the exact-revision mode can see it.
    FailWholeOnly,
}

fn run(name: &str, history: Vec<Operation>, expect: Expect) {
    for mode in [Mode::PerKey, Mode::Whole] {
        let opts = Options {
            mode,
            ..Options::default()
        };
        let out = check(&history, &opts);
        let want_pass = match expect {
            Expect::Pass => true,
            Expect::Fail => false,
            Expect::FailWholeOnly => mode == Mode::PerKey,
        };
        match (&out, want_pass) {
            (Outcome::Linearizable, true) => {}
            (Outcome::Violation(v), false) => {
                let text = v.to_string();
                assert!(text.contains("not linearizable"), "{name}: {text}");
            }
            _ => panic!("{name} in {mode:?}: expected pass={want_pass}, got {out:?}"),
        }
    }
}

#[test]
fn linearizable_histories() {
    let cases: Vec<(&str, Vec<Operation>)> = vec![
        (
            // c1 [put a=1]  [get a->1]  [put a=2]  [get a->2]
            "sequential puts and gets",
            vec![
                put(1, 0, 10, "a", "1", Some(2)),
                get(1, 20, 30, "a", Some("1"), Some(2), Some(2)),
                put(1, 40, 50, "a", "2", Some(3)),
                get(1, 60, 70, "a", Some("2"), Some(3), Some(3)),
            ],
        ),
        (
            // c1 [put a=1]  [------put a=2------]
            // c2                [get a->1]
            // c3                  [get a->2]
            "concurrent get sees old or new",
            vec![
                put(1, 0, 10, "a", "1", Some(2)),
                put(1, 20, 50, "a", "2", Some(3)),
                get(2, 25, 40, "a", Some("1"), Some(2), Some(2)),
                get(3, 30, 45, "a", Some("2"), Some(3), Some(3)),
            ],
        ),
        (
            // the two gets overlap, the one seeing new may even return first
            // c1 [------put a=1------]
            // c2   [get a->1]
            // c3       [get a->absent]
            "concurrent reads in either order",
            vec![
                put(1, 0, 100, "a", "1", Some(2)),
                get(2, 10, 20, "a", Some("1"), Some(2), Some(2)),
                get(3, 15, 30, "a", None, None, Some(1)),
            ],
        ),
        (
            // c1 [put a=1]  [put a=2 ->           (failed)
            // c2                          [get a->2]
            "failed put later read",
            vec![
                put(1, 0, 10, "a", "1", Some(2)),
                failed_put(1, 20, "a", "2"),
                get(2, 100, 110, "a", Some("2"), Some(3), Some(3)),
            ],
        ),
        (
            // c1 [put a=1]  [put a=2 ->           (failed, never applied)
            // c2                          [get a->1]
            "failed put never read",
            vec![
                put(1, 0, 10, "a", "1", Some(2)),
                failed_put(1, 20, "a", "2"),
                get(2, 100, 110, "a", Some("1"), Some(2), Some(2)),
            ],
        ),
        (
            // the failed put lands long after its client gave up
            // c1 [put a=2 ->        (failed)
            // c2   [get a->absent]  [get a->absent]  [get a->2]
            "failed put applied late",
            vec![
                failed_put(1, 0, "a", "2"),
                get(2, 10, 20, "a", None, None, Some(1)),
                get(2, 30, 40, "a", None, None, Some(1)),
                get(2, 50, 60, "a", Some("2"), Some(2), Some(2)),
            ],
        ),
        (
            // c1 [put a=1] [del a (1)] [get a->absent] [del a (0)] [get a->absent]
            "delete then get empty",
            vec![
                put(1, 0, 10, "a", "1", Some(2)),
                del(1, 20, 30, "a", 1, Some(3)),
                get(1, 40, 50, "a", None, None, Some(3)),
                del(1, 60, 70, "a", 0, Some(3)),
                get(1, 80, 90, "a", None, None, Some(3)),
            ],
        ),
        (
            // c1 [put a=1] [txn a==1 ? put a=2 : get a] [txn a==9 ? put a=3 : get a->2]
            "txn compare success and failure",
            vec![
                put(1, 0, 10, "a", "1", Some(2)),
                txn(
                    1,
                    20,
                    Some(30),
                    "a",
                    val("1"),
                    vec![tput("a", "2")],
                    vec![tget("a")],
                    tres(true, vec![OpResult::Put], Some(3)),
                ),
                txn(
                    1,
                    40,
                    Some(50),
                    "a",
                    val("9"),
                    vec![tput("a", "3")],
                    vec![tget("a")],
                    tres(false, vec![rget(Some("2"), Some(3))], Some(3)),
                ),
            ],
        ),
        (
            // value compare on a missing key is false, mod revision 0
            // c1 [txn a==x ? put a=1 : get a->absent] [txn mod(a)==0 ? put a=2]
            "txn on a missing key",
            vec![
                txn(
                    1,
                    0,
                    Some(10),
                    "a",
                    val("x"),
                    vec![tput("a", "1")],
                    vec![tget("a")],
                    tres(false, vec![rget(None, None)], Some(1)),
                ),
                txn(
                    1,
                    20,
                    Some(30),
                    "a",
                    CompareTarget::ModRevision(0),
                    vec![tput("a", "2")],
                    vec![],
                    tres(true, vec![OpResult::Put], Some(2)),
                ),
            ],
        ),
        (
            // c1 [put a=1 r2] [put b=1 r3] [txn mod(a)==2 ? put b=2 r4] [get a r4] [get b r4]
            "revisions increasing across keys",
            vec![
                put(1, 0, 10, "a", "1", Some(2)),
                put(1, 20, 30, "b", "1", Some(3)),
                txn(
                    1,
                    40,
                    Some(50),
                    "a",
                    CompareTarget::ModRevision(2),
                    vec![tput("b", "2")],
                    vec![],
                    tres(true, vec![OpResult::Put], Some(4)),
                ),
                get(1, 60, 70, "a", Some("1"), Some(2), Some(4)),
                get(1, 80, 90, "b", Some("2"), Some(4), Some(4)),
            ],
        ),
        (
            // a maybe-applied txn whose then-branch is observed
            // c1 [put a=1] [txn a==1 ? put a=2 ->     (failed)
            // c2                                [get a->2]
            "failed txn later observed",
            vec![
                put(1, 0, 10, "a", "1", Some(2)),
                txn(
                    1,
                    20,
                    None,
                    "a",
                    val("1"),
                    vec![tput("a", "2")],
                    vec![],
                    Output::Unknown,
                ),
                get(2, 100, 110, "a", Some("2"), Some(3), Some(3)),
            ],
        ),
    ];
    for (name, h) in cases {
        run(name, h, Expect::Pass);
    }
}

#[test]
fn violations() {
    let cases: Vec<(&str, Vec<Operation>, Expect)> = vec![
        (
            // c1 [put a=1]
            // c2            [get a->absent]
            "stale read",
            vec![
                put(1, 0, 10, "a", "1", None),
                get(2, 20, 30, "a", None, None, None),
            ],
            Expect::Fail,
        ),
        (
            // the failed put a=3 cannot explain reading 1
            // c1 [put a=1]
            // c2            [put a=2]
            // c3         [put a=3 ->         (failed)
            // c4                      [get a->1]
            "lost write",
            vec![
                put(1, 0, 10, "a", "1", None),
                put(2, 20, 30, "a", "2", None),
                failed_put(3, 15, "a", "3"),
                get(4, 40, 50, "a", Some("1"), None, None),
            ],
            Expect::Fail,
        ),
        (
            // c1 [put a=1] [put a=2] [get a->2] [get a->1]
            "reordered write",
            vec![
                put(1, 0, 10, "a", "1", None),
                put(1, 20, 30, "a", "2", None),
                get(2, 40, 50, "a", Some("2"), None, None),
                get(2, 60, 70, "a", Some("1"), None, None),
            ],
            Expect::Fail,
        ),
        (
            // c1 [put a=1] [get a->zzz]
            "read of a value never written",
            vec![
                put(1, 0, 10, "a", "1", None),
                get(1, 20, 30, "a", Some("zzz"), None, None),
            ],
            Expect::Fail,
        ),
        (
            // the read's header is behind b's write: only visible globally
            // c1 [put a=1 r2] [put b=1 r3] [get a->1 r2]
            "revision going backwards across keys",
            vec![
                put(1, 0, 10, "a", "1", Some(2)),
                put(1, 20, 30, "b", "1", Some(3)),
                get(1, 40, 50, "a", Some("1"), Some(2), Some(2)),
            ],
            Expect::FailWholeOnly,
        ),
        (
            // c1 [put a=1 r5] [put a=2 r4]
            "revision going backwards on one key",
            vec![
                put(1, 0, 10, "a", "1", Some(5)),
                put(1, 20, 30, "a", "2", Some(4)),
            ],
            Expect::Fail,
        ),
        (
            // c1 [put a=1 r5] [get a->1 mod 5 rev 4]
            "header revision below the mod revision read",
            vec![
                put(1, 0, 10, "a", "1", Some(5)),
                get(1, 20, 30, "a", Some("1"), Some(5), Some(4)),
            ],
            Expect::Fail,
        ),
        (
            // c1 [put a=1] [get a->1 mod 7]: the put's own revision was 2
            "mod revision not the put's",
            vec![
                put(1, 0, 10, "a", "1", Some(2)),
                get(1, 20, 30, "a", Some("1"), Some(7), None),
            ],
            Expect::Fail,
        ),
        (
            // c1 [put a=1] [txn a==1 ? put a=2 : get a -> else, 1]
            "txn else-branch though compare held",
            vec![
                put(1, 0, 10, "a", "1", None),
                txn(
                    1,
                    20,
                    Some(30),
                    "a",
                    val("1"),
                    vec![tput("a", "2")],
                    vec![tget("a")],
                    tres(false, vec![rget(Some("1"), None)], None),
                ),
            ],
            Expect::Fail,
        ),
        (
            // c1 [put a=1] [txn a==9 ? put a=2 -> then]
            "txn then-branch though compare failed",
            vec![
                put(1, 0, 10, "a", "1", None),
                txn(
                    1,
                    20,
                    Some(30),
                    "a",
                    val("9"),
                    vec![tput("a", "2")],
                    vec![],
                    tres(true, vec![OpResult::Put], None),
                ),
            ],
            Expect::Fail,
        ),
        (
            // c1 [del a (1)]: nothing to delete
            "delete count of a missing key",
            vec![del(1, 0, 10, "a", 1, None)],
            Expect::Fail,
        ),
    ];
    for (name, h, expect) in cases {
        run(name, h, expect);
    }
}

#[test]
fn violation_names_the_smallest_failing_partition() {
    // b is fine (3 ops), a has a stale read (2 ops): the report is about a.
    // c1 [put b=1] [get b->1] [get b->1]
    // c2 [put a=1] [get a->absent]
    let h = vec![
        put(1, 0, 10, "b", "1", None),
        get(1, 20, 30, "b", Some("1"), None, None),
        get(1, 40, 50, "b", Some("1"), None, None),
        put(2, 0, 10, "a", "1", None),
        get(2, 20, 30, "a", None, None, None),
    ];
    let Outcome::Violation(v) = check(&h, &Options::default()) else {
        panic!("expected a violation");
    };
    assert_eq!(v.keys, vec![b"a".to_vec()]);
    assert_eq!(v.ops, vec![3, 4]);
    assert_eq!(v.prefix, vec![3]);
    assert_eq!(v.blocked, Some(4));
    let text = v.to_string();
    assert!(
        text.contains("#4 client 2 [20, 30] get a -> <absent>"),
        "{text}"
    );
    println!("{text}");
}

#[test]
fn multi_key_txn_joins_partitions() {
    // The txn reads b and writes a atomically; the get of a after it must
    // see the txn's write, checkable only with a and b together.
    // c1 [put b=1] [txn b==1 ? put a=x] [get a->absent]
    let h = vec![
        put(1, 0, 10, "b", "1", None),
        txn(
            1,
            20,
            Some(30),
            "b",
            val("1"),
            vec![tput("a", "x")],
            vec![],
            tres(true, vec![OpResult::Put], None),
        ),
        get(1, 40, 50, "a", None, None, None),
    ];
    let Outcome::Violation(v) = check(&h, &Options::default()) else {
        panic!("expected a violation");
    };
    assert_eq!(v.keys, vec![b"a".to_vec(), b"b".to_vec()]);
}

#[test]
fn budget_gives_unknown_and_bad_input_is_malformed() {
    let h = vec![
        put(1, 0, 10, "a", "1", None),
        get(1, 20, 30, "a", Some("1"), None, None),
    ];
    let opts = Options {
        max_steps: 1,
        ..Options::default()
    };
    assert!(matches!(check(&h, &opts), Outcome::Unknown { .. }));
    assert_eq!(check(&[], &Options::default()), Outcome::Linearizable);
    let mut bad = h.clone();
    bad[1].ret = Some(5);
    assert!(matches!(
        check(&bad, &Options::default()),
        Outcome::Malformed { index: 1, .. }
    ));
    let mut bad = h;
    bad[0].output = Output::Delete {
        deleted: None,
        revision: None,
    };
    assert!(matches!(
        check(&bad, &Options::default()),
        Outcome::Malformed { index: 0, .. }
    ));
}

#[test]
fn extreme_values_do_not_panic() {
    // Absurd revisions and times must give a verdict, not an overflow.
    for rev in [i64::MIN, -1, 0, i64::MAX] {
        let h = vec![
            put(1, 0, 0, "a", "1", Some(rev)),
            get(
                2,
                u64::MAX - 1,
                u64::MAX,
                "a",
                Some("1"),
                Some(rev),
                Some(rev),
            ),
            del(3, 0, u64::MAX, "a", 1, Some(rev)),
            failed_put(4, u64::MAX, "a", "2"),
        ];
        for mode in [Mode::PerKey, Mode::Whole] {
            for initial_revision in [i64::MIN, 1, i64::MAX] {
                let opts = Options {
                    mode,
                    initial_revision,
                    ..Options::default()
                };
                let _ = check(&h, &opts);
            }
        }
    }
}
