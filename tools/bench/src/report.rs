//! Latency statistics and their two renderings: etcd benchmark's text summary
//! and one JSON line.
//!
//! Latencies are kept as `f64` seconds and sorted once; every figure is read
//! off the sorted slice, so no histogram library is needed. Percentiles use the
//! nearest-rank definition: the p-th percentile of n samples is the
//! ⌈p·n/100⌉-th smallest (never interpolated, always an observed latency).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;
use serde_json::{Map, Value};

/// The percentiles every report shows, as etcd's benchmark does.
pub const PERCENTILES: [f64; 8] = [10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.9];

/// Number of histogram buckets between the fastest and the slowest sample.
pub const HISTOGRAM_BUCKETS: usize = 10;

/// Summary statistics of one set of successful requests.
#[derive(Debug, Clone, PartialEq)]
pub struct Stats {
    /// Latencies in seconds, sorted ascending.
    sorted: Vec<f64>,
    /// Wall time of the run, in seconds.
    pub elapsed: f64,
    pub average: f64,
    /// Population standard deviation.
    pub stddev: f64,
}

impl Stats {
    /// Sorts `lats` (seconds) and computes the moments.
    pub fn new(mut lats: Vec<f64>, elapsed: Duration) -> Stats {
        lats.sort_by(f64::total_cmp);
        let n = lats.len() as f64;
        let (average, stddev) = if lats.is_empty() {
            (0.0, 0.0)
        } else {
            let average = lats.iter().sum::<f64>() / n;
            let var = lats
                .iter()
                .map(|l| (l - average) * (l - average))
                .sum::<f64>()
                / n;
            (average, var.sqrt())
        };
        Stats {
            sorted: lats,
            elapsed: elapsed.as_secs_f64(),
            average,
            stddev,
        }
    }

    pub fn count(&self) -> usize {
        self.sorted.len()
    }

    pub fn fastest(&self) -> f64 {
        self.sorted.first().copied().unwrap_or(0.0)
    }

    pub fn slowest(&self) -> f64 {
        self.sorted.last().copied().unwrap_or(0.0)
    }

    /// Successful requests per second of wall time.
    pub fn rps(&self) -> f64 {
        if self.elapsed > 0.0 {
            self.count() as f64 / self.elapsed
        } else {
            0.0
        }
    }

    /// Nearest-rank percentile, `p` in (0, 100]; 0 when there are no samples.
    pub fn percentile(&self, p: f64) -> f64 {
        let n = self.sorted.len();
        if n == 0 {
            return 0.0;
        }
        // The epsilon keeps float noise (99.9% of 1000 = 999.0000000000001)
        // from pushing the rank up by one.
        let rank = (p / 100.0 * n as f64 - 1e-9).ceil() as usize;
        self.sorted[rank.clamp(1, n) - 1]
    }

    /// `buckets` equal-width buckets from the fastest to the slowest sample,
    /// each given as (upper bound, samples in it). A sample equal to a bound
    /// belongs to the bucket that bound closes.
    pub fn histogram(&self, buckets: usize) -> Vec<(f64, usize)> {
        if self.sorted.is_empty() || buckets == 0 {
            return Vec::new();
        }
        let (lo, hi) = (self.fastest(), self.slowest());
        let width = (hi - lo) / buckets as f64;
        let mut out: Vec<(f64, usize)> =
            (1..=buckets).map(|i| (lo + width * i as f64, 0)).collect();
        // The last bound is the slowest sample itself, not lo + n·width,
        // which rounding could leave a hair below it.
        out[buckets - 1].0 = hi;
        let mut b = 0;
        for &l in &self.sorted {
            while b + 1 < buckets && l > out[b].0 {
                b += 1;
            }
            out[b].1 += 1;
        }
        out
    }

    fn lat_ms(&self) -> LatMs {
        let ms = |s: f64| s * 1e3;
        LatMs {
            avg: ms(self.average),
            stddev: ms(self.stddev),
            min: ms(self.fastest()),
            max: ms(self.slowest()),
            p10: ms(self.percentile(10.0)),
            p25: ms(self.percentile(25.0)),
            p50: ms(self.percentile(50.0)),
            p75: ms(self.percentile(75.0)),
            p90: ms(self.percentile(90.0)),
            p95: ms(self.percentile(95.0)),
            p99: ms(self.percentile(99.0)),
            p999: ms(self.percentile(99.9)),
        }
    }

    /// `{"total":..,"rps":..,"lat_ms":{..}}`, for sub-reports in the JSON line.
    pub fn json_value(&self) -> Value {
        serde_json::json!({
            "total": self.count(),
            "elapsed_s": self.elapsed,
            "rps": self.rps(),
            "lat_ms": self.lat_ms(),
        })
    }
}

#[derive(Debug, Serialize)]
struct LatMs {
    avg: f64,
    stddev: f64,
    min: f64,
    max: f64,
    p10: f64,
    p25: f64,
    p50: f64,
    p75: f64,
    p90: f64,
    p95: f64,
    p99: f64,
    #[serde(rename = "p99.9")]
    p999: f64,
}

/// The one JSON line `--json` prints. Field order is fixed by this struct.
#[derive(Debug, Serialize)]
struct JsonLine<'a> {
    op: &'a str,
    total: u64,
    errors: u64,
    elapsed_s: f64,
    rps: f64,
    lat_ms: LatMs,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    error_dist: &'a BTreeMap<String, u64>,
    #[serde(flatten)]
    extra: &'a Map<String, Value>,
}

/// What a run reports: the main statistics, failed requests by message,
/// labelled sub-statistics (reads and writes of a mix, put latency of a
/// watch run) and extra fields (`watch_check`, ...).
#[derive(Debug)]
pub struct Report {
    pub op: String,
    pub stats: Stats,
    pub errors: BTreeMap<String, u64>,
    pub sections: Vec<(String, Stats)>,
    pub extra: Map<String, Value>,
    /// A correctness check failed (the run's exit status says so).
    pub violation: bool,
}

impl Report {
    pub fn new(op: &str, stats: Stats, errors: BTreeMap<String, u64>) -> Report {
        Report {
            op: op.to_owned(),
            stats,
            errors,
            sections: Vec::new(),
            extra: Map::new(),
            violation: false,
        }
    }

    pub fn error_count(&self) -> u64 {
        self.errors.values().sum()
    }

    /// True when requests failed and every failure was `Unimplemented`: the
    /// server lacks the service rather than being slow or broken.
    pub fn only_unimplemented(&self) -> bool {
        self.stats.count() == 0
            && !self.errors.is_empty()
            && self.errors.keys().all(|e| e.starts_with("Unimplemented"))
    }

    /// etcd benchmark's text layout; `precise` prints full float precision.
    pub fn text(&self, precise: bool) -> String {
        let mut s = String::new();
        write_stats(&mut s, &self.stats, precise);
        for (label, stats) in &self.sections {
            let _ = write!(s, "\n{label}:");
            write_stats(&mut s, stats, precise);
        }
        if !self.errors.is_empty() {
            s.push_str("\nError distribution:\n");
            for (msg, n) in &self.errors {
                let _ = writeln!(s, "  [{n}]\t{msg}");
            }
        }
        if !self.extra.is_empty() {
            s.push('\n');
            for (k, v) in &self.extra {
                let v = match v {
                    Value::String(v) => v.clone(),
                    v => v.to_string(),
                };
                let _ = writeln!(s, "{k}: {v}");
            }
        }
        s
    }

    /// Exactly one line of JSON (no trailing newline).
    pub fn json(&self) -> String {
        let mut extra = self.extra.clone();
        for (label, stats) in &self.sections {
            extra.insert(label.clone(), stats.json_value());
        }
        let line = JsonLine {
            op: &self.op,
            total: self.stats.count() as u64 + self.error_count(),
            errors: self.error_count(),
            elapsed_s: self.stats.elapsed,
            rps: self.stats.rps(),
            lat_ms: self.stats.lat_ms(),
            error_dist: &self.errors,
            extra: &extra,
        };
        serde_json::to_string(&line).expect("report serializes")
    }
}

fn write_stats(s: &mut String, st: &Stats, precise: bool) {
    let f = |x: f64| {
        if precise {
            format!("{x}")
        } else {
            format!("{x:.4}")
        }
    };
    if st.count() == 0 {
        s.push_str("\nSummary:\n  no successful requests.\n");
        return;
    }
    let _ = write!(
        s,
        "\nSummary:\n  Total:\t{} secs.\n  Slowest:\t{} secs.\n  Fastest:\t{} secs.\n  \
         Average:\t{} secs.\n  Stddev:\t{} secs.\n  Requests/sec:\t{}\n",
        f(st.elapsed),
        f(st.slowest()),
        f(st.fastest()),
        f(st.average),
        f(st.stddev),
        f(st.rps()),
    );
    let hist = st.histogram(HISTOGRAM_BUCKETS);
    let most = hist.iter().map(|&(_, n)| n).max().unwrap_or(0).max(1);
    s.push_str("\nResponse time histogram:\n");
    for (bound, n) in hist {
        let bar = "∎".repeat(n * 40 / most);
        let _ = writeln!(s, "  {} [{n}]\t|{bar}", f(bound));
    }
    s.push_str("\nLatency distribution:\n");
    for p in PERCENTILES {
        let _ = writeln!(s, "  {p}% in {} secs.", f(st.percentile(p)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(lats: &[f64]) -> Stats {
        Stats::new(lats.to_vec(), Duration::from_secs(2))
    }

    #[test]
    fn moments_of_a_known_set() {
        // 2, 4, 4, 4, 5, 5, 7, 9: mean 5, population stddev 2.
        let s = stats(&[9.0, 4.0, 2.0, 4.0, 5.0, 4.0, 7.0, 5.0]);
        assert_eq!(s.count(), 8);
        assert_eq!(s.average, 5.0);
        assert_eq!(s.stddev, 2.0);
        assert_eq!(s.fastest(), 2.0);
        assert_eq!(s.slowest(), 9.0);
        assert_eq!(s.rps(), 4.0);
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        struct Case {
            n: usize,
            p: f64,
            want: f64,
        }
        // Samples are 1, 2, ..., n.
        let cases = [
            Case {
                n: 10,
                p: 10.0,
                want: 1.0,
            },
            Case {
                n: 10,
                p: 50.0,
                want: 5.0,
            },
            Case {
                n: 10,
                p: 55.0,
                want: 6.0,
            },
            Case {
                n: 10,
                p: 99.9,
                want: 10.0,
            },
            Case {
                n: 100,
                p: 99.0,
                want: 99.0,
            },
            Case {
                n: 1000,
                p: 99.9,
                want: 999.0,
            },
            Case {
                n: 1,
                p: 10.0,
                want: 1.0,
            },
            Case {
                n: 1,
                p: 99.9,
                want: 1.0,
            },
        ];
        for c in cases {
            let lats: Vec<f64> = (1..=c.n).rev().map(|i| i as f64).collect();
            assert_eq!(stats(&lats).percentile(c.p), c.want, "n={} p={}", c.n, c.p);
        }
    }

    #[test]
    fn empty_stats_are_zero() {
        let s = stats(&[]);
        assert_eq!(s.average, 0.0);
        assert_eq!(s.percentile(50.0), 0.0);
        assert!(s.histogram(10).is_empty());
        assert_eq!(s.rps(), 0.0);
    }

    #[test]
    fn histogram_counts_every_sample_once() {
        let lats: Vec<f64> = (0..=100).map(|i| i as f64).collect();
        let h = stats(&lats).histogram(10);
        assert_eq!(h.len(), 10);
        // Bounds 10, 20, ..., 100; the first bucket holds 0..=10.
        assert_eq!(h[0], (10.0, 11));
        assert!(h[1..].iter().all(|&(_, n)| n == 10));
        assert_eq!(h[9].0, 100.0);
        assert_eq!(h.iter().map(|&(_, n)| n).sum::<usize>(), 101);
    }

    #[test]
    fn histogram_of_identical_samples_is_one_bucket() {
        let h = stats(&[3.0, 3.0, 3.0]).histogram(10);
        assert_eq!(h[0], (3.0, 3));
        assert_eq!(h.iter().map(|&(_, n)| n).sum::<usize>(), 3);
    }

    #[test]
    fn json_line_has_the_agreed_fields() {
        let mut r = Report::new("put", stats(&[0.001, 0.002, 0.003]), BTreeMap::new());
        r.errors.insert("Unavailable: gone".into(), 2);
        r.extra.insert("watch_check".into(), "ok".into());
        r.sections.push(("read".into(), stats(&[0.001])));
        let line = r.json();
        assert!(!line.contains('\n'));
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["op"], "put");
        assert_eq!(v["total"], 5);
        assert_eq!(v["errors"], 2);
        assert_eq!(v["elapsed_s"], 2.0);
        assert_eq!(v["rps"], 1.5);
        assert!((v["lat_ms"]["p50"].as_f64().unwrap() - 2.0).abs() < 1e-9);
        assert!((v["lat_ms"]["p99.9"].as_f64().unwrap() - 3.0).abs() < 1e-9);
        assert_eq!(v["watch_check"], "ok");
        assert_eq!(v["read"]["total"], 1);
        assert_eq!(v["error_dist"]["Unavailable: gone"], 2);
    }

    #[test]
    fn only_unimplemented_needs_all_failures_unimplemented() {
        let mut r = Report::new("watch", stats(&[]), BTreeMap::new());
        assert!(!r.only_unimplemented());
        r.errors.insert("Unimplemented: no Watch".into(), 3);
        assert!(r.only_unimplemented());
        r.errors.insert("Unavailable: x".into(), 1);
        assert!(!r.only_unimplemented());
    }

    #[test]
    fn text_has_etcd_sections() {
        let r = Report::new("put", stats(&[0.001, 0.002]), BTreeMap::new());
        let t = r.text(false);
        for want in [
            "Summary:",
            "Requests/sec:\t1.0000",
            "Response time histogram:",
            "Latency distribution:",
            "99.9% in 0.0020 secs.",
        ] {
            assert!(t.contains(want), "missing {want:?} in\n{t}");
        }
    }
}
