//! Prometheus text exposition as Go's client_golang writes it: floats as
//! `strconv.FormatFloat(v, 'g', -1, 64)`, `# HELP` then `# TYPE` per family, label values
//! escaped, histograms as cumulative `_bucket{le}` series then `+Inf`, `_sum` and `_count`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use actcd_types::meter::{Sample, SampleValue};

use crate::families::FAMILIES;

/// Go's `strconv.FormatFloat(v, 'g', -1, 64)`: the shortest digits that read back as `v`,
/// in exponent form (sign and at least two exponent digits) when the decimal exponent is
/// below -4 or at least 6.
pub fn go_float(v: f64) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    if v == 0.0 {
        return "0".into();
    }
    let e = format!("{v:e}");
    let (mantissa, exp) = e.split_once('e').unwrap_or((&e, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exp.abs());
    }
    format!("{v}")
}

/// One family's HELP and TYPE lines.
pub fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// A family with one series and no labels.
pub fn single(out: &mut String, name: &str, kind: &str, help: &str, v: f64) {
    header(out, name, kind, help);
    let _ = writeln!(out, "{name} {}", go_float(v));
}

/// Labels as a series writes them between its braces, values with `\` and `"` escaped.
fn label_text(labels: &[(&str, String)]) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape_label_value(v)))
        .collect::<Vec<_>>()
        .join(",")
}

/// A label value as client_golang writes it: `\`, `"` and a line feed escaped.
fn escape_label_value(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// One histogram series of family `name` (its header written before): `buckets` are each bound
/// with the cumulative count at it, then `+Inf` (`count`), `_sum` and `_count`. `labels` are
/// the series' labels as written between braces (`a="b",c="d"`), or empty.
pub fn histogram(
    out: &mut String,
    name: &str,
    labels: &str,
    buckets: impl IntoIterator<Item = (f64, u64)>,
    count: u64,
    sum: f64,
) {
    let sep = if labels.is_empty() { "" } else { "," };
    for (le, n) in buckets {
        let _ = writeln!(
            out,
            "{name}_bucket{{{labels}{sep}le=\"{}\"}} {n}",
            go_float(le)
        );
    }
    let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {count}");
    if labels.is_empty() {
        let _ = writeln!(out, "{name}_sum {}", go_float(sum));
        let _ = writeln!(out, "{name}_count {count}");
    } else {
        let _ = writeln!(out, "{name}_sum{{{labels}}} {}", go_float(sum));
        let _ = writeln!(out, "{name}_count{{{labels}}} {count}");
    }
}

/// Bucket counts, each one's own (the last above every bound, not used), as `(bound,
/// cumulative count)` pairs for [`histogram`].
pub fn cumulative<'a>(
    bounds: &'a [f64],
    counts: &'a [u64],
) -> impl Iterator<Item = (f64, u64)> + 'a {
    bounds.iter().zip(counts).scan(0, |total, (le, n)| {
        *total += n;
        Some((*le, *total))
    })
}

/// The samples actors reported, grouped by name in the order first seen, each family under
/// its etcd type and help ([`FAMILIES`]; `untyped` and no help for a name it lacks).
pub fn render_samples(out: &mut String, samples: &[Sample]) {
    let mut order: Vec<&str> = Vec::new();
    let mut by_name: BTreeMap<&str, Vec<&Sample>> = BTreeMap::new();
    for s in samples {
        if !by_name.contains_key(s.name) {
            order.push(s.name);
        }
        by_name.entry(s.name).or_default().push(s);
    }
    for name in order {
        let (kind, help) = FAMILIES
            .iter()
            .find(|(n, _, _)| *n == name)
            .map_or(("untyped", ""), |(_, k, h)| (*k, *h));
        header(out, name, kind, help);
        for s in &by_name[name] {
            let labels = label_text(&s.labels);
            match &s.value {
                SampleValue::Value(v) => {
                    if labels.is_empty() {
                        let _ = writeln!(out, "{name} {}", go_float(*v));
                    } else {
                        let _ = writeln!(out, "{name}{{{labels}}} {}", go_float(*v));
                    }
                }
                SampleValue::Histogram(h) => histogram(
                    out,
                    name,
                    &labels,
                    cumulative(h.bounds, &h.counts),
                    h.count,
                    h.sum,
                ),
            }
        }
    }
}

/// A disk latency family (etcd's 1 ms doubling buckets, [`actcd_types::msg::DISK_BUCKETS`]):
/// its header and its one series.
pub fn disk_histogram(out: &mut String, name: &str, help: &str, h: &actcd_types::msg::DiskLatency) {
    header(out, name, "histogram", help);
    let buckets = actcd_types::msg::DISK_BUCKETS
        .iter()
        .enumerate()
        .map(|(i, le)| (*le, h.buckets.get(i).copied().unwrap_or(0)));
    histogram(out, name, "", buckets, h.count, h.sum_secs);
}

#[cfg(test)]
#[path = "text_tests.rs"]
mod tests;
