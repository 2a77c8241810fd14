//! Go-style durations, as etcd's flags and options write them (`10m`, `1m30s`, `250ms`).

use std::time::Duration;

/// Parses a Go-style duration as etcd's flags take them: a sequence of number+unit pairs
/// (`h`, `m`, `s`, `ms`, `us`/`µs`, `ns`), e.g. `1m30s`, `250ms`, `1.5s`.
pub fn parse_go_duration(s: &str) -> Result<Duration, String> {
    let bad = || format!("invalid duration {s:?}");
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    let mut rest = s;
    let mut total = 0f64;
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let n = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let value: f64 = rest[..n].parse().map_err(|_| bad())?;
        rest = &rest[n..];
        let u = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let secs = match &rest[..u] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            _ => return Err(bad()),
        };
        total += value * secs;
        rest = &rest[u..];
    }
    Ok(Duration::from_secs_f64(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse_like_etcds_flags() {
        let ok = [
            ("10m", 600_000),
            ("1m30s", 90_000),
            ("250ms", 250),
            ("1.5s", 1500),
            ("0", 0),
        ];
        for (s, want_ms) in ok {
            assert_eq!(
                parse_go_duration(s).map(|d| d.as_millis()),
                Ok(want_ms),
                "{s}"
            );
        }
        for s in ["", "10", "5x", "m", "1.2.3s"] {
            assert!(parse_go_duration(s).is_err(), "{s} must be refused");
        }
    }

    #[test]
    fn jwt_ttls_parse_too() {
        assert_eq!(parse_go_duration("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(
            parse_go_duration("1h30m").unwrap(),
            Duration::from_secs(5400)
        );
        assert_eq!(
            parse_go_duration("250ms").unwrap(),
            Duration::from_millis(250)
        );
        assert!(parse_go_duration("5x").is_err());
        assert!(parse_go_duration("").is_err());
    }
}
