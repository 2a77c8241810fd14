//! etcd 3.6's `/livez` and `/readyz`: named checks, each answered on its own sub-path
//! (`/readyz/linearizable_read`) and together on the root path.
//!
//! - `/livez`: `serializable_read` (the local store answers a read).
//! - `/readyz`: `data_corruption` (no CORRUPT alarm), `serializable_read`, `linearizable_read`
//!   (the cluster agrees on a read index: a leader and a quorum), `non_learner`.
//!
//! The text is etcd's: a passing request answers 200 `ok\n`, preceded with `?verbose` by one
//! `[+]name ok` line per check; a failing one answers 503 with every check's line, failures as
//! `[-]name failed: reason`, and an empty line (Go's `http.Error` adds a newline). The root path
//! takes `?exclude=name` (repeatable; unknown names are ignored, as etcd does for version
//! compatibility); the query is read as Go's `url.ParseQuery` reads it ([`go_query`]). Only
//! GET is served. etcd runs the checks in Go map order (random); here
//! they run in the order above. Each run is counted in etcd 3.6's
//! `etcd_server_healthcheck{type,name}` and `etcd_server_healthchecks_total{type,name,status}`.

use std::time::Duration;

use actcd_proto::etcdserverpb::{AlarmType, RangeRequest};
use actcd_types::AuthInfo;

use crate::pipeline::Pipeline;

/// A health endpoint family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Livez,
    Readyz,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Livez => "livez",
            Kind::Readyz => "readyz",
        }
    }

    /// The checks of the family, in the order they run.
    pub fn checks(self) -> &'static [&'static str] {
        match self {
            Kind::Livez => &["serializable_read"],
            Kind::Readyz => &[
                "data_corruption",
                "serializable_read",
                "linearizable_read",
                "non_learner",
            ],
        }
    }

    /// The family and the single check a path names: `/readyz` → all of them,
    /// `/readyz/non_learner` → that one; `None` for any other path.
    pub fn route(path: &str) -> Option<(Kind, Option<&'static str>)> {
        for kind in [Kind::Livez, Kind::Readyz] {
            let root = format!("/{}", kind.name());
            if path == root {
                return Some((kind, None));
            }
            if let Some(name) = path.strip_prefix(&root).and_then(|r| r.strip_prefix('/')) {
                return kind
                    .checks()
                    .iter()
                    .find(|c| **c == name)
                    .map(|c| (kind, Some(*c)));
            }
        }
        None
    }
}

/// The outcome of the checks that ran: the status and the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub ok: bool,
    pub body: String,
}

/// etcd's text for the outcomes of `checks` (name, `Err(reason)` if it failed).
pub fn answer(outcomes: &[(&str, Result<(), String>)], verbose: bool) -> Answer {
    let mut lines = String::new();
    for (name, r) in outcomes {
        match r {
            Ok(()) => lines.push_str(&format!("[+]{name} ok\n")),
            Err(reason) => lines.push_str(&format!("[-]{name} failed: {reason}\n")),
        }
    }
    if outcomes.iter().any(|(_, r)| r.is_err()) {
        // Go's http.Error writes the reason and a newline.
        lines.push('\n');
        return Answer {
            ok: false,
            body: lines,
        };
    }
    let mut body = if verbose { lines } else { String::new() };
    body.push_str("ok\n");
    Answer { ok: true, body }
}

/// A query string as Go's `url.ParseQuery` reads it (what etcd's `r.URL.Query()` hands its
/// health handlers): pairs split on `&`, empty ones skipped, a pair holding a `;` dropped (Go
/// 1.17 and later refuse `;` as a separator), name and value split at the first `=`, and both
/// unescaped as `url.QueryUnescape` does (`+` is a space, `%XX` a byte); a pair with a bad
/// escape is dropped. So `?exclude=data%5Fcorruption` excludes `data_corruption`, as in etcd.
pub fn go_query(raw: &str) -> Vec<(String, String)> {
    raw.split('&')
        .filter(|pair| !pair.is_empty() && !pair.contains(';'))
        .filter_map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            Some((query_unescape(k)?, query_unescape(v)?))
        })
        .collect()
}

/// Go's `url.QueryUnescape`: `None` for a `%` not followed by two hex digits.
fn query_unescape(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = bytes.get(i + 1..i + 3)?;
                let hex = std::str::from_utf8(hex).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}

/// The checks to run for a request: the one a sub-path names, or the family's minus every
/// `exclude` value.
pub fn selected(kind: Kind, single: Option<&'static str>, excluded: &[&str]) -> Vec<&'static str> {
    match single {
        Some(name) => vec![name],
        None => kind
            .checks()
            .iter()
            .copied()
            .filter(|c| !excluded.contains(c))
            .collect(),
    }
}

/// Runs one named check against this member.
pub async fn run(p: &Pipeline, name: &str) -> Result<(), String> {
    match name {
        "data_corruption" => match p.alarms().await {
            Ok(alarms) if alarms.iter().any(|a| a.alarm == AlarmType::Corrupt as i32) => {
                Err("alarm activated: CORRUPT".into())
            }
            Ok(_) => Ok(()),
            Err(e) => Err(e.to_string()),
        },
        "serializable_read" => read(p, true).await,
        "linearizable_read" => read(p, false).await,
        "non_learner" => match p.raft_status().await {
            Ok(r) if r.is_learner => Err("not supported for learner".into()),
            Ok(_) => Ok(()),
            Err(e) => Err(e.to_string()),
        },
        _ => Ok(()),
    }
}

/// The read every health check makes: one key (`health`), keys only.
pub(crate) fn probe(serializable: bool) -> RangeRequest {
    RangeRequest {
        key: b"health".to_vec(),
        keys_only: true,
        limit: 1,
        serializable,
        ..Default::default()
    }
}

/// A one-key, keys-only read, as root (etcd reads with the root's rights here).
async fn read(p: &Pipeline, serializable: bool) -> Result<(), String> {
    let probe = probe(serializable);
    let who = if p.auth.enabled() {
        AuthInfo {
            username: b"root".to_vec(),
            revision: u64::MAX,
        }
    } else {
        AuthInfo::default()
    };
    // etcd's read gives up after its request timeout (5 s plus two election timeouts).
    let limit = p.config.request_timeout + 2 * p.config.election_timeout;
    match tokio::time::timeout(limit.max(Duration::from_secs(1)), p.range(probe, who)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("context deadline exceeded".into()),
    }
}

#[cfg(test)]
#[path = "health_tests.rs"]
mod tests;
