//! Key patterns of the v2 auth RFC: `*` matches any run of bytes (including
//! `/` and the empty run), `\` makes the next byte literal (`\*`, `\\`), every
//! other byte matches itself, and the pattern is anchored at both ends.
//!
//! A pattern is compiled to a token list and run as a small NFA over the key's
//! bytes: no backtracking, `O(len(key) * len(pattern))` time, no recursion.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok {
    Lit(u8),
    Star,
}

fn compile(pattern: &str) -> Vec<Tok> {
    let mut out = Vec::with_capacity(pattern.len());
    let mut bytes = pattern.bytes();
    while let Some(b) = bytes.next() {
        match b {
            b'*' => {
                // `**` is the same as `*`.
                if out.last() != Some(&Tok::Star) {
                    out.push(Tok::Star);
                }
            }
            // A dangling `\` at the very end stands for itself.
            b'\\' => out.push(Tok::Lit(bytes.next().unwrap_or(b'\\'))),
            _ => out.push(Tok::Lit(b)),
        }
    }
    out
}

/// Positions in `toks` the NFA can be in after consuming `key`; `states[i]` is
/// "the next token to match is `toks[i]`" (`i == toks.len()` is the accept state).
fn run(toks: &[Tok], key: &[u8]) -> Vec<bool> {
    let n = toks.len();
    let mut cur = vec![false; n + 1];
    cur[0] = true;
    close(toks, &mut cur);
    let mut next = vec![false; n + 1];
    for &b in key {
        next.iter_mut().for_each(|s| *s = false);
        let mut any = false;
        for i in 0..n {
            if !cur[i] {
                continue;
            }
            match toks[i] {
                Tok::Star => {
                    next[i] = true;
                    any = true;
                }
                Tok::Lit(l) if l == b => {
                    next[i + 1] = true;
                    any = true;
                }
                Tok::Lit(_) => {}
            }
        }
        std::mem::swap(&mut cur, &mut next);
        if !any {
            return cur;
        }
        close(toks, &mut cur);
    }
    cur
}

/// A `*` may match nothing: being before a star also means being after it.
fn close(toks: &[Tok], states: &mut [bool]) {
    for i in 0..toks.len() {
        if states[i] && toks[i] == Tok::Star {
            states[i + 1] = true;
        }
    }
}

/// Does `pattern` match the whole of `key`? An empty pattern matches only the
/// empty key (such patterns are refused when granted; see `AuthError::EmptyPattern`).
pub fn glob_match(pattern: &str, key: &str) -> bool {
    let toks = compile(pattern);
    run(&toks, key.as_bytes())[toks.len()]
}

/// Does `pattern` match `key` followed by *any* suffix, i.e. the key and its
/// whole subtree (what a recursive read or delete needs)? True exactly when,
/// after reading `key`, the matcher can sit on a final `*`.
pub fn glob_covers_subtree(pattern: &str, key: &str) -> bool {
    let toks = compile(pattern);
    let states = run(&toks, key.as_bytes());
    (0..toks.len()).any(|i| states[i] && toks[i..].iter().all(|t| *t == Tok::Star))
}

/// etcd 3.4's `simpleMatch`: a final `*` means "prefix", anything else is compared
/// literally (a `*` elsewhere, or a `\`, is an ordinary byte). Kept for tests and
/// for documenting the difference.
pub fn etcd_simple_match(pattern: &str, key: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => key.starts_with(prefix),
        None => key == pattern,
    }
}

/// etcd 3.4's `prefixMatch` (recursive access): only a pattern ending in `*` can
/// grant it, and then to every key that starts with the part before the `*`.
pub fn etcd_prefix_match(pattern: &str, key: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => key.starts_with(prefix),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc_examples_and_escapes() {
        let cases: &[(&str, &str, bool)] = &[
            // "/foo matches only the single key/directory of /foo"
            ("/foo", "/foo", true),
            ("/foo", "/foo/", false),
            ("/foo", "/foobar", false),
            ("/foo", "/fo", false),
            ("/foo", "foo", false),
            // "/foo* matches the prefix /foo, and all subdirectories/keys"
            ("/foo*", "/foo", true),
            ("/foo*", "/foobar", true),
            ("/foo*", "/foo/a/b", true),
            ("/foo*", "/fo", false),
            ("/foo*", "x/foo", false),
            // "/foo/*/bar matches the keys bar in any (recursive) subdirectory of /foo"
            ("/foo/*/bar", "/foo/x/bar", true),
            ("/foo/*/bar", "/foo/x/y/bar", true),
            ("/foo/*/bar", "/foo//bar", true),
            ("/foo/*/bar", "/foo/bar", false),
            ("/foo/*/bar", "/foo/x/bar/baz", false),
            ("/foo/*/bar", "/foo/x/barn", false),
            // escapes
            ("/a\\*", "/a*", true),
            ("/a\\*", "/ab", false),
            ("/a\\\\", "/a\\", true),
            ("/a\\\\*", "/a\\xyz", true),
            ("/a\\\\*", "/axyz", false),
            ("/a\\b", "/ab", true),
            ("/a\\", "/a\\", true),
            // stars
            ("*", "", true),
            ("*", "/anything/at/all", true),
            ("**", "/x", true),
            ("/*/*", "/a/b", true),
            ("/*/*", "/ab", false),
            ("*b*b", "abab", true),
            ("*b*b", "aba", false),
            ("a*a*a", "aaa", true),
            ("a*a*a", "aa", false),
            ("", "", true),
            ("", "/", false),
        ];
        for (pat, key, want) in cases {
            assert_eq!(glob_match(pat, key), *want, "glob_match({pat:?}, {key:?})");
        }
    }

    #[test]
    fn subtree_cover() {
        let cases: &[(&str, &str, bool)] = &[
            ("/foo*", "/foo", true),
            ("/foo*", "/foo/bar", true),
            ("/fo*", "/foo", true),
            ("/foo/*", "/foo", false),
            ("/foo/*", "/foo/", true),
            ("/foo", "/foo", false),
            ("/foo/*/bar", "/foo/x", false),
            ("/foo/*/bar*", "/foo/x/bar", true),
            ("/foo/*/bar*", "/foo/x/y/barn", true),
            ("*", "/", true),
            ("/*", "/", true),
            ("/a\\*", "/a", false),
            ("/a\\**", "/a*", true),
        ];
        for (pat, key, want) in cases {
            assert_eq!(
                glob_covers_subtree(pat, key),
                *want,
                "covers({pat:?}, {key:?})"
            );
        }
    }

    /// For every pattern without `\` whose only `*` (if any) is the last byte,
    /// the RFC glob and etcd 3.4's rule agree, for both access kinds.
    #[test]
    fn equivalent_to_etcd_for_trailing_star_patterns() {
        let alphabet = ["", "/", "a", "b", "*"];
        let mut patterns = vec![];
        for x in alphabet {
            for y in alphabet {
                for z in alphabet {
                    patterns.push(format!("{x}{y}{z}"));
                }
            }
        }
        patterns.retain(|p| {
            !p.is_empty()
                && !p.contains('\\')
                && !p.trim_end_matches('*').contains('*')
                && p.matches('*').count() <= 1
        });
        let mut keys = vec![String::new()];
        for x in ["", "/", "a", "b", "*"] {
            for y in ["", "/", "a", "b"] {
                for z in ["", "/", "a", "b"] {
                    keys.push(format!("{x}{y}{z}"));
                }
            }
        }
        for p in &patterns {
            for k in &keys {
                assert_eq!(
                    glob_match(p, k),
                    etcd_simple_match(p, k),
                    "match {p:?} {k:?}"
                );
                assert_eq!(
                    glob_covers_subtree(p, k),
                    etcd_prefix_match(p, k),
                    "cover {p:?} {k:?}"
                );
            }
        }
    }

    #[test]
    fn where_etcd_differs() {
        // etcd takes a middle `*` literally; the RFC glob does not.
        assert!(!etcd_simple_match("/foo/*/bar", "/foo/x/bar"));
        assert!(glob_match("/foo/*/bar", "/foo/x/bar"));
        // etcd takes `\` literally.
        assert!(etcd_simple_match("/a\\*", "/a\\zzz"));
        assert!(!glob_match("/a\\*", "/a\\zzz"));
    }

    #[test]
    fn long_inputs_do_not_blow_up() {
        let pat = "*a".repeat(200);
        let key = "a".repeat(5000);
        assert!(glob_match(&pat, &key));
        assert!(!glob_match(&pat, &"b".repeat(5000)));
    }
}
