//! Tree nodes and key paths.
//!
//! The tree is kept flat: a map from the cleaned absolute path to its node,
//! each directory listing its children's names in order. Walking, removing
//! and saving therefore never recurse on the depth of a key.

use std::collections::BTreeSet;

use crate::event::NodeExtern;

/// What a node holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A key with a value.
    File(String),
    /// A directory and the names of its children.
    Dir(BTreeSet<String>),
}

/// One node of the tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Node {
    pub created_index: u64,
    pub modified_index: u64,
    /// Absolute expiry in Unix nanoseconds; `None` for permanent nodes.
    pub expire_at: Option<i64>,
    /// Tie-breaker of this node's place in the expiry index.
    pub ttl_seq: u64,
    pub kind: Kind,
}

impl Node {
    pub fn file(value: String, index: u64, expire_at: Option<i64>) -> Self {
        Node {
            created_index: index,
            modified_index: index,
            expire_at,
            ttl_seq: 0,
            kind: Kind::File(value),
        }
    }

    pub fn dir(index: u64, expire_at: Option<i64>) -> Self {
        Node {
            created_index: index,
            modified_index: index,
            expire_at,
            ttl_seq: 0,
            kind: Kind::Dir(BTreeSet::new()),
        }
    }

    pub fn is_dir(&self) -> bool {
        matches!(self.kind, Kind::Dir(_))
    }

    /// The value of a file; the empty string for a directory.
    pub fn value(&self) -> &str {
        match &self.kind {
            Kind::File(v) => v,
            Kind::Dir(_) => "",
        }
    }

    pub fn children(&self) -> Option<&BTreeSet<String>> {
        match &self.kind {
            Kind::Dir(c) => Some(c),
            Kind::File(_) => None,
        }
    }

    /// The absolute expiry and whole seconds left at `now`, rounded up
    /// (a key 4.2 s from expiry shows 5, one 0.5 s past it shows 0 and so
    /// is left out of the JSON).
    pub fn expiration_and_ttl(&self, now: i64) -> (Option<i64>, i64) {
        match self.expire_at {
            None => (None, 0),
            Some(at) => {
                let left = at.saturating_sub(now);
                let mut ttl = left / 1_000_000_000;
                if left % 1_000_000_000 > 0 {
                    ttl += 1;
                }
                (Some(at), ttl)
            }
        }
    }

    /// The node alone (a directory without its children), as prevNode and
    /// non-recursive listings show it.
    pub fn repr_flat(&self, path: &str, now: i64) -> NodeExtern {
        let mut ne = NodeExtern::bare(path, self.modified_index, self.created_index);
        match &self.kind {
            Kind::File(v) => ne.value = Some(v.clone()),
            Kind::Dir(_) => ne.dir = true,
        }
        (ne.expiration, ne.ttl) = self.expiration_and_ttl(now);
        ne
    }
}

/// Whether the last component of `path` starts with `_`.
pub(crate) fn is_hidden_name(name: &str) -> bool {
    name.starts_with('_')
}

/// `path` made absolute and clean, as Go's `path.Clean(path.Join("/", p))`:
/// empty and `.` components dropped, `..` taking one back (never above the
/// root), no trailing slash; the root is `/`.
#[must_use]
pub fn clean_path(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for comp in path.split('/') {
        match comp {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    if parts.is_empty() {
        return "/".to_owned();
    }
    let mut out = String::with_capacity(path.len() + 1);
    for p in parts {
        out.push('/');
        out.push_str(p);
    }
    out
}

/// The child `name` of the directory `parent` (both clean).
pub(crate) fn join(parent: &str, name: &str) -> String {
    if parent == "/" {
        format!("/{name}")
    } else {
        format!("{parent}/{name}")
    }
}

/// A clean non-root path split into its parent directory and last name.
pub(crate) fn split(path: &str) -> (&str, &str) {
    match path.rfind('/') {
        Some(0) => ("/", &path[1..]),
        Some(i) => (&path[..i], &path[i + 1..]),
        None => ("/", path),
    }
}

/// The components of a clean path (none for the root).
pub(crate) fn components(path: &str) -> impl Iterator<Item = &str> {
    path.split('/').filter(|c| !c.is_empty())
}

/// Whether a key under the watched path lies below a hidden component
/// (relative to the watched path), in which case an ancestor's watcher is
/// not told about it.
pub(crate) fn hidden_below(watch_path: &str, key_path: &str) -> bool {
    if watch_path.len() > key_path.len() {
        return false;
    }
    let rest = key_path.get(watch_path.len()..).unwrap_or("");
    let after = clean_path(rest);
    after.contains("/_")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn want_clean_paths() {
        let cases = [
            ("", "/"),
            ("/", "/"),
            ("foo", "/foo"),
            ("/foo/", "/foo"),
            ("//foo//bar/", "/foo/bar"),
            ("/foo/./bar", "/foo/bar"),
            ("/foo/../bar", "/bar"),
            ("/../../x", "/x"),
        ];
        for (input, want) in cases {
            assert_eq!(clean_path(input), want, "{input}");
        }
    }

    #[test]
    fn want_split_and_join() {
        assert_eq!(split("/a"), ("/", "a"));
        assert_eq!(split("/a/b/c"), ("/a/b", "c"));
        assert_eq!(join("/", "a"), "/a");
        assert_eq!(join("/a", "b"), "/a/b");
    }

    #[test]
    fn want_ttl_rounding() {
        let n = Node::file(String::new(), 1, Some(10_000_000_000));
        let cases = [
            (0, 10),
            (5_800_000_000, 5),
            (9_999_999_999, 1),
            (10_000_000_000, 0),
            (10_500_000_000, 0),
            (11_500_000_000, -1),
        ];
        for (now, want) in cases {
            assert_eq!(n.expiration_and_ttl(now).1, want, "now {now}");
        }
    }

    #[test]
    fn want_hidden_below() {
        assert!(hidden_below("/", "/_x"));
        assert!(hidden_below("/a", "/a/_b/c"));
        assert!(!hidden_below("/a", "/a/b"));
        assert!(!hidden_below("/a/_b", "/a/_b"));
        assert!(!hidden_below("/a/_b/c", "/a/_b"));
    }
}
