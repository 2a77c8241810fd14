//! Range permissions merged into sorted, disjoint interval sets.
//!
//! etcd's conventions for a permission `[key, range_end)`: an empty `range_end` is the single
//! key (the interval `[key, key\0)`), a `range_end` of one zero byte is open to the end of the
//! key space, anything else is an ordinary half-open range (a prefix is one of those).
//!
//! A check asks whether one interval of the union covers the request: a single key must lie in
//! one, a range must lie wholly inside one (merging makes adjacent grants count as one), as
//! etcd's interval-tree check decides. Building sorts and merges once; each check is one
//! binary search.

use actcd_proto::authpb::Role;
use actcd_proto::authpb::permission::Type as PermType;

pub use actcd_types::auth::Perm;

/// `[start, end)`; `end = None` runs to the end of the key space.
type Interval = (Vec<u8>, Option<Vec<u8>>);

/// The end of the interval a permission or request names (etcd's conventions).
fn interval(key: &[u8], range_end: &[u8]) -> Interval {
    match range_end {
        [] => {
            let mut end = key.to_vec();
            end.push(0);
            (key.to_vec(), Some(end))
        }
        [0] => (key.to_vec(), None),
        end => (key.to_vec(), Some(end.to_vec())),
    }
}

/// `a ≤ b` with `None` as +∞.
fn end_le(a: &Option<Vec<u8>>, b: &Option<Vec<u8>>) -> bool {
    match (a, b) {
        (_, None) => true,
        (None, Some(_)) => false,
        (Some(a), Some(b)) => a <= b,
    }
}

/// Disjoint, non-adjacent intervals sorted by start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IntervalSet {
    spans: Vec<Interval>,
}

impl IntervalSet {
    /// Merges any intervals into a set (empty ones are dropped).
    fn build(mut all: Vec<Interval>) -> Self {
        all.retain(|(s, e)| e.as_ref().is_none_or(|e| s < e));
        all.sort();
        let mut spans: Vec<Interval> = Vec::with_capacity(all.len());
        for (s, e) in all {
            if let Some(last) = spans.last_mut() {
                // Overlapping or touching: extend the last span.
                let touches = last.1.as_ref().is_none_or(|le| &s <= le);
                if touches {
                    if !end_le(&e, &last.1) {
                        last.1 = e;
                    }
                    continue;
                }
            }
            spans.push((s, e));
        }
        Self { spans }
    }

    /// The span whose start is the greatest at or before `key`.
    fn span_at(&self, key: &[u8]) -> Option<&Interval> {
        let i = self.spans.partition_point(|(s, _)| s.as_slice() <= key);
        i.checked_sub(1).map(|i| &self.spans[i])
    }

    /// Whether `key` lies in the set.
    pub fn contains_key(&self, key: &[u8]) -> bool {
        self.span_at(key)
            .is_some_and(|(_, e)| e.as_ref().is_none_or(|e| key < e.as_slice()))
    }

    /// Whether all of `[key, range_end)` (etcd's conventions) lies in the set.
    pub fn contains_range(&self, key: &[u8], range_end: &[u8]) -> bool {
        let (start, end) = interval(key, range_end);
        self.span_at(&start)
            .is_some_and(|(_, e)| e.as_ref().is_none_or(|e| start < *e) && end_le(&end, e))
    }

    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }
}

/// One user's merged permissions over all of its roles.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserPerms {
    pub read: IntervalSet,
    pub write: IntervalSet,
}

impl UserPerms {
    pub fn build<'a>(roles: impl IntoIterator<Item = &'a Role>) -> Self {
        let (mut read, mut write) = (Vec::new(), Vec::new());
        for role in roles {
            for p in &role.key_permission {
                let ivl = interval(&p.key, &p.range_end);
                match PermType::try_from(p.perm_type) {
                    Ok(PermType::Read) => read.push(ivl),
                    Ok(PermType::Write) => write.push(ivl),
                    Ok(PermType::Readwrite) => {
                        read.push(ivl.clone());
                        write.push(ivl);
                    }
                    Err(_) => {}
                }
            }
        }
        Self {
            read: IntervalSet::build(read),
            write: IntervalSet::build(write),
        }
    }

    /// etcd's check: a single key (empty `range_end`) must lie in the set, a range wholly.
    pub fn allows(&self, perm: Perm, key: &[u8], range_end: &[u8]) -> bool {
        let set = match perm {
            Perm::Read => &self.read,
            Perm::Write => &self.write,
        };
        if range_end.is_empty() {
            set.contains_key(key)
        } else {
            set.contains_range(key, range_end)
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use actcd_proto::authpb::Permission;

    fn role(perms: &[(PermType, &str, &[u8])]) -> Role {
        named_role("r", perms)
    }

    /// A role named `name` granting `perms` (type, key, range end): for this crate's tests.
    pub(crate) fn named_role(name: &str, perms: &[(PermType, &str, &[u8])]) -> Role {
        Role {
            name: name.as_bytes().to_vec(),
            key_permission: perms
                .iter()
                .map(|(t, k, e)| Permission {
                    perm_type: *t as i32,
                    key: k.as_bytes().to_vec(),
                    range_end: e.to_vec(),
                })
                .collect(),
        }
    }

    #[test]
    fn checks_follow_etcds_interval_rules() {
        use PermType::*;
        struct Case {
            name: &'static str,
            grants: Vec<(PermType, &'static str, &'static [u8])>,
            perm: Perm,
            key: &'static str,
            range_end: &'static [u8],
            want: bool,
        }
        let c = |name, grants, perm, key, range_end, want| Case {
            name,
            grants,
            perm,
            key,
            range_end,
            want,
        };
        let cases = vec![
            c(
                "single key granted",
                vec![(Read, "a", b"")],
                Perm::Read,
                "a",
                b"",
                true,
            ),
            c(
                "single key: neighbour",
                vec![(Read, "a", b"")],
                Perm::Read,
                "a\0",
                b"",
                false,
            ),
            c(
                "single key: as a range",
                vec![(Read, "a", b"")],
                Perm::Read,
                "a",
                b"a\0",
                true,
            ),
            c(
                "single key: wider range",
                vec![(Read, "a", b"")],
                Perm::Read,
                "a",
                b"b",
                false,
            ),
            c(
                "read is not write",
                vec![(Read, "a", b"")],
                Perm::Write,
                "a",
                b"",
                false,
            ),
            c(
                "readwrite is both",
                vec![(Readwrite, "a", b"")],
                Perm::Write,
                "a",
                b"",
                true,
            ),
            c(
                "range start",
                vec![(Write, "b/", b"b/m")],
                Perm::Write,
                "b/",
                b"",
                true,
            ),
            c(
                "range end excluded",
                vec![(Write, "b/", b"b/m")],
                Perm::Write,
                "b/m",
                b"",
                false,
            ),
            c(
                "inside range",
                vec![(Write, "b/", b"b/m")],
                Perm::Write,
                "b/c",
                b"b/d",
                true,
            ),
            c(
                "range past end",
                vec![(Write, "b/", b"b/m")],
                Perm::Write,
                "b/c",
                b"b/z",
                false,
            ),
            c(
                "range before start",
                vec![(Write, "b/", b"b/m")],
                Perm::Write,
                "b",
                b"b/c",
                false,
            ),
            c(
                "prefix",
                vec![(Read, "c/", b"c0")],
                Perm::Read,
                "c/",
                b"c0",
                true,
            ),
            c(
                "prefix: sibling",
                vec![(Read, "c/", b"c0")],
                Perm::Read,
                "c0",
                b"",
                false,
            ),
            c(
                "from-key grant",
                vec![(Read, "d/", b"\0")],
                Perm::Read,
                "zzz",
                b"",
                true,
            ),
            c(
                "from-key grant, from-key ask",
                vec![(Read, "d/", b"\0")],
                Perm::Read,
                "e",
                b"\0",
                true,
            ),
            c(
                "from-key ask, bounded grant",
                vec![(Read, "d/", b"e")],
                Perm::Read,
                "d/",
                b"\0",
                false,
            ),
            c(
                "before from-key",
                vec![(Read, "d/", b"\0")],
                Perm::Read,
                "d",
                b"",
                false,
            ),
            c(
                "adjacent grants merge",
                vec![(Read, "a", b"m"), (Read, "m", b"z")],
                Perm::Read,
                "b",
                b"y",
                true,
            ),
            c(
                "overlapping grants merge",
                vec![(Read, "a", b"n"), (Read, "m", b"z")],
                Perm::Read,
                "a",
                b"z",
                true,
            ),
            c(
                "a gap stays a gap",
                vec![(Read, "a", b"l"), (Read, "m", b"z")],
                Perm::Read,
                "k",
                b"n",
                false,
            ),
            c(
                "grant inside another",
                vec![(Read, "a", b"z"), (Read, "c", b"d")],
                Perm::Read,
                "x",
                b"",
                true,
            ),
            c("nothing granted", vec![], Perm::Read, "a", b"", false),
        ];
        for c in cases {
            let perms = UserPerms::build([&role(&c.grants)]);
            assert_eq!(
                perms.allows(c.perm, c.key.as_bytes(), c.range_end),
                c.want,
                "{}",
                c.name
            );
        }
    }

    #[test]
    fn revoking_a_grant_removes_only_what_it_alone_covered() {
        use PermType::*;
        let both = role(&[(Read, "a", b"m"), (Read, "k", b"z")]);
        assert!(UserPerms::build([&both]).allows(Perm::Read, b"l", b""));
        let after = role(&[(Read, "k", b"z")]);
        let p = UserPerms::build([&after]);
        assert!(p.allows(Perm::Read, b"l", b""));
        assert!(!p.allows(Perm::Read, b"b", b""));
    }

    #[test]
    fn thousands_of_grants_merge_into_few_spans() {
        let grants: Vec<_> = (0..10_000u32)
            .map(|i| {
                let k = format!("k{i:05}");
                (PermType::Read, k, Vec::new())
            })
            .collect();
        let r = Role {
            name: b"r".to_vec(),
            key_permission: grants
                .iter()
                .map(|(t, k, e)| Permission {
                    perm_type: *t as i32,
                    key: k.clone().into_bytes(),
                    range_end: e.clone(),
                })
                .collect(),
        };
        let p = UserPerms::build([&r]);
        assert_eq!(p.read.len(), 10_000, "single keys never touch each other");
        assert!(p.allows(Perm::Read, b"k04242", b""));
        assert!(!p.allows(Perm::Read, b"k04242x", b""));
    }
}
