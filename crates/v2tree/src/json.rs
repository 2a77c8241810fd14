//! The two pieces of Go's `encoding/json` output the v2 API depends on: how a
//! string is quoted (HTML-safe, as Go 1.19 does it) and how a `time.Time`
//! is written (RFC 3339 with nanoseconds, trailing zeros trimmed, UTC `Z`).

use std::fmt::Write as _;

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Appends `s` as a JSON string the way Go's encoder quotes it: `"` and `\`
/// escaped, `\n` `\r` `\t` as such, other control bytes and the HTML
/// characters `<`, `>`, `&` as `\u00XX`, U+2028 and U+2029 as `\u2028` and
/// `\u2029`, everything else (DEL and non-ASCII included) as it is.
pub(crate) fn push_go_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c if (c as u32) < 0x20 || c == '<' || c == '>' || c == '&' => {
                let b = c as u32 as usize;
                out.push_str("\\u00");
                out.push(char::from(HEX[b >> 4]));
                out.push(char::from(HEX[b & 0xf]));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Days since 1970-01-01 to a (year, month, day) civil date (proleptic
/// Gregorian), valid for the whole `i64` nanosecond range.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11]
    let d = doy - (153 * mp + 2) / 5 + 1; // [1, 31]
    let m = if mp < 10 { mp + 3 } else { mp - 9 }; // [1, 12]
    let y = if m <= 2 { y + 1 } else { y };
    // Both are small and positive by construction.
    let m = u32::try_from(m).unwrap_or(1);
    let d = u32::try_from(d).unwrap_or(1);
    (y, m, d)
}

/// Formats Unix nanoseconds the way Go marshals a UTC `time.Time` in JSON
/// (`time.RFC3339Nano`), without the surrounding quotes:
/// `2026-11-25T15:04:05.123456789Z`, the fraction's trailing zeros dropped
/// and the dot with them when the fraction is zero.
///
/// Go refuses to marshal years outside 0..=9999; such instants cannot come
/// out of a TTL in practice, and here they are written with the year as it
/// is (sign and all) rather than failing.
#[must_use]
pub fn format_rfc3339_nano(unix_nanos: i64) -> String {
    let secs = unix_nanos.div_euclid(1_000_000_000);
    let nanos = unix_nanos.rem_euclid(1_000_000_000);
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    let mut out = String::with_capacity(32);
    if y < 0 {
        let _ = write!(out, "-{:04}", -y);
    } else {
        let _ = write!(out, "{y:04}");
    }
    let _ = write!(
        out,
        "-{m:02}-{d:02}T{:02}:{:02}:{:02}",
        sod / 3600,
        (sod / 60) % 60,
        sod % 60
    );
    if nanos != 0 {
        let frac = format!("{nanos:09}");
        out.push('.');
        out.push_str(frac.trim_end_matches('0'));
    }
    out.push('Z');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn want_go_time_format() {
        let cases: &[(i64, &str)] = &[
            (0, "1970-01-01T00:00:00Z"),
            // etcd 3.4.23 printed this expiration for a key (see tests/json.rs).
            (1_795_619_399_271_056_495, "2026-11-25T15:09:59.271056495Z"),
            (1_795_619_399_270_000_000, "2026-11-25T15:09:59.27Z"),
            (946_684_800_000_000_000, "2000-01-01T00:00:00Z"),
            (951_782_400_000_000_001, "2000-02-29T00:00:00.000000001Z"),
            (-1, "1969-12-31T23:59:59.999999999Z"),
            (i64::MAX, "2262-04-11T23:47:16.854775807Z"),
        ];
        for (nanos, want) in cases {
            assert_eq!(format_rfc3339_nano(*nanos), *want, "nanos {nanos}");
        }
    }

    #[test]
    fn want_go_string_escapes() {
        let mut out = String::new();
        push_go_string(
            &mut out,
            "<a&\"b\\c>\u{1}\u{8}\u{c}\t\n\u{7f}é\u{2028}\u{2029}/\r",
        );
        assert_eq!(
            out,
            "\"\\u003ca\\u0026\\\"b\\\\c\\u003e\\u0001\\u0008\\u000c\\t\\n\u{7f}é\\u2028\\u2029/\\r\""
        );
    }
}
