//! A tiny JSON writer that escapes strings the way Go's `encoding/json` does
//! (`<`, `>`, `&`, U+2028 and U+2029 as `\uXXXX`), so bodies match etcd's bytes.

/// Append `s` as a JSON string literal, Go style.
pub fn str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Append a list of strings; `None` is Go's nil slice (`null`).
pub fn list(out: &mut String, items: Option<&[String]>) {
    let Some(items) = items else {
        out.push_str("null");
        return;
    };
    out.push('[');
    for (i, s) in items.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        str(out, s);
    }
    out.push(']');
}

#[cfg(test)]
mod tests {
    #[test]
    fn go_escapes() {
        let mut s = String::new();
        super::str(&mut s, "a<b>&\"\\\n\u{1}\u{2028}é");
        assert_eq!(s, r#""a\u003cb\u003e\u0026\"\\\n\u0001\u2028é""#);
    }
}
