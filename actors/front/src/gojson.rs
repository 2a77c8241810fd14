//! What etcd's gateway refuses in a JSON body before any gRPC call, with the messages its Go
//! decoder gives, checked against etcd 3.5.1:
//!
//! - an enum given by a name it doesn't have:
//!   `unknown value "\"NOPE\"" for enum etcdserverpb.RangeRequest.SortTarget`;
//! - bytes that are not standard, padded base64: `illegal base64 data at input byte N`, N
//!   where Go's decoder stops (line breaks skipped, padding required).
//!
//! Unknown fields are accepted, as etcd accepts them. The walk follows the descriptor through
//! nested messages and lists, so a compare's `target` or a txn's nested range is checked too.

use prost_reflect::{Kind, MessageDescriptor};
use serde_json::Value;

/// The first thing etcd's gateway would refuse in `value` (a `desc` message), as its message.
pub fn refusal(value: &Value, desc: &MessageDescriptor) -> Option<String> {
    let Value::Object(fields) = value else {
        return None;
    };
    for (name, v) in fields {
        let Some(field) = desc
            .get_field_by_name(name)
            .or_else(|| desc.get_field_by_json_name(name))
        else {
            continue;
        };
        let items: Vec<&Value> = match v {
            Value::Array(items) if field.is_list() => items.iter().collect(),
            v => vec![v],
        };
        for item in items {
            let found = match field.kind() {
                Kind::Enum(e) => match item {
                    Value::String(s) if e.get_value_by_name(s).is_none() => Some(format!(
                        "unknown value {} for enum {}",
                        go_quote(&format!("\"{s}\"")),
                        e.full_name()
                    )),
                    _ => None,
                },
                Kind::Bytes => match item {
                    Value::String(s) => go_base64_error(s.as_bytes())
                        .map(|at| format!("illegal base64 data at input byte {at}")),
                    _ => None,
                },
                Kind::Message(m) => refusal(item, &m),
                _ => None,
            };
            if found.is_some() {
                return found;
            }
        }
    }
    None
}

/// Go's `%q` of a string (enough of it: quotes and backslashes escaped).
fn go_quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn base64_value(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'+' || b == b'/'
}

fn is_newline(b: u8) -> bool {
    b == b'\n' || b == b'\r'
}

/// Where Go's `base64.StdEncoding.DecodeString` reports corrupt input, if it does.
fn go_base64_error(src: &[u8]) -> Option<usize> {
    let mut si = 0;
    loop {
        // One quantum of up to four symbols.
        let mut j = 0;
        while j < 4 {
            if si == src.len() {
                return match j {
                    0 => None,
                    _ => Some(si - j),
                };
            }
            let c = src[si];
            si += 1;
            if base64_value(c) {
                j += 1;
                continue;
            }
            if is_newline(c) {
                continue;
            }
            if c != b'=' || j < 2 {
                return Some(si - 1);
            }
            if j == 2 {
                // A second `=` must follow (line breaks skipped).
                while si < src.len() && is_newline(src[si]) {
                    si += 1;
                }
                if si == src.len() {
                    return Some(src.len());
                }
                if src[si] != b'=' {
                    return Some(si - 1);
                }
                si += 1;
            }
            while si < src.len() && is_newline(src[si]) {
                si += 1;
            }
            return (si < src.len()).then_some(si);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Offsets etcd 3.5.1's gateway reported for these keys.
    #[test]
    fn base64_errors_are_where_go_finds_them() {
        for (input, want) in [
            ("!!!!", Some(0)),
            ("YQ=", Some(3)),
            ("YQ", Some(0)),
            ("YQ===", Some(4)),
            ("Y Q==", Some(1)),
            ("YQ==", None),
            ("Zm9v", None),
            ("Zm9vYg==", None),
            ("Zm9v\nYmFy", None),
            ("", None),
            ("Zm9vY", Some(4)),
            ("Z===", Some(1)),
            ("Zm=a", Some(2)),
        ] {
            assert_eq!(go_base64_error(input.as_bytes()), want, "{input:?}");
        }
    }

    #[test]
    fn unknown_enum_names_and_bad_bytes_are_named_like_etcd() {
        let pool = prost_reflect::DescriptorPool::decode(actcd_proto::FILE_DESCRIPTOR_SET).unwrap();
        let range = pool
            .get_message_by_name("etcdserverpb.RangeRequest")
            .unwrap();
        let v: Value = serde_json::from_str(r#"{"key":"YQ==","sort_target":"NOPE"}"#).unwrap();
        assert_eq!(
            refusal(&v, &range).unwrap(),
            r#"unknown value "\"NOPE\"" for enum etcdserverpb.RangeRequest.SortTarget"#
        );
        let ok: Value =
            serde_json::from_str(r#"{"key":"YQ==","sortOrder":"DESCEND","bogus":1}"#).unwrap();
        assert_eq!(refusal(&ok, &range), None);
        let txn = pool.get_message_by_name("etcdserverpb.TxnRequest").unwrap();
        let v: Value = serde_json::from_str(
            r#"{"compare":[{"key":"YQ==","target":"VALUE","result":"EQUAL"},{"key":"YQ","target":"VALUE"}]}"#,
        )
        .unwrap();
        assert_eq!(
            refusal(&v, &txn).unwrap(),
            "illegal base64 data at input byte 0"
        );
    }
}
