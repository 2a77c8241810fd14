//! Hostile input at volume: one member, a seeded stream of random and
//! malformed requests over several connections (raw gRPC over h2, Watch
//! streams, the JSON gateway and the v2 API over HTTP/1.1), then checks that
//! the member is still alive, sane and small.
//!
//! Every request is generated from the worker's own PRNG (seeded from the run
//! seed and the worker index) without looking at answers, so `w3#1234` (the
//! example id printed beside each answer kind) names one request that
//! `--hostile-show w3#1234 --seed S` prints again.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actcd_proto::etcdserverpb::maintenance_client::MaintenanceClient;
use actcd_proto::etcdserverpb::watch_client::WatchClient;
use actcd_proto::etcdserverpb::{
    AlarmRequest, CompactionRequest, PutRequest, RangeRequest, WatchCancelRequest,
    WatchCreateRequest, WatchProgressRequest, WatchRequest, alarm_request, watch_request,
};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use prost_reflect::{
    DescriptorPool, DynamicMessage, FieldDescriptor, Kind, MessageDescriptor, SerializeOptions,
    Value,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::net::TcpStream;

use crate::Cli;
use crate::cluster::{self, Cluster};
use crate::hostile_auth::{self, Rooted, SharedTokens};
use crate::hostile_raw;

/// etcd's default `--max-request-bytes`.
const MAX_REQUEST: usize = 1_572_864;
/// The gRPC receive limit etcd derives from it (512 KiB of slack).
const GRPC_LIMIT: usize = MAX_REQUEST + 512 * 1024;
/// The sentinel: below every key the generator makes (those never start
/// with a 0 byte), so no generated range can cover it.
const SENTINEL: &[u8] = b"\x00hostile-sentinel";
/// A client-side bound on one request; streams (watch, keepalive, observe,
/// snapshot) are cut after `STREAM_WINDOW`.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
const STREAM_WINDOW: Duration = Duration::from_millis(100);
/// RSS above the idle RSS that counts as unbounded.
const RSS_SLACK_KIB: u64 = 256 * 1024;

/// etcd's gRPC services on the client port, and the family their requests count in.
const SERVICES: &[(&str, &str)] = &[
    ("etcdserverpb.KV", "grpc KV"),
    ("etcdserverpb.Watch", "grpc Watch"),
    ("etcdserverpb.Lease", "grpc Lease"),
    ("etcdserverpb.Cluster", "grpc Cluster"),
    ("etcdserverpb.Maintenance", "grpc Maintenance"),
    ("etcdserverpb.Auth", "grpc Auth"),
    ("v3lockpb.Lock", "grpc Lock"),
    ("v3electionpb.Election", "grpc Election"),
];

/// The JSON gateway's family of a route (`/v3/kv/range` → `json kv`).
fn json_family(path: &str) -> &'static str {
    match path.split('/').nth(2).unwrap_or("") {
        "kv" => "json kv",
        "watch" => "json watch",
        "lease" => "json lease",
        "cluster" => "json cluster",
        "maintenance" => "json maintenance",
        "auth" => "json auth",
        "lock" => "json lock",
        "election" => "json election",
        _ => "json other",
    }
}

/// The JSON gateway's routes and their request messages.
const ROUTES: &[(&str, &str)] = &[
    ("/v3/kv/range", "etcdserverpb.RangeRequest"),
    ("/v3/kv/put", "etcdserverpb.PutRequest"),
    ("/v3/kv/deleterange", "etcdserverpb.DeleteRangeRequest"),
    ("/v3/kv/txn", "etcdserverpb.TxnRequest"),
    ("/v3/kv/compaction", "etcdserverpb.CompactionRequest"),
    ("/v3/watch", "etcdserverpb.WatchRequest"),
    ("/v3/lease/grant", "etcdserverpb.LeaseGrantRequest"),
    ("/v3/lease/revoke", "etcdserverpb.LeaseRevokeRequest"),
    ("/v3/kv/lease/revoke", "etcdserverpb.LeaseRevokeRequest"),
    ("/v3/lease/keepalive", "etcdserverpb.LeaseKeepAliveRequest"),
    (
        "/v3/lease/timetolive",
        "etcdserverpb.LeaseTimeToLiveRequest",
    ),
    (
        "/v3/kv/lease/timetolive",
        "etcdserverpb.LeaseTimeToLiveRequest",
    ),
    ("/v3/lease/leases", "etcdserverpb.LeaseLeasesRequest"),
    ("/v3/kv/lease/leases", "etcdserverpb.LeaseLeasesRequest"),
    ("/v3/cluster/member/add", "etcdserverpb.MemberAddRequest"),
    (
        "/v3/cluster/member/remove",
        "etcdserverpb.MemberRemoveRequest",
    ),
    (
        "/v3/cluster/member/update",
        "etcdserverpb.MemberUpdateRequest",
    ),
    ("/v3/cluster/member/list", "etcdserverpb.MemberListRequest"),
    (
        "/v3/cluster/member/promote",
        "etcdserverpb.MemberPromoteRequest",
    ),
    ("/v3/maintenance/alarm", "etcdserverpb.AlarmRequest"),
    ("/v3/maintenance/status", "etcdserverpb.StatusRequest"),
    (
        "/v3/maintenance/defragment",
        "etcdserverpb.DefragmentRequest",
    ),
    ("/v3/maintenance/hash", "etcdserverpb.HashRequest"),
    ("/v3/maintenance/hashkv", "etcdserverpb.HashKVRequest"),
    ("/v3/maintenance/snapshot", "etcdserverpb.SnapshotRequest"),
    (
        "/v3/maintenance/transfer-leadership",
        "etcdserverpb.MoveLeaderRequest",
    ),
    ("/v3/auth/enable", "etcdserverpb.AuthEnableRequest"),
    ("/v3/auth/disable", "etcdserverpb.AuthDisableRequest"),
    ("/v3/auth/status", "etcdserverpb.AuthStatusRequest"),
    ("/v3/auth/authenticate", "etcdserverpb.AuthenticateRequest"),
    ("/v3/auth/user/add", "etcdserverpb.AuthUserAddRequest"),
    ("/v3/auth/user/get", "etcdserverpb.AuthUserGetRequest"),
    ("/v3/auth/user/list", "etcdserverpb.AuthUserListRequest"),
    ("/v3/auth/user/delete", "etcdserverpb.AuthUserDeleteRequest"),
    (
        "/v3/auth/user/changepw",
        "etcdserverpb.AuthUserChangePasswordRequest",
    ),
    (
        "/v3/auth/user/grant",
        "etcdserverpb.AuthUserGrantRoleRequest",
    ),
    (
        "/v3/auth/user/revoke",
        "etcdserverpb.AuthUserRevokeRoleRequest",
    ),
    ("/v3/auth/role/add", "etcdserverpb.AuthRoleAddRequest"),
    ("/v3/auth/role/get", "etcdserverpb.AuthRoleGetRequest"),
    ("/v3/auth/role/list", "etcdserverpb.AuthRoleListRequest"),
    ("/v3/auth/role/delete", "etcdserverpb.AuthRoleDeleteRequest"),
    (
        "/v3/auth/role/grant",
        "etcdserverpb.AuthRoleGrantPermissionRequest",
    ),
    (
        "/v3/auth/role/revoke",
        "etcdserverpb.AuthRoleRevokePermissionRequest",
    ),
    ("/v3/lock/lock", "v3lockpb.LockRequest"),
    ("/v3/lock/unlock", "v3lockpb.UnlockRequest"),
    ("/v3/election/campaign", "v3electionpb.CampaignRequest"),
    ("/v3/election/proclaim", "v3electionpb.ProclaimRequest"),
    ("/v3/election/leader", "v3electionpb.LeaderRequest"),
    ("/v3/election/resign", "v3electionpb.ResignRequest"),
    ("/v3/election/observe", "v3electionpb.LeaderRequest"),
];

/// How often a method is picked, by its name (1 otherwise): the KV hot
/// path often; what is costly on purpose (defragment, bcrypt, snapshots)
/// or blocks (lock, campaign, observe) rarely.
fn weight(method: &str) -> f64 {
    match method {
        "Range" | "Put" | "Txn" | "range" | "put" | "txn" => 8.0,
        "DeleteRange" | "deleterange" => 3.0,
        "Defragment" | "defragment" => 0.02,
        "Snapshot" | "snapshot" => 0.05,
        "UserAdd" | "UserChangePassword" | "Authenticate" | "add" | "changepw" | "authenticate" => {
            0.1
        }
        "Lock" | "Campaign" | "Observe" | "lock" | "campaign" | "observe" => 0.3,
        "Alarm" | "alarm" => 0.3,
        _ => 1.0,
    }
}

struct Method {
    path: String,
    name: String,
    family: &'static str,
    input: MessageDescriptor,
    streaming: bool,
}

struct Route {
    path: &'static str,
    input: MessageDescriptor,
    streaming: bool,
}

/// The descriptors and weight tables, shared by every worker.
struct Schema {
    methods: Vec<Method>,
    method_weights: Vec<f64>,
    routes: Vec<Route>,
    route_weights: Vec<f64>,
}

impl Schema {
    fn load() -> Result<Schema, String> {
        let pool = DescriptorPool::decode(actcd_proto::FILE_DESCRIPTOR_SET)
            .map_err(|e| format!("descriptors: {e}"))?;
        let mut methods = Vec::new();
        for (s, family) in SERVICES {
            let svc = pool
                .get_service_by_name(s)
                .ok_or_else(|| format!("no service {s}"))?;
            for m in svc.methods() {
                methods.push(Method {
                    path: format!("/{}/{}", svc.full_name(), m.name()),
                    name: m.name().to_owned(),
                    family,
                    input: m.input(),
                    // Lock and Campaign may wait (for a holder to go): treated as streams.
                    streaming: m.is_server_streaming()
                        || m.is_client_streaming()
                        || matches!(m.name(), "Lock" | "Campaign"),
                });
            }
        }
        let mut routes = Vec::new();
        for (path, msg) in ROUTES {
            let input = pool
                .get_message_by_name(msg)
                .ok_or_else(|| format!("no message {msg}"))?;
            routes.push(Route {
                path,
                input,
                streaming: matches!(
                    *path,
                    "/v3/watch"
                        | "/v3/lock/lock"
                        | "/v3/election/campaign"
                        | "/v3/lease/keepalive"
                        | "/v3/election/observe"
                        | "/v3/maintenance/snapshot"
                ),
            });
        }
        let method_weights = methods.iter().map(|m| weight(&m.name)).collect();
        let route_weights = routes
            .iter()
            .map(|r| weight(r.path.rsplit('/').next().unwrap_or("")))
            .collect();
        Ok(Schema {
            methods,
            method_weights,
            routes,
            route_weights,
        })
    }
}

/// One generated request.
#[derive(Debug)]
enum Req {
    /// A raw gRPC call: path, content-type (None: no header), extra headers,
    /// the HTTP/2 body (framing included), whether the method streams.
    Grpc {
        path: String,
        content_type: Option<&'static str>,
        headers: Vec<(&'static str, String)>,
        body: Vec<u8>,
        streaming: bool,
    },
    /// A Watch stream: these requests, then half-close.
    Watch(Vec<WatchRequest>),
    /// An HTTP/1.1 request (gateway, v2, health, metrics...).
    Http {
        method: &'static str,
        path: String,
        content_type: Option<&'static str>,
        headers: Vec<(&'static str, String)>,
        body: Vec<u8>,
        streaming: bool,
    },
    /// Bytes written by hand on a fresh connection (`hostile_raw::CASES[case]`).
    Raw { case: &'static str, bytes: Vec<u8> },
}

/// The credentials a request of the auth phase carries, resolved when it is sent (tokens
/// are the run's, not the generator's).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Cred {
    /// None at all.
    Anon,
    /// The narrow user's valid token.
    User,
    /// The user's token with one character changed.
    Flipped(usize),
    /// One of [`GARBAGE_TOKENS`].
    Garbage(usize),
    /// Basic credentials, one of [`BASIC`] (the gateway reads them; gRPC does not).
    Basic(usize),
}

const GARBAGE_TOKENS: &[&str] = &[
    "",
    "x",
    "root",
    "hostile-user",
    "abcdefghijklmnop.1",
    "ABCDEFGHIJKLMNOP.99999999999999999999",
    "aaaaaaaaaaaaaaaa.-1",
    "eyJhbGciOiJub25lIn0.eyJ1c2VybmFtZSI6InJvb3QiLCJyZXZpc2lvbiI6MX0.",
    "Bearer ",
    "..",
];

/// hostile-user:hostile-pw, root:root, hostile-user:wrong, root:hostile-root-pw-no, u:u,
/// not base64.
const BASIC: &[&str] = &[
    "Basic aG9zdGlsZS11c2VyOmhvc3RpbGUtcHc=",
    "Basic cm9vdDpyb290",
    "Basic aG9zdGlsZS11c2VyOndyb25n",
    "Basic cm9vdDpob3N0aWxlLXJvb3QtcHctbm8=",
    "Basic dTp1",
    "Basic !!!",
];

impl Cred {
    fn tag(self) -> &'static str {
        match self {
            Cred::Anon => "anon",
            Cred::User => "user",
            Cred::Flipped(_) => "flipped-token",
            Cred::Garbage(_) => "bad-token",
            Cred::Basic(0) => "basic-user",
            Cred::Basic(_) => "basic-bad",
        }
    }

    /// The token (or Basic header value) this credential stands for now.
    fn value(self, tokens: &SharedTokens) -> Option<String> {
        let user = || {
            tokens
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .user
                .clone()
        };
        match self {
            Cred::Anon => None,
            Cred::User => user(),
            Cred::Flipped(i) => user().map(|t| {
                let mut b = t.into_bytes();
                if !b.is_empty() {
                    let i = i % b.len();
                    b[i] = if b[i] == b'a' { b'b' } else { b'a' };
                }
                String::from_utf8_lossy(&b).into_owned()
            }),
            Cred::Garbage(i) => Some(GARBAGE_TOKENS[i % GARBAGE_TOKENS.len()].to_owned()),
            Cred::Basic(i) => Some(BASIC[i % BASIC.len()].to_owned()),
        }
    }
}

/// One generated request with what it counts as.
#[derive(Debug)]
struct Job {
    /// The kind, for the histogram ([`LABELS`]).
    label: &'static str,
    /// The service or route family it goes to.
    family: &'static str,
    /// The method or route it aims at (before any path mangling), for coverage.
    target: String,
    cred: Cred,
    req: Req,
}

/// Request kinds, for the histogram.
const LABELS: &[&str] = &[
    "grpc-valid",
    "grpc-mutated",
    "grpc-oversized",
    "grpc-badframe",
    "grpc-badpath",
    "watch",
    "json",
    "v2",
    "http-routes",
    "raw",
];

struct Gen {
    rng: StdRng,
    schema: Arc<Schema>,
    /// Deep mode: lists of one, request_txn picked whenever offered.
    deep: bool,
    /// Against etcd: no unknown Range sort_target nor Alarm action (etcd
    /// 3.5.1 panics on either: a nil sorter in apply.go, a nil response in
    /// maintenance.go).
    etcd_safe: bool,
    max_depth: u32,
    /// Values left for the message being made (nested lists would
    /// otherwise multiply).
    budget: u32,
    /// The auth phase: each request also gets credentials ([`Cred`]).
    auth: bool,
}

fn pick_weighted(rng: &mut StdRng, weights: &[f64]) -> usize {
    let total: f64 = weights.iter().sum();
    let mut x = rng.random_range(0.0..total);
    for (i, w) in weights.iter().enumerate() {
        if x < *w {
            return i;
        }
        x -= w;
    }
    weights.len() - 1
}

const ODD_NAMES: &[&str] = &[
    "",
    "u",
    "user",
    "ROOT",
    "root2",
    "a b",
    "a/b",
    "../..",
    "\u{e9}t\u{e9}",
    "\u{1F600}",
    "\t",
    " ",
    "x\0y",
    "*",
    "%s%n",
    "guest",
    "role",
];

const ODD_URLS: &[&str] = &[
    "",
    "http://127.0.0.1:1",
    "http://127.0.0.1:2",
    "not a url",
    "unix://x",
    "http://[::1]:99999",
    "https://example.invalid:2380",
    "http://127.0.0.1",
    "http://127.0.0.1:2380/path?q=1",
    "ftp://127.0.0.1:21",
];

impl Gen {
    fn new(seed: u64, worker: usize, schema: Arc<Schema>) -> Gen {
        Gen {
            rng: StdRng::seed_from_u64(
                seed ^ (worker as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03),
            ),
            schema,
            deep: false,
            etcd_safe: false,
            max_depth: 6,
            budget: 0,
            auth: false,
        }
    }

    /// The generator of worker `worker` in the auth phase (its own stream: ids `aW#I`).
    fn auth_phase(seed: u64, worker: usize, schema: Arc<Schema>) -> Gen {
        let mut g = Gen::new(seed ^ 0xA17B_0000_0000_0001, worker, schema);
        g.auth = true;
        g
    }

    fn p(&mut self, p: f64) -> bool {
        self.rng.random_bool(p)
    }

    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.rng.random_range(0..xs.len())]
    }

    /// A key: mostly one of 200 (so the store stays small), sometimes odd;
    /// never starting with a 0 byte (the sentinel lives below them all).
    fn key(&mut self) -> Vec<u8> {
        let mut k = match self.rng.random_range(0..20) {
            0 => Vec::new(),
            1 => vec![0xff; self.rng.random_range(1..4)],
            2 => (0..self.rng.random_range(1..64))
                .map(|_| self.rng.random())
                .collect(),
            3 if self.p(0.05) => vec![b'k'; self.rng.random_range(1000..70_000)],
            4 => b"\xff\xfe\xfd invalid utf8".to_vec(),
            _ => format!("h/{}", self.rng.random_range(0..200)).into_bytes(),
        };
        if k.first() == Some(&0) {
            k[0] = 1;
        }
        k
    }

    fn range_end(&mut self) -> Vec<u8> {
        match self.rng.random_range(0..8) {
            0 => vec![0],
            1 => b"h0".to_vec(),
            2 => vec![0xff],
            3 => b"\x00\x00".to_vec(),
            4 => b"a".to_vec(), // below most keys: an empty or backwards range
            _ => self.key(),
        }
    }

    fn bytes(&mut self) -> Vec<u8> {
        match self.rng.random_range(0..10) {
            0 => Vec::new(),
            1 => (0..self.rng.random_range(0..300))
                .map(|_| self.rng.random())
                .collect(),
            2 if self.p(0.1) => vec![b'v'; self.rng.random_range(1000..64_000)],
            _ => format!("v{}", self.rng.random::<u32>()).into_bytes(),
        }
    }

    fn string(&mut self, field: &str) -> String {
        if field.contains("url") || field.contains("URL") {
            return self.pick(ODD_URLS).to_owned();
        }
        if field == "version" {
            return self
                .pick(&["", "3.4.0", "3.5", "x", "3.6.0", "99.0.0", "3.5.1"])
                .to_owned();
        }
        if self.p(0.05) {
            return "n".repeat(self.rng.random_range(100..5000));
        }
        self.pick(ODD_NAMES).to_owned()
    }

    fn int(&mut self, field: &str) -> i64 {
        let edge = [0, 1, -1, 2, i64::MAX, i64::MIN, i64::MAX - 1, 1 << 53];
        if self.p(0.3) {
            return self.pick(&edge);
        }
        match field {
            "lease" | "ID" | "id" => self.rng.random_range(1..30),
            "TTL" | "ttl" => self.pick(&[0, 1, 3, 60, 9_000_000_000, 9_000_000_001, -5]),
            "limit" => self.rng.random_range(0..50),
            "watch_id" => self.rng.random_range(-2..10),
            _ => self.rng.random_range(-10..100_000),
        }
    }

    fn enum_number(&mut self, e: &prost_reflect::EnumDescriptor) -> i32 {
        let safe = self.etcd_safe
            && matches!(
                e.full_name(),
                "etcdserverpb.RangeRequest.SortTarget" | "etcdserverpb.AlarmRequest.AlarmAction"
            );
        if self.p(0.85) || safe {
            let vals: Vec<i32> = e.values().map(|v| v.number()).collect();
            self.pick(&vals)
        } else {
            self.pick(&[-1, 7, 99, i32::MAX, i32::MIN, 1000])
        }
    }

    fn scalar(&mut self, f: &FieldDescriptor, depth: u32) -> Option<Value> {
        if self.budget == 0 {
            return None;
        }
        self.budget -= 1;
        let name = f.name();
        Some(match f.kind() {
            Kind::Message(md) => {
                if depth >= self.max_depth {
                    return None;
                }
                Value::Message(self.message(&md, depth + 1))
            }
            Kind::Enum(e) => Value::EnumNumber(self.enum_number(&e)),
            Kind::Bool => Value::Bool(self.rng.random()),
            Kind::String => Value::String(self.string(name)),
            Kind::Bytes => Value::Bytes(Bytes::from(match name {
                "key" | "name" | "prefix" => self.key(),
                "range_end" => self.range_end(),
                _ => self.bytes(),
            })),
            Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => Value::I64(self.int(name)),
            Kind::Uint64 | Kind::Fixed64 => Value::U64(self.int(name) as u64),
            Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => Value::I32(self.int(name) as i32),
            Kind::Uint32 | Kind::Fixed32 => Value::U32(self.int(name) as u32),
            Kind::Double => Value::F64(self.rng.random()),
            Kind::Float => Value::F32(self.rng.random()),
        })
    }

    fn value(&mut self, f: &FieldDescriptor, depth: u32) -> Option<Value> {
        if f.is_list() {
            let n = if self.deep {
                1
            } else if self.p(0.02) {
                self.rng.random_range(100..300)
            } else {
                self.rng.random_range(0..4)
            };
            let items: Vec<Value> = (0..n).filter_map(|_| self.scalar(f, depth)).collect();
            Some(Value::List(items))
        } else if f.is_map() {
            None
        } else {
            self.scalar(f, depth)
        }
    }

    /// A structurally valid message of `md` with random field values.
    fn message(&mut self, md: &MessageDescriptor, depth: u32) -> DynamicMessage {
        let mut msg = DynamicMessage::new(md.clone());
        for f in md.fields() {
            if f.containing_oneof().is_some() {
                continue;
            }
            if self.p(0.6)
                && let Some(v) = self.value(&f, depth)
            {
                msg.set_field(&f, v);
            }
        }
        for o in md.oneofs() {
            let fields: Vec<FieldDescriptor> = o.fields().collect();
            let txn = fields.iter().position(|f| f.name() == "request_txn");
            let chosen = match txn {
                Some(i) if self.deep => Some(i),
                _ if self.p(0.85) => Some(self.rng.random_range(0..fields.len())),
                _ => None,
            };
            if let Some(i) = chosen
                && let Some(v) = self.value(&fields[i], depth)
            {
                msg.set_field(&fields[i], v);
            }
        }
        msg
    }

    fn structured(&mut self, md: &MessageDescriptor) -> DynamicMessage {
        if md.name() == "MemberAddRequest" {
            // A voting member added to a single member costs it its quorum
            // (etcd allows that one case on purpose): learners only.
            let mut m = DynamicMessage::new(md.clone());
            if let Some(f) = md.get_field_by_name("peerURLs") {
                let url = self.pick(ODD_URLS);
                m.set_field(&f, Value::List(vec![Value::String(url.to_owned())]));
            }
            if let Some(f) = md.get_field_by_name("isLearner") {
                m.set_field(&f, Value::Bool(true));
            }
            return m;
        }
        self.budget = 2000;
        self.deep = self.p(0.02);
        self.max_depth = if self.deep {
            self.rng.random_range(10..130)
        } else {
            6
        };
        let m = self.message(md, 0);
        self.deep = false;
        m
    }

    /// One request, never depending on an answer.
    fn next(&mut self) -> Job {
        let r = self.rng.random_range(0..100);
        let (label, family, target, req) = if r < 56 {
            self.grpc()
        } else if r < 61 {
            let target = "/etcdserverpb.Watch/Watch (stream)".to_owned();
            ("watch", "grpc Watch", target, Req::Watch(self.watch()))
        } else if r < 85 {
            let (family, target, req) = self.json();
            ("json", family, target, req)
        } else if r < 91 {
            ("v2", "http v2-keys", "/v2/keys".to_owned(), self.v2())
        } else if r < 97 {
            let (family, target, req) = self.http_routes();
            ("http-routes", family, target, req)
        } else {
            let case = self.rng.random_range(0..hostile_raw::CASES.len());
            let name = hostile_raw::CASES[case];
            let bytes = hostile_raw::generate(&mut self.rng, case);
            let family = if name.starts_with("http1") {
                "raw http1"
            } else {
                "raw h2"
            };
            let req = Req::Raw { case: name, bytes };
            ("raw", family, format!("raw {name}"), req)
        };
        let cred = if !self.auth || matches!(label, "v2" | "http-routes" | "raw") {
            Cred::Anon
        } else {
            match self.rng.random_range(0..100) {
                0..35 => Cred::Anon,
                35..45 => Cred::Garbage(self.rng.random_range(0..GARBAGE_TOKENS.len())),
                45..50 => Cred::Flipped(self.rng.random_range(0..64)),
                // Basic costs the member a bcrypt: rare.
                50..52 if label == "json" => Cred::Basic(self.rng.random_range(0..BASIC.len())),
                _ => Cred::User,
            }
        };
        Job {
            label,
            family,
            target,
            cred,
            req,
        }
    }

    fn grpc(&mut self) -> (&'static str, &'static str, String, Req) {
        let schema = self.schema.clone();
        let i = pick_weighted(&mut self.rng, &schema.method_weights);
        let m = &schema.methods[i];
        let (family, target) = (m.family, m.path.clone());
        let mut path = m.path.clone();
        let mut content_type = Some("application/grpc");
        let mut headers = Vec::new();
        let msg = prost::Message::encode_to_vec(&self.structured(&m.input));
        let kind = if m.name == "MemberAdd" {
            0
        } else {
            self.rng.random_range(0..100)
        };
        let (label, body) = if kind < 55 {
            ("grpc-valid", frame(&msg))
        } else if kind < 85 {
            let b = self.mutate(msg, &m.input);
            ("grpc-mutated", frame(&b))
        } else if kind < 88 {
            ("grpc-oversized", frame(&self.oversized()))
        } else if kind < 95 {
            let (b, h, ct) = self.bad_frame(msg);
            if let Some(h) = h {
                headers.push(h);
            }
            content_type = ct;
            ("grpc-badframe", b)
        } else {
            path = self.bad_path(&path);
            ("grpc-badpath", frame(&msg))
        };
        if self.p(0.97) {
            headers.push(("grpc-timeout", "3S".to_owned()));
        } else {
            let t = self.pick(&["abc", "99999999999H", "0n", "1", "-1S", "", "5m"]);
            headers.push(("grpc-timeout", t.to_owned()));
        }
        (
            label,
            family,
            target,
            Req::Grpc {
                path,
                content_type,
                headers,
                body,
                streaming: m.streaming,
            },
        )
    }

    fn mutate(&mut self, mut b: Vec<u8>, md: &MessageDescriptor) -> Vec<u8> {
        match self.rng.random_range(0..9) {
            0 if !b.is_empty() => {
                for _ in 0..self.rng.random_range(1..9) {
                    let i = self.rng.random_range(0..b.len());
                    b[i] ^= 1 << self.rng.random_range(0..8);
                }
            }
            1 if !b.is_empty() => b.truncate(self.rng.random_range(0..b.len())),
            2 => {
                // An unknown field of a random wire type.
                let tag: u64 = self.rng.random_range(16..(1 << 29));
                let wt = self.pick(&[0u64, 1, 2, 5]);
                varint(&mut b, (tag << 3) | wt);
                match wt {
                    0 => varint(&mut b, self.rng.random()),
                    1 => b.extend_from_slice(&self.rng.random::<u64>().to_le_bytes()),
                    2 => {
                        varint(&mut b, 3);
                        b.extend_from_slice(b"xyz");
                    }
                    _ => b.extend_from_slice(&self.rng.random::<u32>().to_le_bytes()),
                }
            }
            3 => {
                // A known field with the wrong wire type (or groups, 3/4, or the invalid 6/7).
                if let Some(f) = md
                    .fields()
                    .nth(self.rng.random_range(0..md.fields().len().max(1)))
                {
                    let wt = self.rng.random_range(0..8u64);
                    varint(&mut b, (u64::from(f.number()) << 3) | wt);
                    varint(&mut b, 1);
                }
            }
            4 => {
                // A length prefix far past the end.
                let tag = md
                    .fields()
                    .find(|f| matches!(f.kind(), Kind::Bytes | Kind::String | Kind::Message(_)))
                    .map_or(1, |f| f.number());
                varint(&mut b, (u64::from(tag) << 3) | 2);
                varint(
                    &mut b,
                    self.pick(&[u64::MAX, 1 << 31, 1 << 40, 100, 0xffff_ffff]),
                );
                b.extend_from_slice(b"short");
            }
            5 => {
                // Invalid UTF-8 in a string field.
                if let Some(f) = md.fields().find(|f| matches!(f.kind(), Kind::String)) {
                    varint(&mut b, (u64::from(f.number()) << 3) | 2);
                    varint(&mut b, 3);
                    b.extend_from_slice(b"\xff\xfe\xc0");
                } else {
                    b.push(0xff);
                }
            }
            6 => {
                // An over-long varint (11 bytes).
                b.push(0x08);
                b.extend_from_slice(&[0xff; 10]);
                b.push(0x01);
            }
            7 => {
                b = (0..self.rng.random_range(0..200))
                    .map(|_| self.rng.random())
                    .collect();
            }
            _ => {
                // Random byte insertions.
                for _ in 0..self.rng.random_range(1..5) {
                    let i = self.rng.random_range(0..=b.len());
                    b.insert(i, self.rng.random());
                }
            }
        }
        b
    }

    /// A Put around and over the request limits.
    fn oversized(&mut self) -> Vec<u8> {
        let size = self.pick(&[
            MAX_REQUEST - 64,
            MAX_REQUEST - 1,
            MAX_REQUEST,
            MAX_REQUEST + 1,
            MAX_REQUEST + 100,
            GRPC_LIMIT - 16,
            GRPC_LIMIT + 1,
            4 * 1024 * 1024 + 1,
            6 * 1024 * 1024,
        ]);
        let put = PutRequest {
            key: b"h/big".to_vec(),
            value: vec![b'x'; size],
            ..Default::default()
        };
        prost::Message::encode_to_vec(&put)
    }

    /// Bad gRPC framing or headers: (body, extra header, content-type).
    #[allow(clippy::type_complexity)]
    fn bad_frame(
        &mut self,
        msg: Vec<u8>,
    ) -> (
        Vec<u8>,
        Option<(&'static str, String)>,
        Option<&'static str>,
    ) {
        let ct = Some("application/grpc");
        match self.rng.random_range(0..11) {
            0 => {
                let mut b = frame(&msg);
                b[0] = 1; // compressed, no grpc-encoding
                (b, None, ct)
            }
            1 => {
                let mut b = frame(&msg);
                b[0] = 1;
                (b, Some(("grpc-encoding", "gzip".to_owned())), ct)
            }
            2 => {
                let mut b = frame(&msg);
                let len = (msg.len() as u32 + self.rng.random_range(1..100)).to_be_bytes();
                b[1..5].copy_from_slice(&len); // longer than what follows
                (b, None, ct)
            }
            3 if !msg.is_empty() => {
                let mut b = frame(&msg);
                let len = (msg.len() as u32 - 1).to_be_bytes();
                b[1..5].copy_from_slice(&len); // a stray byte after
                (b, None, ct)
            }
            4 => (Vec::new(), None, ct), // no message at all
            5 => {
                let mut b = frame(&msg);
                b.extend_from_slice(&frame(&msg)); // two messages to a unary call
                (b, None, ct)
            }
            6 => (
                frame(&msg)[..self.rng.random_range(0..5)].to_vec(),
                None,
                ct,
            ), // a cut header
            7 => {
                let mut b = frame(&msg);
                b[0] = self.rng.random_range(2..=255); // an undefined flag
                (b, None, ct)
            }
            8 => (
                frame(&msg),
                None,
                self.pick(&[
                    Some("application/json"),
                    Some("text/plain"),
                    None,
                    Some("application/grpc+json"),
                    Some("application/grpc+proto"),
                    Some("application/grpcx"),
                ]),
            ),
            9 => {
                let mut b = vec![0, 0xff, 0xff, 0xff, 0xff]; // 4 GiB announced
                b.extend_from_slice(&msg);
                (b, None, ct)
            }
            _ => (
                frame(&msg),
                Some((
                    "grpc-encoding",
                    self.pick(&["gzip", "br", "identity", "x"]).to_owned(),
                )),
                ct,
            ),
        }
    }

    fn bad_path(&mut self, path: &str) -> String {
        match self.rng.random_range(0..8) {
            0 => "/etcdserverpb.KV/Nope".to_owned(),
            1 => "/etcdserverpb.Nope/Range".to_owned(),
            2 => path.to_lowercase(),
            3 => format!("{path}/"),
            4 => "/".to_owned(),
            5 => format!("/{}", "x".repeat(self.rng.random_range(100..8000))),
            6 => "/etcdserverpb.KV/".to_owned(),
            _ => "/actcdpb.RaftPeer/Send".to_owned(),
        }
    }

    fn watch(&mut self) -> Vec<WatchRequest> {
        let n = self.rng.random_range(1..8);
        (0..n)
            .map(|_| {
                let u = match self.rng.random_range(0..10) {
                    0..6 => {
                        let filters = (0..self.rng.random_range(0..3))
                            .map(|_| self.pick(&[0, 1, 2, -1, 99]))
                            .collect();
                        watch_request::RequestUnion::CreateRequest(WatchCreateRequest {
                            key: self.key(),
                            range_end: if self.p(0.5) {
                                self.range_end()
                            } else {
                                Vec::new()
                            },
                            start_revision: self.pick(&[0, 1, 2, -1, 5, i64::MAX, 100_000]),
                            progress_notify: self.rng.random(),
                            filters,
                            prev_kv: self.rng.random(),
                            watch_id: self.pick(&[0, 0, 0, 1, 2, -1, 7, i64::MAX]),
                            fragment: self.rng.random(),
                        })
                    }
                    6..8 => watch_request::RequestUnion::CancelRequest(WatchCancelRequest {
                        watch_id: self.pick(&[0, 1, 2, -1, 99, i64::MAX]),
                    }),
                    _ => watch_request::RequestUnion::ProgressRequest(WatchProgressRequest {}),
                };
                WatchRequest {
                    request_union: if self.p(0.95) { Some(u) } else { None },
                }
            })
            .collect()
    }

    fn json(&mut self) -> (&'static str, String, Req) {
        let schema = self.schema.clone();
        let i = pick_weighted(&mut self.rng, &schema.route_weights);
        let route = &schema.routes[i];
        let msg = self.structured(&route.input);
        let opts = SerializeOptions::new()
            .use_proto_field_name(self.rng.random())
            .stringify_64_bit_integers(self.rng.random())
            .use_enum_numbers(self.rng.random());
        let mut value = msg
            .serialize_with_options(serde_json::value::Serializer, &opts)
            .unwrap_or(serde_json::Value::Null);
        let shape = if route.path.ends_with("member/add") {
            0
        } else {
            self.rng.random_range(0..16)
        };
        let raw: Vec<u8> = match shape {
            0..6 => serde_json::to_vec(&value).unwrap_or_default(),
            6 => {
                if let Some(o) = value.as_object_mut() {
                    let k = self.pick(&["key", "value", "range_end", "limit", "ID", "compare"]);
                    let i = self.rng.random_range(0..9);
                    let v = [
                        serde_json::json!(true),
                        serde_json::json!(1.5),
                        serde_json::json!("x"),
                        serde_json::json!([]),
                        serde_json::json!({}),
                        serde_json::Value::Null,
                        serde_json::json!(-1),
                        serde_json::json!("99999999999999999999999"),
                        serde_json::json!([1, 2, 3]),
                    ][i]
                        .clone();
                    o.insert(k.to_owned(), v);
                }
                serde_json::to_vec(&value).unwrap_or_default()
            }
            7 => {
                let b = self.pick(&["!!!", "YQ", "a===", "Y W E=", "\u{e9}", "_-_-"]);
                format!("{{\"key\":\"{b}\",\"value\":\"{b}\"}}").into_bytes()
            }
            8 => {
                let depth = self.pick(&[50, 127, 128, 129, 500, 5000, 100_000]);
                let field = self.pick(&["key", "compare", "success", "unknown"]);
                let mut s = format!("{{\"{field}\":");
                s.push_str(&"[".repeat(depth));
                s.push_str(&"]".repeat(depth));
                s.push('}');
                s.into_bytes()
            }
            9 => {
                let mut b = serde_json::to_vec(&value).unwrap_or_default();
                let at = b.iter().position(|&c| c == b'"').map_or(b.len(), |p| p + 1);
                b.splice(at..at, [0xff, 0xfe, 0xc3]);
                b
            }
            10 => {
                let b = serde_json::to_vec(&value).unwrap_or_default();
                let cut = self.rng.random_range(0..=b.len());
                b[..cut].to_vec()
            }
            11 => {
                let mut b = serde_json::to_vec(&value).unwrap_or_default();
                b.extend_from_slice(self.pick(&[&b"}"[..], b"garbage", b" {}", b"\0"]));
                b
            }
            12 => self
                .pick(&[
                    &b""[..],
                    b"null",
                    b"[]",
                    b"\"s\"",
                    b"123",
                    b"{",
                    b"{\"key\":}",
                    b"{\"nope\":1}",
                    b"{\"key\":\"YQ==\",\"key\":\"Yg==\"}",
                    b"{\"limit\":1e400}",
                    b"{\"limit\":123456789012345678901234567890}",
                    b"{\"limit\":\"0x10\"}",
                    b"{\"sort_order\":\"NOPE\"}",
                    b"{\"sort_order\":99}",
                    b"{\"key\":\"YQ==\",\"range_end\":\"AA==\",\"limit\":-1}",
                    b"{\"compare\":[{\"target\":\"VALUE\",\"key\":\"YQ==\"}],\"success\":[{}]}",
                ])
                .to_vec(),
            13 => {
                let mut s = b"{\"key\":\"".to_vec();
                s.extend(std::iter::repeat_n(b'A', MAX_REQUEST * 4 / 3 + 8));
                s.extend_from_slice(b"\"}");
                s
            }
            _ => {
                let n = self.rng.random_range(0..200);
                (0..n).map(|_| self.rng.random()).collect()
            }
        };
        let family = json_family(route.path);
        let mut target = route.path.to_owned();
        let (path, streaming) = if self.p(0.15) {
            // etcd 3.4's prefix, still served.
            target = format!("/v3beta{}", &route.path[3..]);
            (target.clone(), route.streaming)
        } else if self.p(0.9) || route.path.ends_with("member/add") {
            (route.path.to_owned(), route.streaming)
        } else {
            let p = match self.rng.random_range(0..8) {
                0 => format!("{}/", route.path),
                1 => route.path.to_uppercase(),
                2 => format!("{}?x=1&key=YQ==", route.path),
                3 => "/v3/kv/".to_owned(),
                4 => format!("/v3beta{}", &route.path[3..]),
                5 => format!("/v3/{}", "z".repeat(self.rng.random_range(1..9000))),
                6 => route.path.replacen("/v3/", "/v3//", 1),
                _ => format!("/v3{}", route.path[3..].replace('/', "%2F")),
            };
            (p, route.streaming)
        };
        let method = if self.p(0.88) {
            "POST"
        } else {
            self.pick(&["GET", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"])
        };
        let content_type = if self.p(0.8) {
            Some("application/json")
        } else {
            self.pick(&[
                None,
                Some("text/plain"),
                Some("application/grpc"),
                Some("application/x-www-form-urlencoded"),
            ])
        };
        let req = Req::Http {
            method,
            path,
            content_type,
            headers: Vec::new(),
            body: raw,
            streaming,
        };
        (family, target, req)
    }

    fn v2(&mut self) -> Req {
        let key = self.pick(&[
            "a", "b/c", "d/", "", "%zz", "..", "a/../b", "_hidden", "dir", "dir/x", "%00", "q?x",
        ]);
        let mut q = Vec::new();
        let params = [
            "recursive",
            "sorted",
            "quorum",
            "waitIndex",
            "prevExist",
            "prevIndex",
            "prevValue",
            "dir",
            "ttl",
            "value",
            "refresh",
            "noValueOnSuccess",
        ];
        for _ in 0..self.rng.random_range(0..4) {
            let p = self.pick(&params);
            let v = self.pick(&[
                "true",
                "false",
                "1",
                "-1",
                "x",
                "",
                "99999999999999999999",
                "0",
            ]);
            q.push(format!("{p}={v}"));
        }
        // A wait on an old index: answered at once, refused as cleared, or (no change under
        // the key since) waiting, which is cut.
        let wait = self.p(0.05);
        if wait {
            q.push("wait=true&waitIndex=1".to_owned());
        }
        let method = self.pick(&[
            "GET", "GET", "PUT", "PUT", "POST", "DELETE", "HEAD", "PATCH",
        ]);
        let mut body = Vec::new();
        if method == "PUT" || method == "POST" {
            let v = self.pick(&["v", "", "%zz", "a&b", "\u{e9}"]);
            body = format!("value={v}").into_bytes();
            if self.p(0.3) {
                let t = self.pick(&["5", "-1", "x", "99999999999999999999", "0"]);
                body.extend_from_slice(format!("&ttl={t}").as_bytes());
            }
            if self.p(0.2) {
                body.extend_from_slice(b"&dir=true");
            }
            if self.p(0.2) {
                body.extend_from_slice(b"&prevExist=false");
            }
        }
        let path = if q.is_empty() {
            format!("/v2/keys/h/{key}")
        } else {
            format!("/v2/keys/h/{key}?{}", q.join("&"))
        };
        Req::Http {
            method,
            path,
            content_type: Some("application/x-www-form-urlencoded"),
            headers: Vec::new(),
            body,
            streaming: wait,
        }
    }

    /// The other HTTP routes: `/v2/members`, `/v2/machines`, `/v2/stats/*`, `/v2/auth/*`,
    /// `/v2/security/*`, `/health`, `/livez`, `/readyz`, `/version`, `/metrics`, and paths
    /// nobody serves. Never a body that would add a voting member (a v2 member add has no
    /// learner flag): only URLs etcd refuses.
    fn http_routes(&mut self) -> (&'static str, String, Req) {
        let mut headers = Vec::new();
        if self.p(0.3) {
            headers.push(("authorization", self.pick(BASIC).to_owned()));
        }
        let name = self.pick(&["u", "user", "guest", "root", "a%20b", "%2e%2e", "x", ""]);
        let (family, target, method, path, body): (_, _, &'static str, String, Vec<u8>) =
            match self.rng.random_range(0..20) {
                0..3 => {
                    let method = self.pick(&["GET", "GET", "POST", "PUT", "DELETE", "HEAD"]);
                    let sub = match method {
                        "GET" | "HEAD" => self
                            .pick(&["", "/", "/leader", "/x", "/leader/x"])
                            .to_owned(),
                        "POST" => String::new(),
                        _ => format!("/{:x}", self.rng.random::<u64>() | 1 << 62),
                    };
                    let body = if method == "GET" || method == "HEAD" {
                        Vec::new()
                    } else {
                        self.pick(&[
                            &br#"{"peerURLs":["not a url"]}"#[..],
                            br#"{"peerURLs":["ftp://127.0.0.1:21"]}"#,
                            br#"{"peerURLs":["http://127.0.0.1"]}"#,
                            br#"{"peerURLs":["http://127.0.0.1:2380/path?q=1"]}"#,
                            br#"{"peerURLs":[""]}"#,
                            br#"{"peerURLs":"http://127.0.0.1:1"}"#,
                            br#"{"peerURLs":[1]}"#,
                            b"{",
                            b"",
                            b"\xff\xfe",
                        ])
                        .to_vec()
                    };
                    let path = format!("/v2/members{sub}");
                    let target = "/v2/members".to_owned();
                    ("http v2-members", target, method, path, body)
                }
                3 => {
                    let sub = self.pick(&["/self", "/leader", "/store", "", "/x", "/self/"]);
                    let method = self.pick(&["GET", "GET", "GET", "POST", "DELETE"]);
                    let path = format!("/v2/stats{sub}");
                    let target = "/v2/stats".to_owned();
                    ("http v2-stats", target, method, path, Vec::new())
                }
                4 => {
                    let method = self.pick(&["GET", "HEAD", "POST"]);
                    let path = "/v2/machines".to_owned();
                    ("http v2-stats", path.clone(), method, path, Vec::new())
                }
                5..8 => {
                    // etcd's v2 auth API.
                    let sub = match self.rng.random_range(0..6) {
                        0 => "/enable".to_owned(),
                        1 => "/users".to_owned(),
                        2 => "/roles".to_owned(),
                        3 => format!("/users/{name}"),
                        4 => format!("/roles/{name}"),
                        _ => format!("/{}", self.pick(&["", "x", "users/u/grant", "roles/r/x/y"])),
                    };
                    let method = self.pick(&["GET", "GET", "PUT", "DELETE", "HEAD", "POST"]);
                    let body = self.v2_auth_body(name);
                    let path = format!("/v2/auth{sub}");
                    ("http v2-auth", "/v2/auth".to_owned(), method, path, body)
                }
                8..10 => {
                    // The v2 auth RFC's API.
                    let sub = match self.rng.random_range(0..7) {
                        0 => "/users".to_owned(),
                        1 => "/roles".to_owned(),
                        2 => format!("/users/{name}"),
                        3 => format!("/roles/{name}"),
                        4 => format!(
                            "/users/{name}/{}",
                            self.pick(&["grant", "revoke", "password", "x"])
                        ),
                        5 => format!("/roles/{name}/update"),
                        _ => self.pick(&["", "/", "/enable", "/users/a/b/c"]).to_owned(),
                    };
                    let method = self.pick(&["GET", "GET", "PUT", "DELETE", "HEAD", "POST"]);
                    let body = self.v2_auth_body(name);
                    let path = format!("/v2/security{sub}");
                    let target = "/v2/security".to_owned();
                    ("http v2-security", target, method, path, body)
                }
                10..13 => {
                    let path = self.pick(&[
                        "/health",
                        "/health?serializable=true",
                        "/health?serializable=false",
                        "/health?exclude=NOSPACE",
                        "/health?exclude=CORRUPT&serializable=maybe",
                        "/health/",
                        "/health?%zz",
                    ]);
                    let method = self.pick(&["GET", "GET", "GET", "HEAD", "POST", "PUT"]);
                    let target = "/health".to_owned();
                    ("http health", target, method, path.to_owned(), Vec::new())
                }
                13..16 => {
                    let path = self.pick(&[
                        "/livez",
                        "/livez/serializable_read",
                        "/livez/nope",
                        "/livez?verbose",
                        "/livez?exclude=serializable_read",
                        "/livez/",
                        "/readyz",
                        "/readyz/linearizable_read",
                        "/readyz/data_corruption",
                        "/readyz/non_learner",
                        "/readyz/serializable_read",
                        "/readyz?verbose&exclude=linearizable_read",
                        "/readyz?exclude=nope&exclude=",
                        "/readyz/nope/x",
                    ]);
                    let method = self.pick(&["GET", "GET", "GET", "HEAD", "POST"]);
                    let target = if path.starts_with("/livez") {
                        "/livez"
                    } else {
                        "/readyz"
                    };
                    let target = target.to_owned();
                    ("http health", target, method, path.to_owned(), Vec::new())
                }
                16 => {
                    let method = self.pick(&["GET", "GET", "HEAD", "POST", "DELETE"]);
                    let path = self.pick(&["/version", "/version/", "/version?x=1"]);
                    let target = "/version".to_owned();
                    ("http version", target, method, path.to_owned(), Vec::new())
                }
                17 => {
                    let method = self.pick(&["GET", "GET", "HEAD", "POST"]);
                    let path = self.pick(&["/metrics", "/metrics?x=1", "/metrics/"]);
                    let target = "/metrics".to_owned();
                    ("http metrics", target, method, path.to_owned(), Vec::new())
                }
                _ => {
                    let path = match self.rng.random_range(0..10) {
                        0 => format!("/{}", "q".repeat(self.rng.random_range(1..20_000))),
                        1 => "/v2".to_owned(),
                        2 => "/v2/".to_owned(),
                        3 => "/v3".to_owned(),
                        4 => "/debug/vars".to_owned(),
                        5 => "/debug/pprof/".to_owned(),
                        6 => "/config/local/log".to_owned(),
                        7 => "/%00".to_owned(),
                        8 => "/v2/keys/../../metrics".to_owned(),
                        _ => "/".to_owned(),
                    };
                    let method = self.pick(&["GET", "POST", "OPTIONS", "TRACE", "DELETE"]);
                    let target = "(other paths)".to_owned();
                    ("http other", target, method, path, Vec::new())
                }
            };
        let content_type = if family.starts_with("http v2-") && method != "GET" {
            self.pick(&[
                Some("application/json"),
                Some("application/json"),
                Some("text/plain"),
                None,
            ])
        } else {
            None
        };
        let req = Req::Http {
            method,
            path,
            content_type,
            headers,
            body,
            streaming: false,
        };
        (family, target, req)
    }

    fn v2_auth_body(&mut self, name: &str) -> Vec<u8> {
        let pw = self.pick(&["", "x", "root", "\u{e9}"]);
        match self.rng.random_range(0..9) {
            // A password costs the member a bcrypt: rare.
            0 => format!(r#"{{"user":"{name}","password":"{pw}"}}"#).into_bytes(),
            1 => format!(r#"{{"user":"{name}","roles":["root","guest"]}}"#).into_bytes(),
            2 => format!(r#"{{"user":"{name}","grant":["root"],"revoke":["guest"]}}"#).into_bytes(),
            3 => format!(
                r#"{{"role":"{name}","permissions":{{"kv":{{"read":["/*"],"write":["/h/*"]}}}}}}"#
            )
            .into_bytes(),
            4 => format!(
                r#"{{"role":"{name}","grant":{{"kv":{{"read":["*"]}}}},"revoke":{{"kv":{{"write":null}}}}}}"#
            )
            .into_bytes(),
            5 => b"{\"user\":".to_vec(),
            6 => br#"{"user":1,"roles":{},"password":[]}"#.to_vec(),
            7 => b"\xff\xfe{}".to_vec(),
            _ => Vec::new(),
        }
    }
}

fn varint(b: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        b.push((v as u8) | 0x80);
        v >>= 7;
    }
    b.push(v as u8);
}

/// gRPC's length-prefixed framing of one uncompressed message.
fn frame(msg: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(msg.len() + 5);
    b.push(0);
    b.extend_from_slice(&(msg.len() as u32).to_be_bytes());
    b.extend_from_slice(msg);
    b
}

/// Replaces runs of digits with `N` (answers differ only in ids and sizes).
fn normalize(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut digits = false;
    for c in s.chars().take(160) {
        if c.is_ascii_digit() {
            if !digits {
                out.push('N');
            }
            digits = true;
        } else {
            digits = false;
            out.push(c);
        }
    }
    out
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Ok(v) =
                u8::from_str_radix(std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or(""), 16)
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn code_name(c: i32) -> &'static str {
    match c {
        0 => "OK",
        1 => "Canceled",
        2 => "Unknown",
        3 => "InvalidArgument",
        4 => "DeadlineExceeded",
        5 => "NotFound",
        6 => "AlreadyExists",
        7 => "PermissionDenied",
        8 => "ResourceExhausted",
        9 => "FailedPrecondition",
        10 => "Aborted",
        11 => "OutOfRange",
        12 => "Unimplemented",
        13 => "Internal",
        14 => "Unavailable",
        15 => "DataLoss",
        16 => "Unauthenticated",
        _ => "?",
    }
}

/// What came back, and whether it breaks a rule.
struct Answer {
    outcome: String,
    /// Not a clear etcd error (to fix).
    bad: bool,
    /// Internal/Unknown/5xx: to compare with etcd.
    compare: bool,
}

impl Answer {
    fn new(outcome: String) -> Answer {
        Answer {
            outcome,
            bad: false,
            compare: false,
        }
    }
}

fn grpc_answer(code: Option<&str>, msg: Option<&str>, http: u16) -> Answer {
    let Some(code) = code else {
        let mut a = Answer::new(format!("http {http}, no grpc-status"));
        a.bad = http == 200;
        a.compare = true;
        return a;
    };
    let c: i32 = code.trim().parse().unwrap_or(-1);
    let msg = percent_decode(msg.unwrap_or(""));
    if c == 0 {
        return Answer::new("OK".to_owned());
    }
    let mut a = Answer::new(format!("{}: {}", code_name(c), normalize(&msg)));
    a.bad = msg.is_empty() || code_name(c) == "?";
    a.compare = matches!(c, 2 | 13 | 15) || http != 200;
    if http != 200 {
        a.outcome = format!("http {http} {}", a.outcome);
    }
    a
}

/// One h2 connection.
async fn h2_connect(addr: &str) -> Result<h2::client::SendRequest<Bytes>, String> {
    let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let _ = tcp.set_nodelay(true);
    let (send, conn) = h2::client::Builder::new()
        .initial_window_size(4 << 20)
        .initial_connection_window_size(8 << 20)
        .handshake(tcp)
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(send)
}

fn h2_error(e: &h2::Error) -> Answer {
    let mut a = if let Some(r) = e.reason() {
        if e.is_go_away() {
            Answer::new(format!("goaway {r:?}"))
        } else {
            Answer::new(format!("stream reset {r:?}"))
        }
    } else {
        Answer::new(format!("h2 error: {}", normalize(&e.to_string())))
    };
    a.compare = true;
    a
}

async fn grpc_call(
    send: &mut Option<h2::client::SendRequest<Bytes>>,
    addr: &str,
    path: &str,
    content_type: Option<&'static str>,
    headers: &[(&'static str, String)],
    body: Vec<u8>,
    streaming: bool,
) -> Answer {
    if send.is_none() {
        match h2_connect(addr).await {
            Ok(s) => *send = Some(s),
            Err(e) => {
                let mut a = Answer::new(format!("connect failed: {}", normalize(&e)));
                a.bad = true;
                return a;
            }
        }
    }
    let client = send.clone().expect("connected");
    let res = async {
        let mut client = client.ready().await?;
        let mut req = http::Request::builder()
            .method("POST")
            .uri(format!("http://{addr}{path}"))
            .header("te", "trailers");
        if let Some(ct) = content_type {
            req = req.header("content-type", ct);
        }
        for (k, v) in headers {
            req = req.header(*k, v.as_str());
        }
        let req = req.body(()).expect("request");
        let (resp, mut stream) = client.send_request(req, body.is_empty())?;
        if !body.is_empty() {
            stream.send_data(Bytes::from(body), true)?;
        }
        let resp = resp.await?;
        let (parts, mut recv) = resp.into_parts();
        let http = parts.status.as_u16();
        let h = |m: &http::HeaderMap, k: &str| {
            m.get(k)
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        };
        if let Some(c) = h(&parts.headers, "grpc-status") {
            return Ok(grpc_answer(
                Some(&c),
                h(&parts.headers, "grpc-message").as_deref(),
                http,
            ));
        }
        let deadline = Instant::now()
            + if streaming {
                STREAM_WINDOW
            } else {
                REQUEST_TIMEOUT
            };
        loop {
            match tokio::time::timeout_at(deadline.into(), recv.data()).await {
                Err(_) => {
                    // A stream still open: cut (dropping it resets it).
                    return Ok(Answer::new("stream open (cut)".to_owned()));
                }
                Ok(None) => break,
                Ok(Some(chunk)) => {
                    let chunk = chunk?;
                    let _ = recv.flow_control().release_capacity(chunk.len());
                }
            }
        }
        let trailers = recv.trailers().await?.unwrap_or_default();
        Ok::<_, h2::Error>(grpc_answer(
            h(&trailers, "grpc-status").as_deref(),
            h(&trailers, "grpc-message").as_deref(),
            http,
        ))
    };
    // A stream, or a call that may wait, gets 2 s for its head (with a malformed
    // `grpc-timeout`, which actcd ignores and etcd resets the stream for, it may wait on).
    let bound = if streaming {
        Duration::from_secs(2)
    } else {
        REQUEST_TIMEOUT
    };
    match tokio::time::timeout(bound, res).await {
        Err(_) if streaming => Answer::new("open or waiting (cut)".to_owned()),
        Ok(Ok(a)) => a,
        Ok(Err(e)) => {
            if e.is_go_away() || e.is_io() || e.reason().is_none() {
                *send = None;
            }
            h2_error(&e)
        }
        Err(_) => {
            *send = None;
            let mut a = Answer::new("no answer within 10 s".to_owned());
            a.bad = true;
            a
        }
    }
}

async fn watch_call(
    ch: &tonic::transport::Channel,
    reqs: Vec<WatchRequest>,
    token: Option<String>,
) -> Answer {
    let mut client = WatchClient::new(ch.clone()).max_decoding_message_size(64 << 20);
    let mut req = tonic::Request::new(futures::stream::iter(reqs));
    if let Some(v) = token.and_then(|t| t.parse().ok()) {
        req.metadata_mut().insert("token", v);
    }
    let run = async {
        let mut stream = match client.watch(req).await {
            Ok(s) => s.into_inner(),
            Err(s) => return Err(s),
        };
        let mut reasons: Vec<String> = Vec::new();
        loop {
            match tokio::time::timeout(STREAM_WINDOW, stream.message()).await {
                Err(_) => return Ok((reasons, "open (cut)".to_owned())),
                Ok(Ok(None)) => return Ok((reasons, "ended".to_owned())),
                Ok(Err(s)) => return Err(s),
                Ok(Ok(Some(r))) => {
                    if r.canceled && !r.cancel_reason.is_empty() && reasons.len() < 3 {
                        reasons.push(normalize(&r.cancel_reason));
                    }
                }
            }
        }
    };
    match tokio::time::timeout(REQUEST_TIMEOUT, run).await {
        Ok(Ok((reasons, end))) => {
            let mut a = Answer::new(format!("{end}; cancel reasons [{}]", reasons.join(" | ")));
            a.compare = false;
            a
        }
        Ok(Err(s)) => {
            let code = s.code() as i32;
            grpc_answer(Some(&code.to_string()), Some(s.message()), 200)
        }
        Err(_) => {
            let mut a = Answer::new("watch: no end within 10 s".to_owned());
            a.bad = true;
            a
        }
    }
}

type Http1 = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

#[allow(clippy::too_many_arguments)]
async fn http_call(
    send: &mut Option<Http1>,
    addr: &str,
    method: &str,
    path: &str,
    content_type: Option<&str>,
    headers: &[(&'static str, String)],
    body: Vec<u8>,
    streaming: bool,
) -> Answer {
    let res = async {
        if send.as_ref().is_none_or(|s| s.is_closed()) {
            let tcp = TcpStream::connect(addr)
                .await
                .map_err(|e| format!("connect: {e}"))?;
            let _ = tcp.set_nodelay(true);
            let (s, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
                .await
                .map_err(|e| format!("handshake: {e}"))?;
            tokio::spawn(async move {
                let _ = conn.await;
            });
            *send = Some(s);
        }
        let s = send.as_mut().expect("connected");
        s.ready().await.map_err(|e| format!("not ready: {e}"))?;
        let mut req = http::Request::builder()
            .method(method)
            .uri(path)
            .header("host", addr);
        if let Some(ct) = content_type {
            req = req.header("content-type", ct);
        }
        for (k, v) in headers {
            req = req.header(*k, v.as_str());
        }
        let req = req
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| format!("request: {e}"))?;
        let resp = s
            .send_request(req)
            .await
            .map_err(|e| format!("no response: {e}"))?;
        let status = resp.status().as_u16();
        let collect = resp.into_body().collect();
        let body = if streaming {
            match tokio::time::timeout(STREAM_WINDOW, collect).await {
                Ok(Ok(b)) => b.to_bytes(),
                Ok(Err(e)) => return Err(format!("body: {e}")),
                Err(_) => {
                    *send = None; // the stream goes on: drop the connection
                    return Ok((status, Bytes::from_static(b"(stream open, cut)")));
                }
            }
        } else {
            collect.await.map_err(|e| format!("body: {e}"))?.to_bytes()
        };
        Ok::<_, String>((status, body))
    };
    // A stream, or a call that may wait (lock, campaign, a v2 wait), gets 2 s for its head.
    let bound = if streaming {
        Duration::from_secs(2)
    } else {
        REQUEST_TIMEOUT
    };
    match tokio::time::timeout(bound, res).await {
        Err(_) if streaming => {
            *send = None;
            Answer::new("http: open or waiting (cut)".to_owned())
        }
        Ok(Ok((status, body))) => {
            let mut a = http_answer(status, &body);
            a.bad &= method != "HEAD"; // a HEAD answer has no body
            a
        }
        Ok(Err(e)) => {
            *send = None;
            let mut a = Answer::new(format!("http: {}", normalize(&e)));
            a.compare = true;
            a
        }
        Err(_) => {
            *send = None;
            let mut a = Answer::new("http: no answer within 10 s".to_owned());
            a.bad = true;
            a
        }
    }
}

fn http_answer(status: u16, body: &[u8]) -> Answer {
    let text = String::from_utf8_lossy(&body[..body.len().min(400)]).into_owned();
    let json: Option<serde_json::Value> = serde_json::from_slice(body).ok().or_else(|| {
        // Streams: the first line.
        body.split(|&c| c == b'\n')
            .next()
            .and_then(|l| serde_json::from_slice(l).ok())
    });
    let msg = json
        .as_ref()
        .and_then(|j| {
            let j = j.get("error").filter(|e| e.is_object()).unwrap_or(j);
            let m = j
                .get("message")
                .or_else(|| j.get("error"))
                .and_then(|m| m.as_str())?;
            let code = j
                .get("errorCode")
                .or_else(|| j.get("code"))
                .map(|c| format!("[{c}] "))
                .unwrap_or_default();
            Some(format!("{code}{m}"))
        })
        .unwrap_or_else(|| {
            if (200..300).contains(&status) {
                String::new()
            } else {
                text.trim().to_owned()
            }
        });
    let mut a = Answer::new(if (200..300).contains(&status) {
        format!("http {status}")
    } else {
        format!("http {status}: {}", normalize(&msg))
    });
    a.bad = status >= 400 && msg.is_empty() && status != 405 && status != 404;
    a.compare = status >= 500;
    a
}

/// Per-worker tallies, merged at the end.
#[derive(Default)]
struct Stats {
    /// (label, outcome) → (count, example id, compare, bad).
    hist: HashMap<(&'static str, String), (u64, String, bool, bool)>,
    /// (label, outcome) → (total time, slowest, its id).
    time: HashMap<(&'static str, String), (Duration, Duration, String)>,
    per_label: HashMap<&'static str, u64>,
    total: u64,
}

impl Stats {
    fn add(&mut self, label: &'static str, a: Answer, took: Duration, id: impl Fn() -> String) {
        self.total += 1;
        *self.per_label.entry(label).or_default() += 1;
        let t = self.time.entry((label, a.outcome.clone())).or_insert((
            Duration::ZERO,
            Duration::ZERO,
            String::new(),
        ));
        t.0 += took;
        if took > t.1 {
            t.1 = took;
            t.2 = id();
        }
        let e = self
            .hist
            .entry((label, a.outcome))
            .or_insert_with(|| (0, id(), a.compare, a.bad));
        e.0 += 1;
    }
    fn merge(&mut self, o: Stats) {
        self.total += o.total;
        for (k, v) in o.per_label {
            *self.per_label.entry(k).or_default() += v;
        }
        for (k, v) in o.time {
            let e = self
                .time
                .entry(k)
                .or_insert((Duration::ZERO, Duration::ZERO, String::new()));
            e.0 += v.0;
            if v.1 > e.1 {
                e.1 = v.1;
                e.2 = v.2;
            }
        }
        for (k, v) in o.hist {
            let e = self.hist.entry(k).or_insert((0, v.1, v.2, v.3));
            e.0 += v.0;
        }
    }
}

/// Counts shared by the workers while the run goes on (the progress lines).
#[derive(Default)]
struct Tally {
    families: BTreeMap<&'static str, u64>,
    /// Answer classes: the gRPC code, the HTTP status, the h2 end (`[cred]` first in the
    /// auth phase).
    classes: BTreeMap<String, u64>,
    /// Requests per method or route aimed at.
    targets: BTreeMap<String, u64>,
}

/// The class of an answer: its outcome up to the first `:` or `;`, or up to the first `,`
/// for a raw connection.
fn class(label: &str, outcome: &str) -> String {
    let cut: &[char] = if label == "raw" {
        &[':', ';', ',']
    } else {
        &[':', ';']
    };
    outcome.split(cut).next().unwrap_or("").trim().to_owned()
}

/// What every worker shares.
#[derive(Clone)]
struct Shared {
    seed: u64,
    schema: Arc<Schema>,
    addr: String,
    /// Requests answered so far.
    done: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    etcd: bool,
    base: Instant,
    /// Millis after `base` of the last answer the member gave.
    last_answer: Arc<AtomicU64>,
    tally: Arc<Mutex<Tally>>,
    tokens: SharedTokens,
}

async fn worker(sh: Shared, w: usize, count: u64, auth: bool) -> Stats {
    let Shared {
        seed,
        schema,
        addr,
        done,
        stop,
        etcd,
        base,
        last_answer,
        tally,
        tokens,
    } = sh;
    let mut g = if auth {
        Gen::auth_phase(seed, w, schema)
    } else {
        Gen::new(seed, w, schema)
    };
    g.etcd_safe = etcd;
    let prefix = if auth { 'a' } else { 'w' };
    let mut stats = Stats::default();
    let mut h2c = None;
    let mut h1 = None;
    let ch = cluster::channel(&format!("http://{addr}"));
    for i in 0..count {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let Job {
            label,
            family,
            target,
            cred,
            req,
        } = g.next();
        let credential = cred.value(&tokens);
        let t = Instant::now();
        let mut a = match req {
            Req::Grpc {
                path,
                content_type,
                mut headers,
                body,
                streaming,
            } => {
                if let Some(c) = credential {
                    let key = if matches!(cred, Cred::Basic(_)) {
                        "authorization"
                    } else {
                        "token"
                    };
                    headers.push((key, c));
                }
                grpc_call(
                    &mut h2c,
                    &addr,
                    &path,
                    content_type,
                    &headers,
                    body,
                    streaming,
                )
                .await
            }
            Req::Watch(reqs) => watch_call(&ch, reqs, credential).await,
            Req::Http {
                method,
                path,
                content_type,
                mut headers,
                body,
                streaming,
            } => {
                if let Some(c) = credential {
                    // The gateway takes a token bare or as a Bearer one.
                    let c = if matches!(cred, Cred::User) && i % 5 == 0 {
                        format!("Bearer {c}")
                    } else {
                        c
                    };
                    headers.push(("authorization", c));
                }
                http_call(
                    &mut h1,
                    &addr,
                    method,
                    &path,
                    content_type,
                    &headers,
                    body,
                    streaming,
                )
                .await
            }
            Req::Raw { case, bytes } => match hostile_raw::call(&addr, bytes).await {
                Ok(s) => Answer::new(format!("{s} ({case})")),
                Err(e) => {
                    let mut a = Answer::new(normalize(&e));
                    a.bad = true;
                    a
                }
            },
        };
        let dead = [
            "connect failed",
            "http: connect",
            "raw: connect",
            "no answer",
            "watch: no end",
        ]
        .iter()
        .any(|d| a.outcome.contains(d));
        if !dead {
            last_answer.fetch_max(base.elapsed().as_millis() as u64, Ordering::Relaxed);
        }
        let mut cls = class(label, &a.outcome);
        if auth {
            cls = format!("[{}] {cls}", cred.tag());
            a.outcome = format!("[{}] {}", cred.tag(), a.outcome);
        }
        {
            let mut t = tally.lock().unwrap_or_else(|p| p.into_inner());
            *t.families.entry(family).or_default() += 1;
            *t.classes.entry(cls).or_default() += 1;
            *t.targets.entry(target).or_default() += 1;
        }
        stats.add(label, a, t.elapsed(), || format!("{prefix}{w}#{i}"));
        done.fetch_add(1, Ordering::Relaxed);
    }
    stats
}

/// `--hostile-show w3#1234` (or `a3#1234`, a request of the auth phase): the request that
/// id names.
pub fn show(seed: u64, id: &str, etcd: bool) -> Result<String, String> {
    let auth = id.starts_with('a');
    let (w, i) = id
        .trim_start_matches(['w', 'a'])
        .split_once('#')
        .and_then(|(w, i)| Some((w.parse::<usize>().ok()?, i.parse::<u64>().ok()?)))
        .ok_or("expected wN#I or aN#I")?;
    let schema = Arc::new(Schema::load()?);
    let mut g = if auth {
        Gen::auth_phase(seed, w, schema)
    } else {
        Gen::new(seed, w, schema)
    };
    g.etcd_safe = etcd;
    for _ in 0..i {
        g.next();
    }
    let Job {
        label,
        family,
        target,
        cred,
        req,
    } = g.next();
    let mut s = format!("{label} ({family}, {target}, credentials {cred:?}): ");
    let dump = |b: &[u8]| {
        let mut h = String::new();
        for x in b.iter().take(512) {
            let _ = write!(h, "{x:02x}");
        }
        if b.len() > 512 {
            let _ = write!(h, "… ({} bytes)", b.len());
        }
        h
    };
    match req {
        Req::Grpc {
            path,
            content_type,
            headers,
            body,
            ..
        } => {
            let _ = write!(
                s,
                "POST {path} content-type {content_type:?} headers {headers:?}\nbody (framed) {}",
                dump(&body)
            );
        }
        Req::Watch(reqs) => {
            let _ = write!(s, "{reqs:#?}");
        }
        Req::Raw { case, bytes } => {
            let _ = write!(s, "raw case {case}\nbytes {}", dump(&bytes));
        }
        Req::Http {
            method,
            path,
            content_type,
            headers,
            body,
            ..
        } => {
            let b = if body.len() > 2000 {
                format!(
                    "{}… ({} bytes)",
                    String::from_utf8_lossy(&body[..2000]),
                    body.len()
                )
            } else {
                String::from_utf8_lossy(&body).into_owned()
            };
            let _ = write!(
                s,
                "{method} {path} content-type {content_type:?} headers {headers:?}\nbody {b:?}\nhex {}",
                dump(&body)
            );
        }
    }
    Ok(s)
}

/// Whether the server is etcd (by its file name).
pub fn is_etcd(server: &Path) -> bool {
    server.file_name().is_some_and(|n| n == "etcd")
}

fn rss_kib(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Keeps the member writable while the stream runs: compacts to the newest
/// revision every 2 s (random writes pile up revisions) and disarms the
/// alarms random Alarm calls raise. In the auth phase it acts as root, and an
/// alarm found raised is a violation (only root may raise one).
async fn upkeep(
    url: String,
    stop: Arc<AtomicBool>,
    tokens: SharedTokens,
    auth_on: Arc<AtomicBool>,
    violations: Arc<Mutex<Vec<String>>>,
) {
    let mut kv = hostile_auth::kv(&url, &tokens);
    let mut m = maintenance(&url, &tokens);
    while !stop.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let auth = auth_on.load(Ordering::Relaxed);
        let n = tokio::time::timeout(Duration::from_secs(5), disarm(&mut m))
            .await
            .unwrap_or(0);
        if auth && n > 0 && auth_on.load(Ordering::Relaxed) {
            violations
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(format!(
                    "write past auth: {n} alarm(s) raised during the auth phase (only root may)"
                ));
        }
        let range = kv.range(RangeRequest {
            key: SENTINEL.to_vec(),
            serializable: true,
            ..Default::default()
        });
        if let Ok(Ok(r)) = tokio::time::timeout(Duration::from_secs(5), range).await
            && let Some(h) = r.into_inner().header
        {
            let compact = kv.compact(CompactionRequest {
                revision: h.revision,
                physical: false,
            });
            let _ = tokio::time::timeout(Duration::from_secs(5), compact).await;
        }
    }
}

fn maintenance(url: &str, tokens: &SharedTokens) -> MaintenanceClient<Rooted> {
    MaintenanceClient::with_interceptor(cluster::channel(url), hostile_auth::AsRoot(tokens.clone()))
}

/// Deactivates every raised alarm; returns how many.
async fn disarm(m: &mut MaintenanceClient<Rooted>) -> usize {
    let Ok(r) = m
        .alarm(AlarmRequest {
            action: alarm_request::AlarmAction::Get as i32,
            member_id: 0,
            alarm: 0,
        })
        .await
    else {
        return 0;
    };
    let alarms = r.into_inner().alarms;
    for a in &alarms {
        let _ = m
            .alarm(AlarmRequest {
                action: alarm_request::AlarmAction::Deactivate as i32,
                member_id: a.member_id,
                alarm: a.alarm,
            })
            .await;
    }
    alarms.len()
}

/// A call bounded to 10 s.
async fn within<T>(
    f: impl std::future::Future<Output = Result<T, tonic::Status>>,
) -> Result<T, tonic::Status> {
    tokio::time::timeout(Duration::from_secs(10), f)
        .await
        .unwrap_or_else(|_| Err(tonic::Status::deadline_exceeded("no answer within 10 s")))
}

/// How a hostile run is sized.
#[derive(Clone, Debug)]
pub struct Opts {
    pub requests: u64,
    pub workers: usize,
    /// A checkpoint (put/get, sentinel, RSS, progress) every this many requests; 0: none.
    pub check_every: u64,
    /// The share of the requests sent last, with auth enabled (0: no auth phase).
    pub auth_share: f64,
}

/// The checkpoints' probe key: below every generated key, like the sentinel.
const PROBE: &[u8] = b"\x00hostile-probe";

/// A put and a linearizable get of the probe, and the sentinel read; as root in the auth
/// phase (logging in again once if root's token was refused).
async fn checkpoint(
    url: &str,
    tokens: &SharedTokens,
    n: u64,
    sentinel: &[u8],
) -> Result<Duration, String> {
    let t = Instant::now();
    let value = format!("checkpoint-{n}").into_bytes();
    let mut last = String::new();
    for attempt in 0..2 {
        let mut kv = hostile_auth::kv(url, tokens);
        let put = within(kv.put(PutRequest {
            key: PROBE.to_vec(),
            value: value.clone(),
            ..Default::default()
        }))
        .await;
        let get = within(kv.range(RangeRequest {
            key: PROBE.to_vec(),
            ..Default::default()
        }))
        .await;
        let sent = within(kv.range(RangeRequest {
            key: SENTINEL.to_vec(),
            ..Default::default()
        }))
        .await;
        match (&put, &get, &sent) {
            (Ok(_), Ok(g), Ok(s))
                if g.get_ref().kvs.first().is_some_and(|k| k.value == value)
                    && s.get_ref().kvs.first().is_some_and(|k| k.value == sentinel) =>
            {
                return Ok(t.elapsed());
            }
            (Ok(_), Ok(_), Ok(s))
                if s.get_ref().kvs.first().is_none_or(|k| k.value != sentinel) =>
            {
                return Err(format!("sentinel changed or gone: {:?}", s.get_ref().kvs));
            }
            _ => {}
        }
        last = format!("put {put:?}, get {get:?}, sentinel {sent:?}");
        // NOSPACE refuses the put; CORRUPT ("corrupt cluster") every request.
        let alarmed = [put.as_ref().err(), get.as_ref().err()].iter().any(|e| {
            e.is_some_and(|s| {
                s.message().contains("database space exceeded")
                    || s.message().contains("corrupt cluster")
            })
        });
        let refused = [&put.err(), &get.err(), &sent.err()].iter().any(|e| {
            e.as_ref().is_some_and(|s| {
                s.code() == tonic::Code::Unauthenticated || s.message().contains("token")
            })
        });
        let rooted = tokens
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .root
            .is_some();
        // A random Alarm call of the open phase's stream may have raised NOSPACE or
        // CORRUPT between two upkeep rounds: disarm it and try again. In the auth phase
        // only root may raise one, so there it is a violation.
        if attempt == 0 && alarmed {
            let disarmed = disarm(&mut maintenance(url, tokens)).await;
            if rooted && disarmed > 0 {
                return Err(format!(
                    "write past auth: {disarmed} alarm(s) raised during the auth phase (only root may)"
                ));
            }
        } else if attempt == 0 && refused && rooted {
            let _ = hostile_auth::refresh(url, tokens).await;
        } else {
            break;
        }
    }
    Err(last)
}

/// What the monitor watches and where it reports.
struct Monitor {
    url: String,
    pid: u32,
    idle: u64,
    total: u64,
    sentinel: Vec<u8>,
    check_every: u64,
    done: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    max_rss: Arc<AtomicU64>,
    tally: Arc<Mutex<Tally>>,
    tokens: SharedTokens,
    violations: Arc<Mutex<Vec<String>>>,
}

fn top<K: std::fmt::Display>(m: &BTreeMap<K, u64>, n: usize) -> String {
    let mut rows: Vec<_> = m.iter().collect();
    rows.sort_by_key(|r| std::cmp::Reverse(*r.1));
    let mut s: Vec<String> = rows
        .iter()
        .take(n)
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    if rows.len() > n {
        s.push(format!("(+{} more)", rows.len() - n));
    }
    s.join(", ")
}

/// Samples the RSS every 250 ms, prints a line every 10 s, and every `check_every`
/// requests runs a checkpoint and prints the counts by family and answer class. Three
/// failed checkpoints in a row, or an RSS over the bound, stop the run.
async fn monitor(m: Monitor) {
    let start = Instant::now();
    let mut last_print = Instant::now();
    let mut next_check = m.check_every;
    let mut failures = 0;
    let bound = m.idle + RSS_SLACK_KIB;
    let mut over = false;
    while !m.stop.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let Some(r) = rss_kib(m.pid) else {
            continue;
        };
        m.max_rss.fetch_max(r, Ordering::Relaxed);
        let n = m.done.load(Ordering::Relaxed);
        if r > bound && !over {
            over = true;
            m.violations
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(format!(
                    "memory: RSS {} MiB after {n} requests > idle {} MiB + {} MiB; stream stopped",
                    r / 1024,
                    m.idle / 1024,
                    RSS_SLACK_KIB / 1024
                ));
            m.stop.store(true, Ordering::Relaxed);
        }
        if m.check_every > 0 && n >= next_check {
            while next_check <= n {
                next_check += m.check_every;
            }
            let rate = n as f64 / start.elapsed().as_secs_f64();
            let res = checkpoint(&m.url, &m.tokens, n, &m.sentinel).await;
            let rss = rss_kib(m.pid).unwrap_or(0);
            let auth = m
                .tokens
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .root
                .is_some();
            let what = match &res {
                Ok(d) => {
                    failures = 0;
                    format!("put/get ok in {} ms, sentinel intact", d.as_millis())
                }
                Err(e) => {
                    failures += 1;
                    let v = format!("checkpoint at {n} requests: {}", normalize_long(e));
                    m.violations
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(v);
                    format!("FAILED ({failures} in a row): {}", normalize_long(e))
                }
            };
            println!(
                "hostile: checkpoint {n}/{} ({:.0} %) at {:.0} s, {rate:.0}/s{}: {what}; RSS {} MiB (max {}, bound {})",
                m.total,
                n as f64 * 100.0 / m.total.max(1) as f64,
                start.elapsed().as_secs_f64(),
                if auth { ", auth on" } else { "" },
                rss / 1024,
                m.max_rss.load(Ordering::Relaxed) / 1024,
                bound / 1024
            );
            {
                let t = m.tally.lock().unwrap_or_else(|p| p.into_inner());
                println!("hostile:   by family: {}", top(&t.families, 64));
                println!("hostile:   answer classes: {}", top(&t.classes, 40));
            }
            if failures >= 3 {
                m.violations
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push("three checkpoints in a row failed; stream stopped".to_owned());
                m.stop.store(true, Ordering::Relaxed);
            }
            last_print = Instant::now();
        }
        if last_print.elapsed() >= Duration::from_secs(10) {
            last_print = Instant::now();
            println!(
                "hostile: {n} requests, {:.0}/s, RSS {} MiB (max {})",
                n as f64 / start.elapsed().as_secs_f64(),
                r / 1024,
                m.max_rss.load(Ordering::Relaxed) / 1024
            );
        }
    }
}

fn normalize_long(s: &str) -> String {
    s.chars().take(600).collect()
}

/// One phase: `requests` over `workers` workers (open, or with auth enabled); stops early
/// if the member exits or goes silent for 30 s. Returns the exit seen and whether it went
/// silent.
async fn phase(
    sh: &Shared,
    cl: &mut Cluster,
    requests: u64,
    workers: usize,
    auth: bool,
    stats: &mut Stats,
) -> (Option<(String, String)>, bool) {
    let mut handles = Vec::new();
    sh.last_answer
        .fetch_max(sh.base.elapsed().as_millis() as u64, Ordering::Relaxed);
    for w in 0..workers {
        let count = requests / workers as u64 + u64::from((w as u64) < requests % workers as u64);
        handles.push(tokio::spawn(worker(sh.clone(), w, count, auth)));
    }
    let mut exited = None;
    let mut unresponsive = false;
    for h in handles {
        loop {
            if let Some(e) = cl.exited().into_iter().next() {
                exited = Some(e);
                sh.stop.store(true, Ordering::Relaxed);
            }
            let silent = (sh.base.elapsed().as_millis() as u64)
                .saturating_sub(sh.last_answer.load(Ordering::Relaxed));
            if silent > 30_000 && !unresponsive {
                unresponsive = true;
                sh.stop.store(true, Ordering::Relaxed);
            }
            if h.is_finished() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        if let Ok(s) = h.await {
            stats.merge(s);
        }
    }
    (exited, unresponsive)
}

/// Every method and route the generator aims at (for the coverage line).
fn all_targets(schema: &Schema) -> Vec<String> {
    let mut t: Vec<String> = schema.methods.iter().map(|m| m.path.clone()).collect();
    t.push("/etcdserverpb.Watch/Watch (stream)".to_owned());
    for r in &schema.routes {
        t.push(r.path.to_owned());
        t.push(format!("/v3beta{}", &r.path[3..]));
    }
    for p in [
        "/v2/keys",
        "/v2/members",
        "/v2/stats",
        "/v2/machines",
        "/v2/auth",
        "/v2/security",
        "/health",
        "/livez",
        "/readyz",
        "/version",
        "/metrics",
        "(other paths)",
    ] {
        t.push(p.to_owned());
    }
    for c in hostile_raw::CASES {
        t.push(format!("raw {c}"));
    }
    t
}

/// The hostile run: returns 0 (clean), 1 (a violation) or 2 (setup).
pub async fn run(cli: &Cli, seed: u64, dir: &Path, opts: &Opts) -> u8 {
    let requests = opts.requests;
    if let Err(e) = std::fs::create_dir_all(dir) {
        eprintln!("hostile: cannot create {}: {e}", dir.display());
        return 2;
    }
    let schema = match Schema::load() {
        Ok(s) => Arc::new(s),
        Err(e) => {
            eprintln!("hostile: {e}");
            return 2;
        }
    };
    let mut cl = Cluster::new(&cli.server, dir, 1, false, format!("hostile-{seed}"), false);
    // Raft log compactions every 5,000 entries: the entries since the last one stay in memory
    // (etcd's too), and with the default 100,000 the stream's accepted Puts of up to 1.5 MiB
    // would make the RSS bound measure the log, not a leak.
    cl.extra_args = ["--enable-v2=true", "--snapshot-count", "5000"]
        .map(str::to_owned)
        .to_vec();
    if let Err(e) = cl.start(0) {
        eprintln!("hostile: cannot start {}: {e}", cli.server.display());
        return 2;
    }
    let url = cl.members[0].url();
    let addr = url.trim_start_matches("http://").to_owned();
    let pid = cl.members[0].pid().unwrap_or(0);
    let tokens = SharedTokens::default();
    let mut kv = hostile_auth::kv(&url, &tokens);
    let t0 = Instant::now();
    let sentinel = format!("sentinel-{seed}").into_bytes();
    loop {
        let put = kv
            .put(PutRequest {
                key: SENTINEL.to_vec(),
                value: sentinel.clone(),
                ..Default::default()
            })
            .await;
        if put.is_ok() {
            break;
        }
        if t0.elapsed() > Duration::from_secs(30) {
            eprintln!("hostile: member not ready within 30 s: {put:?}");
            return 2;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let idle = rss_kib(pid).unwrap_or(0);
    let workers = opts.workers.max(1);
    let auth_n = ((requests as f64) * opts.auth_share.clamp(0.0, 1.0)).round() as u64;
    let open_n = requests - auth_n;
    println!(
        "hostile: seed {seed}, {requests} requests ({open_n} open, then {auth_n} with auth on) over {workers} workers (one h2, one HTTP/1.1 connection and one Watch channel each) against {url}, pid {pid}, idle RSS {} MiB; checkpoint every {} requests",
        idle / 1024,
        opts.check_every
    );

    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let max_rss = Arc::new(AtomicU64::new(idle));
    let tally = Arc::new(Mutex::new(Tally::default()));
    let violations = Arc::new(Mutex::new(Vec::<String>::new()));
    let auth_on = Arc::new(AtomicBool::new(false));
    let monitor_task = tokio::spawn(monitor(Monitor {
        url: url.clone(),
        pid,
        idle,
        total: requests,
        sentinel: sentinel.clone(),
        check_every: opts.check_every,
        done: done.clone(),
        stop: stop.clone(),
        max_rss: max_rss.clone(),
        tally: tally.clone(),
        tokens: tokens.clone(),
        violations: violations.clone(),
    }));
    let upkeeper = tokio::spawn(upkeep(
        url.clone(),
        stop.clone(),
        tokens.clone(),
        auth_on.clone(),
        violations.clone(),
    ));
    let start = Instant::now();
    let shared = Shared {
        seed,
        schema: schema.clone(),
        addr: addr.clone(),
        done: done.clone(),
        stop: stop.clone(),
        etcd: is_etcd(&cli.server),
        base: start,
        last_answer: Arc::new(AtomicU64::new(0)),
        tally: tally.clone(),
        tokens: tokens.clone(),
    };
    let mut stats = Stats::default();
    let (mut exited, mut unresponsive) =
        phase(&shared, &mut cl, open_n, workers, false, &mut stats).await;
    let mut auth_elapsed = Duration::ZERO;
    if auth_n > 0 && exited.is_none() && !unresponsive && !stop.load(Ordering::Relaxed) {
        // Alarms the open phase raised are its own; from here on only root may raise one.
        let mut m = maintenance(&url, &tokens);
        let _ = tokio::time::timeout(Duration::from_secs(10), disarm(&mut m)).await;
        let t = Instant::now();
        match hostile_auth::setup(&url, &tokens).await {
            Err(e) => violations
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(format!("auth phase: setup failed: {e}")),
            Ok(before) => {
                println!(
                    "hostile: auth on in {:.1} s (root, and {} with read/write on [{}, {}) only; {} keys outside it guarded); {auth_n} requests with no, bad, and the user's credentials",
                    t.elapsed().as_secs_f64(),
                    hostile_auth::USER,
                    String::from_utf8_lossy(hostile_auth::PREFIX),
                    String::from_utf8_lossy(hostile_auth::PREFIX_END),
                    before.keys.len()
                );
                auth_on.store(true, Ordering::Relaxed);
                let t = Instant::now();
                (exited, unresponsive) =
                    phase(&shared, &mut cl, auth_n, workers, true, &mut stats).await;
                auth_elapsed = t.elapsed();
                auth_on.store(false, Ordering::Relaxed);
                if exited.is_none() && !unresponsive {
                    let v = hostile_auth::check(&url, &tokens, &before).await;
                    if v.is_empty() {
                        println!(
                            "hostile: auth phase clean: no key outside [{}, {}) written, no user, role, permission or member changed, auth still on",
                            String::from_utf8_lossy(hostile_auth::PREFIX),
                            String::from_utf8_lossy(hostile_auth::PREFIX_END)
                        );
                    }
                    violations
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .extend(v);
                    if let Err(e) = hostile_auth::disable(&url, &tokens).await {
                        violations
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .push(format!("auth phase: root cannot disable auth: {e}"));
                    }
                }
            }
        }
    }
    let elapsed = start.elapsed();
    stop.store(true, Ordering::Relaxed);
    let _ = monitor_task.await;
    let _ = upkeeper.await;
    if exited.is_none() {
        exited = cl.exited().into_iter().next();
    }

    let mut violations: Vec<String> =
        std::mem::take(&mut *violations.lock().unwrap_or_else(|p| p.into_inner()));
    if let Some((name, st)) = &exited {
        violations.push(format!("exited: {name} {st}"));
    }
    if unresponsive {
        violations.push("unresponsive: no answer for 30 s; stream stopped".to_owned());
    }
    // After the storm: alarms off, a put and a get work, the sentinel is intact.
    if exited.is_none() {
        let mut m = maintenance(&url, &tokens);
        let n = tokio::time::timeout(Duration::from_secs(10), disarm(&mut m))
            .await
            .unwrap_or(0);
        if n > 0 {
            println!("hostile: {n} alarm(s) raised by the stream, deactivated");
        }
        let probe = b"h/after-the-storm".to_vec();
        let put = within(kv.put(PutRequest {
            key: probe.clone(),
            value: b"ok".to_vec(),
            ..Default::default()
        }))
        .await;
        let get = within(kv.range(RangeRequest {
            key: probe,
            ..Default::default()
        }))
        .await;
        match (&put, &get) {
            (Ok(_), Ok(g)) if g.get_ref().kvs.first().is_some_and(|k| k.value == b"ok") => {}
            _ => violations.push(format!("after: put {put:?}, get {get:?}")),
        }
        let s = within(kv.range(RangeRequest {
            key: SENTINEL.to_vec(),
            ..Default::default()
        }))
        .await;
        match &s {
            Ok(r) if r.get_ref().kvs.first().is_some_and(|k| k.value == sentinel) => {}
            _ => violations.push(format!("sentinel: {s:?}")),
        }
    }
    let max = max_rss.load(Ordering::Relaxed);
    if max > idle + RSS_SLACK_KIB && !violations.iter().any(|v| v.starts_with("memory")) {
        violations.push(format!(
            "memory: max RSS {} MiB > idle {} MiB + {} MiB",
            max / 1024,
            idle / 1024,
            RSS_SLACK_KIB / 1024
        ));
    }
    cl.shutdown();
    let log = std::fs::read_to_string(&cl.members[0].log).unwrap_or_default();
    for l in log.lines().filter(|l| l.contains("panicked")).take(5) {
        violations.push(format!("panic: {l}"));
    }

    // The report.
    println!(
        "hostile: {} requests in {:.1} s: {:.0} requests/s ({} with auth on, in {:.1} s); RSS idle {} MiB, max {} MiB",
        stats.total,
        elapsed.as_secs_f64(),
        stats.total as f64 / elapsed.as_secs_f64(),
        auth_n,
        auth_elapsed.as_secs_f64(),
        idle / 1024,
        max / 1024
    );
    let per: Vec<String> = LABELS
        .iter()
        .map(|l| format!("{l} {}", stats.per_label.get(l).copied().unwrap_or(0)))
        .collect();
    println!("hostile: by kind: {}", per.join(", "));
    {
        let t = tally.lock().unwrap_or_else(|p| p.into_inner());
        println!("hostile: by family: {}", top(&t.families, 64));
        println!("hostile: answer classes: {}", top(&t.classes, 80));
        let missed: Vec<String> = all_targets(&schema)
            .into_iter()
            .filter(|k| !t.targets.contains_key(k))
            .collect();
        println!(
            "hostile: {} methods, routes and raw cases aimed at; not reached: {}",
            t.targets.len(),
            if missed.is_empty() {
                "none".to_owned()
            } else {
                missed.join(", ")
            }
        );
    }
    let mut rows: Vec<_> = stats.hist.iter().collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.1.0));
    println!(
        "hostile: {} distinct answers; the most frequent:",
        rows.len()
    );
    for ((label, outcome), (n, ex, _, _)) in rows.iter().take(40) {
        println!("  {n:>8}  {label:<14} {outcome}   (e.g. {ex})");
    }
    let mut slow: Vec<_> = stats.time.iter().collect();
    slow.sort_by_key(|r| std::cmp::Reverse(r.1.0));
    println!("hostile: where the time went (total, slowest):");
    for ((label, outcome), (total, max, ex)) in slow.iter().take(12) {
        println!(
            "  {:>8.1} s {:>6.2} s  {label:<14} {outcome}   (slowest {ex})",
            total.as_secs_f64(),
            max.as_secs_f64()
        );
    }
    let mut tsv = String::from("count\tkind\tanswer\texample\n");
    for ((label, outcome), (n, ex, _, _)) in &rows {
        let _ = writeln!(tsv, "{n}\t{label}\t{outcome}\t{ex}");
    }
    let answers = dir.join("answers.tsv");
    if std::fs::write(&answers, tsv).is_ok() {
        println!("hostile: every distinct answer in {}", answers.display());
    }
    let compare: Vec<_> = rows.iter().filter(|r| r.1.2).collect();
    if !compare.is_empty() {
        println!(
            "hostile: {} answers to compare with etcd (Internal/Unknown/DataLoss, non-200 gRPC, resets, HTTP 5xx):",
            compare.len()
        );
        for ((label, outcome), (n, ex, _, _)) in compare.iter().take(60) {
            println!("  {n:>8}  {label:<14} {outcome}   (e.g. {ex})");
        }
    }
    for ((label, outcome), (n, ex, _, _)) in rows.iter().filter(|r| r.1.3) {
        violations.push(format!(
            "unclear answer: {n} × {label} {outcome} (e.g. {ex})"
        ));
    }
    if violations.is_empty() {
        println!(
            "hostile: clean (no exit, no panic, memory bounded, every answer clear, sentinel intact)"
        );
        0
    } else {
        for v in &violations {
            println!("hostile: VIOLATION {v}");
        }
        println!("hostile: replay one request with --seed {seed} --hostile-show <id>");
        1
    }
}
