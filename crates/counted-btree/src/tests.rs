use std::collections::BTreeMap;
use std::ops::{Bound, RangeBounds};

use super::*;

/// A value that is live when odd.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct W(u32);

impl Live for W {
    fn is_live(&self) -> bool {
        self.0 % 2 == 1
    }
}

/// xorshift64: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Checks every invariant of the crate doc; returns (depth, entries, live) of `node`.
fn check_node<K: Ord + fmt::Debug, V: Live, const B: usize>(
    node: &Node<K, V>,
    lo: Option<&K>,
    hi: Option<&K>,
    is_root: bool,
) -> (usize, usize, usize) {
    assert!(node.width() <= B, "node wider than {B}");
    if !is_root {
        assert!(node.width() >= 1, "empty non-root node");
    }
    match node {
        Node::Leaf(l) => {
            assert_eq!(l.keys.len(), l.vals.len());
            for w in l.keys.windows(2) {
                assert!(w[0] < w[1], "leaf keys out of order");
            }
            for k in &l.keys {
                assert!(lo.is_none_or(|lo| k >= lo), "{k:?} below its separator");
                assert!(hi.is_none_or(|hi| k < hi), "{k:?} not below its separator");
            }
            (0, l.keys.len(), node.live())
        }
        Node::Inner(n) => {
            assert_eq!(n.seps.len() + 1, n.children.len());
            assert_eq!(n.live.len(), n.children.len());
            for w in n.seps.windows(2) {
                assert!(w[0] < w[1], "separators out of order");
            }
            let mut depth = None;
            let (mut len, mut live) = (0, 0);
            for (i, child) in n.children.iter().enumerate() {
                let clo = if i == 0 { lo } else { Some(&n.seps[i - 1]) };
                let chi = n.seps.get(i).or(hi);
                let (d, l, lv) = check_node::<K, V, B>(child, clo, chi, false);
                assert_eq!(*depth.get_or_insert(d), d, "leaves at different depths");
                assert_eq!(n.live[i], lv, "child {i}'s live count");
                len += l;
                live += lv;
            }
            (depth.unwrap_or(0) + 1, len, live)
        }
    }
}

fn check<K: Ord + Clone + fmt::Debug, V: Live + Clone + PartialEq + fmt::Debug, const B: usize>(
    map: &CountedMap<K, V, B>,
    model: &BTreeMap<K, V>,
) {
    let (_, len, live) = check_node::<K, V, B>(&map.root, None, None, true);
    assert_eq!(len, map.len());
    assert_eq!(live, map.live_len());
    assert_eq!(map.len(), model.len());
    assert_eq!(
        map.live_len(),
        model.values().filter(|v| v.is_live()).count()
    );
    assert!(
        map.iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .eq(model.clone())
    );
}

fn model_count(model: &BTreeMap<u32, W>, start: Bound<&u32>, end: Bound<&u32>) -> usize {
    let inverted = match (start, end) {
        (Bound::Included(s) | Bound::Excluded(s), Bound::Included(e) | Bound::Excluded(e)) => {
            s > e || (s == e && !matches!((start, end), (Bound::Included(_), Bound::Included(_))))
        }
        _ => false,
    };
    if inverted {
        return 0;
    }
    model
        .range((start, end))
        .filter(|(_, v)| v.is_live())
        .count()
}

fn bound(rng: &mut Rng, keys: u64) -> Bound<u32> {
    let k = rng.below(keys + 2) as u32;
    match rng.below(3) {
        0 => Bound::Unbounded,
        1 => Bound::Included(k),
        _ => Bound::Excluded(k),
    }
}

/// Random inserts, removes, weight flips and retains against a model; every invariant and
/// every kind of query checked along the way.
fn model_run<const B: usize>(seed: u64, steps: usize, keys: u64) {
    let mut rng = Rng(seed);
    let mut map: CountedMap<u32, W, B> = CountedMap::new();
    let mut model = BTreeMap::new();
    for step in 0..steps {
        let k = rng.below(keys) as u32;
        match rng.below(10) {
            0..=3 => {
                let v = W(rng.below(4) as u32);
                assert_eq!(map.insert(k, v), model.insert(k, v), "step {step}");
            }
            4..=5 => assert_eq!(map.remove(&k), model.remove(&k), "step {step}"),
            6 => {
                let got = map.update(&k, |v| {
                    v.0 += 1;
                    v.0
                });
                let want = model.get_mut(&k).map(|v| {
                    v.0 += 1;
                    v.0
                });
                assert_eq!(got, want, "step {step}");
            }
            7 => {
                let fresh = W(rng.below(4) as u32);
                let got = map.upsert(
                    &k,
                    || (k, fresh),
                    |v| {
                        v.0 += 1;
                        v.0
                    },
                );
                let inserted = !model.contains_key(&k);
                let v = model.entry(k).or_insert(fresh);
                v.0 += 1;
                assert_eq!(got, (v.0, inserted), "step {step}");
            }
            8 => {
                if rng.below(50) == 0 {
                    let cut = rng.below(4) as u32;
                    map.retain(|k, v| {
                        v.0 += 1;
                        k % 4 != cut
                    });
                    model.retain(|k, v| {
                        v.0 += 1;
                        k % 4 != cut
                    });
                }
            }
            _ => {
                assert_eq!(map.get(&k), model.get(&k));
            }
        }
        check(&map, &model);
        for _ in 0..3 {
            let (s, e) = (bound(&mut rng, keys), bound(&mut rng, keys));
            assert_eq!(
                map.count_live(s.as_ref(), e.as_ref()),
                model_count(&model, s.as_ref(), e.as_ref()),
                "step {step}: count in {s:?}..{e:?}"
            );
            let want: Vec<_> = model.range((s, Bound::Unbounded)).collect();
            let got: Vec<_> = map.range_from(s.as_ref()).collect();
            assert_eq!(got, want, "step {step}: range from {s:?}");
            let want: Vec<_> = want
                .into_iter()
                .filter(|(k, _)| (Bound::Unbounded, e.as_ref()).contains(*k))
                .collect();
            let got: Vec<_> = map.range(s.as_ref(), e.as_ref()).collect();
            assert_eq!(got, want, "step {step}: range {s:?}..{e:?}");
        }
    }
}

#[test]
fn small_nodes_split_and_merge_like_the_model() {
    for seed in 1..=20u64 {
        model_run::<4>(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15), 2000, 200);
    }
}

#[test]
fn default_nodes_agree_with_the_model_over_a_long_run() {
    model_run::<DEFAULT_B>(0x1234_5678_9abc_def1, 10_000, 3000);
}

#[test]
fn rank_counts_live_entries_below_a_key() {
    let map: CountedMap<u32, W, 4> = (0..100).map(|k| (k, W(k))).collect();
    // Live: the odd keys.
    assert_eq!(map.live_len(), 50);
    assert_eq!(map.live_before(&10, false), 5);
    assert_eq!(map.live_before(&11, false), 5);
    assert_eq!(map.live_before(&11, true), 6);
    assert_eq!(
        map.count_live(Bound::Included(&10), Bound::Excluded(&20)),
        5
    );
    assert_eq!(
        map.count_live(Bound::Excluded(&11), Bound::Included(&13)),
        1
    );
    assert_eq!(
        map.count_live(Bound::Included(&20), Bound::Excluded(&10)),
        0
    );
    assert_eq!(
        map.count_live::<u32>(Bound::Unbounded, Bound::Unbounded),
        50
    );
}

#[test]
fn removing_everything_leaves_an_empty_leaf() {
    let mut map: CountedMap<u32, W, 4> = (0..1000).map(|k| (k, W(k))).collect();
    let mut model: BTreeMap<u32, W> = (0..1000).map(|k| (k, W(k))).collect();
    for k in (0..1000).rev().step_by(3).chain(0..1000) {
        assert_eq!(map.remove(&k), model.remove(&k));
        check(&map, &model);
    }
    assert!(map.is_empty());
    assert!(matches!(&map.root, Node::Leaf(l) if l.keys.is_empty()));
    assert_eq!(map.iter().count(), 0);
}

#[test]
fn retain_keeps_the_tree_balanced_and_counted() {
    let mut map: CountedMap<u32, W, 4> = (0..5000).map(|k| (k, W(k))).collect();
    let mut model: BTreeMap<u32, W> = (0..5000).map(|k| (k, W(k))).collect();
    for cut in [7, 3, 2] {
        map.retain(|k, _| k % cut != 0);
        model.retain(|k, _| k % cut != 0);
        check(&map, &model);
    }
    map.retain(|_, _| false);
    model.clear();
    check(&map, &model);
}

#[test]
fn borrowed_lookups_work_for_byte_keys() {
    let mut map: CountedMap<Vec<u8>, W> = CountedMap::new();
    for k in [&b"a"[..], b"ab", b"b", b"c"] {
        map.insert(k.to_vec(), W(1));
    }
    assert_eq!(map.get(&b"ab"[..]), Some(&W(1)));
    assert_eq!(
        map.count_live(Bound::Included(&b"a"[..]), Bound::Excluded(&b"b"[..])),
        2
    );
    let keys: Vec<&[u8]> = map
        .range(Bound::Excluded(&b"a"[..]), Bound::Included(&b"b"[..]))
        .map(|(k, _)| k.as_slice())
        .collect();
    assert_eq!(keys, vec![&b"ab"[..], b"b"]);
}

#[test]
fn keys_in_order_leave_full_nodes() {
    for descending in [false, true] {
        let mut map: CountedMap<u32, W, 4> = CountedMap::new();
        let mut model = BTreeMap::new();
        for i in 0..1000 {
            let k = if descending { 1000 - i } else { i };
            map.insert(k, W(k));
            model.insert(k, W(k));
        }
        check(&map, &model);
        // Every leaf but the last one filled is full.
        let mut widths = Vec::new();
        let mut stack = vec![&map.root];
        while let Some(node) = stack.pop() {
            match node {
                Node::Leaf(l) => widths.push(l.keys.len()),
                Node::Inner(n) => stack.extend(n.children.iter()),
            }
        }
        let full = widths.iter().filter(|&&w| w == 4).count();
        assert!(
            full + 1 >= widths.len(),
            "descending {descending}: {widths:?}"
        );
    }
}
