//! User and role names are bytes, as etcd takes them: etcd's protos call them `string`, but Go
//! never checks a protobuf `string` for UTF-8, so `etcdctl user add $'u\xff'` works and the
//! name is stored, compared and listed byte for byte. Where a name has to become text (JSON,
//! a JWT claim) Go's encoders replace each byte that is not part of valid UTF-8 with U+FFFD;
//! [`go_lossy`] does the same, so such text reads as etcd's.

/// `name` as Go's `encoding/json` writes it: every byte outside valid UTF-8 becomes one U+FFFD
/// (Rust's `from_utf8_lossy` folds some runs of such bytes into one).
pub fn go_lossy(name: &[u8]) -> String {
    let mut out = String::with_capacity(name.len());
    for chunk in name.utf8_chunks() {
        out.push_str(chunk.valid());
        out.extend(std::iter::repeat_n('\u{FFFD}', chunk.invalid().len()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_bad_byte_is_one_replacement_as_in_go() {
        struct Case {
            name: &'static [u8],
            want: &'static str,
        }
        for c in [
            Case {
                name: b"alice",
                want: "alice",
            },
            Case {
                name: b"u\xff\xfe",
                want: "u\u{FFFD}\u{FFFD}",
            },
            // A cut-off three-byte sequence is two bad bytes for Go, one for from_utf8_lossy.
            Case {
                name: b"a\xe2\x82b",
                want: "a\u{FFFD}\u{FFFD}b",
            },
            Case {
                name: "é\u{20ac}".as_bytes(),
                want: "é\u{20ac}",
            },
            Case {
                name: b"",
                want: "",
            },
        ] {
            assert_eq!(
                go_lossy(c.name),
                c.want,
                "{:?}",
                c.name.escape_ascii().to_string()
            );
        }
    }
}
