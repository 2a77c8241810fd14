//! Replays the curl transcripts recorded against etcd 3.4.23 through `plan`,
//! `hash_password`, `apply` and `render`, and compares status, headers and body
//! bytes. `/v2/keys` steps are checked with `can_access` and `unauthorized_answer`.

mod transcripts;

use actcd_v2auth::{
    Api, AuthOp, AuthState, Caller, HttpAnswer, MIN_BCRYPT_COST, Plan, authenticate, hash_password,
    plan, unauthorized_answer,
};
use transcripts::Step;

fn base64(input: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for ch in input.chunks(3) {
        let n = (u32::from(ch[0]) << 16)
            | (u32::from(*ch.get(1).unwrap_or(&0)) << 8)
            | u32::from(*ch.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= ch.len() {
                out.push(T[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Where we knowingly answer differently (see the crate doc); `None`: identical.
fn known_difference(transcript: &str, step: &Step) -> Option<&'static str> {
    match (transcript, step.method, step.path) {
        // etcd stores a create request's stray (empty) `grant` inside the role and
        // prints it on every later read; we keep only the permissions.
        ("ADMIN", "GET", "/v2/auth/roles/r3") => {
            Some("{\"role\":\"r3\",\"permissions\":{\"kv\":{\"read\":null,\"write\":null}}}\n")
        }
        ("ADMIN", "GET", "/v2/auth/roles") if step.resp.contains("\"grant\"") => Some(
            "{\"roles\":[{\"role\":\"r1\",\"permissions\":{\"kv\":{\"read\":null,\"write\":null}}},{\"role\":\"r2\",\"permissions\":{\"kv\":{\"read\":[\"/a\",\"/b\",\"/foo/*\"],\"write\":[]}}},{\"role\":\"r3\",\"permissions\":{\"kv\":{\"read\":null,\"write\":null}}},{\"role\":\"root\",\"permissions\":{\"kv\":{\"read\":[\"/*\"],\"write\":[\"/*\"]}}}]}\n",
        ),
        _ => None,
    }
}

fn replay(name: &str, steps: &[Step]) -> AuthState {
    let mut state = AuthState::new();
    let mut now = 1_700_000_000_000u64;
    for (i, s) in steps.iter().enumerate() {
        let ctx = format!(
            "{name}[{i}] {} {} {:?} {:?}",
            s.method, s.path, s.body, s.user
        );
        let header = s.user.map(|u| format!("Basic {}", base64(u.as_bytes())));
        let caller = authenticate(&state, header.as_deref());
        if let Some(rest) = s.path.strip_prefix("/v2/keys") {
            let (key, query) = rest.split_once('?').unwrap_or((rest, ""));
            let recursive = query.contains("recursive=true");
            let write = !matches!(s.method, "GET" | "HEAD");
            let allowed = state.can_access(&caller, key, write, recursive);
            assert_eq!(allowed, s.status != 401, "{ctx}: can_access");
            if !allowed {
                check(&ctx, &unauthorized_answer(), s, s.resp);
            }
            continue;
        }
        let sub = s.path.strip_prefix("/v2/auth").expect("auth path");
        let answer = match plan(
            &state,
            Api::V2Auth,
            s.method,
            sub,
            s.body.as_bytes(),
            &caller,
        ) {
            Plan::Answer(a) => a,
            Plan::Propose {
                op,
                hash_first,
                render,
            } => {
                let op = match hash_first {
                    Some(pw) => op.with_hash(hash_password(&pw, MIN_BCRYPT_COST).expect("hash")),
                    None => op,
                };
                // What raft carries: JSON bytes.
                let op = AuthOp::decode(&op.encode()).expect("op round trip");
                now += 1;
                let before = state.clone();
                let result = state.apply(&op, now);
                if result.is_err() {
                    assert_eq!(state, before, "{ctx}: failed apply changed the state");
                }
                render.render(result)
            }
        };
        let want = known_difference(name, s).unwrap_or(s.resp);
        check(&ctx, &answer, s, want);
        let recovered = AuthState::recover(&state.save()).expect("recover");
        assert_eq!(recovered, state, "{ctx}: save/recover");
    }
    state
}

fn check(ctx: &str, got: &HttpAnswer, s: &Step, want_body: &str) {
    assert_eq!(
        got.status,
        s.status,
        "{ctx}: status; body {:?}",
        String::from_utf8_lossy(&got.body)
    );
    assert_eq!(String::from_utf8_lossy(&got.body), want_body, "{ctx}: body");
    assert_eq!(got.cluster_id, s.cluster_id, "{ctx}: X-Etcd-Cluster-Id");
    let mut want: Vec<(String, String)> = s
        .headers
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let mut have = got.headers.clone();
    want.sort();
    have.sort();
    assert_eq!(have, want, "{ctx}: headers");
}

#[test]
fn admin_transcript_matches_etcd() {
    let state = replay("ADMIN", transcripts::ADMIN);
    assert!(!state.enabled);
}

#[test]
fn access_transcript_matches_etcd() {
    let state = replay("ACCESS", transcripts::ACCESS);
    assert!(state.users.contains_key("u3"));
    let _ = Caller::Anonymous;
}
