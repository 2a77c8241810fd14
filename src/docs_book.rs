//! Tests that keep the book (`docs/`, an mdBook) true to the code: one internals chapter per
//! actor, made from its crate's `//!` doc, and the flags chapter naming every flag the daemon
//! takes and no flag it does not.
//!
//! The internals chapters are generated: after changing an actor's crate doc, run
//! `ACTCD_BLESS_DOCS=1 cargo test -p actcd --lib docs_book` to write them again.

use std::collections::BTreeSet;
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The actor crates: every directory under `actors/` but the shared vocabulary (`types`).
fn actors() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root().join("actors"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "types")
        .collect();
    names.sort();
    names
}

/// Turns rustdoc's intra-doc links (`` [`Store`] ``, `` [`Self::open`] ``) into code spans: the
/// book does not resolve them. Links with a target (`[text](url)`) are kept.
fn unlink(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(start) = rest.find("[`") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        match after.find("`]") {
            Some(end) if !after[end + 2..].starts_with('(') => {
                out.push('`');
                out.push_str(&after[..end]);
                out.push('`');
                rest = &after[end + 2..];
            }
            _ => {
                out.push_str("[`");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The chapter for `actor`: its `lib.rs`'s leading `//!` doc, headings as the book's.
fn chapter_of(actor: &str) -> String {
    let lib = root().join("actors").join(actor).join("src/lib.rs");
    let text = std::fs::read_to_string(&lib).unwrap();
    let mut out = format!(
        "<!-- Made from actors/{actor}/src/lib.rs by `ACTCD_BLESS_DOCS=1 cargo test -p actcd --lib docs_book`; edit the crate doc, not this file. -->\n\n"
    );
    for line in text.lines() {
        let Some(doc) = line.strip_prefix("//!") else {
            break;
        };
        let doc = doc.strip_prefix(' ').unwrap_or(doc);
        out.push_str(&unlink(doc));
        out.push('\n');
    }
    out.push_str(&format!(
        "\n*Source: [`actors/{actor}/src/lib.rs`](../../actors/{actor}/src/lib.rs); with its links: `cargo doc -p actcd-{actor} --open`.*\n"
    ));
    out
}

#[test]
fn every_actor_has_an_internals_chapter_made_from_its_crate_doc() {
    let bless = std::env::var_os("ACTCD_BLESS_DOCS").is_some();
    let summary = std::fs::read_to_string(root().join("docs/SUMMARY.md")).unwrap();
    let mut stale = Vec::new();
    for actor in actors() {
        let path = root().join(format!("docs/internals/{actor}.md"));
        let want = chapter_of(&actor);
        if bless {
            std::fs::write(&path, &want).unwrap();
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(want.as_str()) {
            stale.push(actor.clone());
        }
        assert!(
            summary.contains(&format!("(internals/{actor}.md)")),
            "docs/SUMMARY.md lists no chapter for actors/{actor}"
        );
    }
    assert!(
        stale.is_empty(),
        "internals chapters out of date with their crate docs: {stale:?}; run \
         ACTCD_BLESS_DOCS=1 cargo test -p actcd --lib docs_book"
    );
}

/// `--name` flags in `text`, with `--a-{b,c}` read as `--a-b` and `--a-c`.
fn flags_in(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while let Some(at) = text[i..].find("`--") {
        let start = i + at + 3;
        let mut end = start;
        while end < bytes.len() && (bytes[end].is_ascii_alphanumeric() || bytes[end] == b'-') {
            end += 1;
        }
        let name = text[start..end].trim_end_matches('-');
        if end < bytes.len() && bytes[end] == b'{' {
            if let Some(close) = text[end..].find('}') {
                for part in text[end + 1..end + close].split(',') {
                    found.insert(format!("{}{}", &text[start..end], part.trim()));
                }
            }
        } else if !name.is_empty() {
            found.insert(name.to_string());
        }
        i = end.max(start);
    }
    found
}

fn flags_chapter() -> (String, PathBuf) {
    let path = root().join("docs/operations.md");
    (std::fs::read_to_string(&path).unwrap(), path)
}

#[test]
fn the_flags_chapter_names_every_flag_and_only_real_ones() {
    use clap::CommandFactory;
    let cmd = crate::config::Flags::command();
    let real: BTreeSet<String> = cmd
        .get_arguments()
        .filter_map(|a| a.get_long().map(str::to_string))
        .filter(|l| l != "help" && l != "version")
        .collect();
    let (text, path) = flags_chapter();
    let named = flags_in(&text);
    let missing: Vec<&String> = real.difference(&named).collect();
    assert!(
        missing.is_empty(),
        "flags the daemon takes that {} does not name: {missing:?}",
        path.display()
    );
    // The tables' first column names flags; each must be one the daemon takes.
    let mut unknown = Vec::new();
    for row in text.lines().filter(|l| l.starts_with("| `--")) {
        let first = row.split('|').nth(1).unwrap_or("");
        for flag in flags_in(first) {
            if !real.contains(&flag) {
                unknown.push(flag);
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "{} lists flags the daemon does not take: {unknown:?}",
        path.display()
    );
}

#[test]
fn flags_are_read_from_backticks_with_braces_expanded() {
    let got = flags_in("`--a-{b,c}` and `--name` / `--x=1`, not --bare or `-single`");
    let want: BTreeSet<String> = ["a-b", "a-c", "name", "x"].map(String::from).into();
    assert_eq!(got, want);
    assert_eq!(unlink("a [`Store`] and [`x`](y)"), "a `Store` and [`x`](y)");
}
