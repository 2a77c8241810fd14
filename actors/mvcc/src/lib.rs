//! # actcd-mvcc — the key index, the revision clock, ranges at a revision, compaction
//!
//! The state machine's key space, following etcd 3.5's `server/mvcc` and the KV half of
//! `server/etcdserver/apply.go`. It owns:
//!
//! - the **key index** ([`TreeIndex`]): every key → its [`KeyIndex`], the revisions it was
//!   written at, grouped into generations, and the lease its latest record names. Values are
//!   never in memory: a revision is the key of a record in the backend's `key` table. The keys
//!   sit in a counted B+ tree (`actcd-counted-btree`) that knows how many live keys lie under
//!   each node, so `count_only` and the total of a limited Range are O(log n) (a journal of
//!   recent creations and deletions answers for older revisions); `keys_only` answers come
//!   from the index without reading records (lease included, as etcd 3.5 answers). A key
//!   with one live generation of one revision (most keys of a big store) is packed inline,
//!   with no allocation of its own: about 100 heap bytes a Kubernetes-like key in all
//!   (`examples/index_memory.rs` measures it).
//! - the **revision clock**: the current revision (1 for an empty store, as in etcd, so the first
//!   write is revision 2), advanced by one per write request that changes something.
//! - the **compaction state**: the compacted revision (-1 before any compaction, as in etcd),
//!   and the `scheduledCompactRev`/`finishedCompactRev` marks that make a crash mid-compaction
//!   recoverable.
//! - the **consistent index** and term of the last applied raft entry, written with the data.
//! - the **lease named by each live key's latest record** (kept in its [`KeyIndex`], rebuilt
//!   from the key records on open; `leased.rs` reads the changes off each write), so that each
//!   batch can report how its writes moved keys between leases.
//!   Nothing else about leases is here: the applier owns which leases exist, their TTLs, the
//!   `lease` table and the keys attached to each; it tells the store which leases a batch's
//!   puts may name and, for a revoke, which keys to delete.
//! - **when whole-store snapshots are made and installed**: every record of every table as one
//!   blob, made from one read transaction, installed in one write transaction (for a follower
//!   too far behind). The formats are not here: that blob's and etcd's snapshot file (bbolt,
//!   etcd's bucket layout) are the `actcd-etcd-snapshot` library's, which writes them from a
//!   read transaction this actor hands it.
//!
//! ## Messages taken ([`MvccActor`], on an `Arbiter` thread of its own, or beside the front on small machines)
//! - `ApplyBatch{consistent_index, term, requests, ops, leases}` → `Result<BatchApplied,
//!   EtcdError>`: Put, DeleteRange, Txn and Compaction requests, one result each, in order; a
//!   result goes straight to the request's waiter when the batch carries one (else it is in
//!   `BatchApplied.results`). The applier has already judged them by auth and refused growing
//!   writes under a NOSPACE alarm (the store checks neither permissions nor alarms); `ops` are
//!   the table writes of the auth store and of the applier's alarms, members and leases for
//!   entries the batch covers, written first into the same commit as the batch's consistent
//!   index; `leases` are the leases that exist of those the puts name (a put naming another is
//!   refused with `etcdserver: requested lease not found`; in a txn, only in the branch taken).
//!   The reply carries the revision after the batch and the `LeaseAttachment`s `(key,
//!   old_lease, new_lease)` of every record written whose old or new lease is not 0 (none for
//!   lease-less writes). Requests applied elsewhere (auth, alarms, membership, leases) answer
//!   `ApplyResponse::Empty`. A batch that takes longer than
//!   `--experimental-warning-apply-duration` (100 ms) is logged: "apply request took too long".
//! - `DeleteKeys{consistent_index, term, keys, ops}` → `Result<BatchApplied, EtcdError>`: a
//!   revoked lease's keys deleted at one revision (one watch response; no revision taken when
//!   nothing is deleted), applied and committed like a batch.
//! - `LeasedKeys` → every live key whose latest record names a lease, with it (the applier
//!   rebuilds its attachments from it after a snapshot is installed).
//! - `CurrentRevision` → the revision clock (the applier stamps auth answers with it).
//! - `Range`, `ReadTxn`, `HashKv` and `History` too (tests, benches, callers without a
//!   reader); in the server they are read from the views (below). `GetStoreStatus`.
//! - `FlushStore` (every 100 ms: a compaction step, its writes sent, the backend flushed) and
//!   `SyncStorage` (before WAL release: writes sent, then the backend's `SyncBackend` awaited).
//! - `MakeSnapshot{min_index}` (once it has applied `min_index`: a reader from the
//!   backend, which commits what was sent first, and the copy read from it on a thread of its
//!   own into a channel of 1 MiB chunks, a few ahead of the transport that sends them: never
//!   whole in memory); `InstallSnapshot{data}` (a received copy, built by the backend into a
//!   store of its own, or still a file: replaces everything durably — pending applies sent,
//!   then the backend's `ReplaceStore` swaps the copy in, nothing applied meanwhile; without a
//!   backend actor the file's records are written through the buffer — and rebuilds every
//!   index; watchers
//!   are told to catch up from the new history; the applier then reads the new members, alarms
//!   and leases and tells raft and the lessor).
//! - `SnapshotStream` (a reader from the backend after the writes, then etcd's snapshot file
//!   streamed from it on a blocking thread with `actcd_etcd_snapshot::send_snapshot`; answered
//!   with the channel of chunks, `SnapshotChunks`, which the front forwards); `HashBackend`
//!   (after a `Flush`); `Defragment` (commits, asks the backend; applies and reads go on
//!   meanwhile, and the buffer's read transaction is let go after the swap); `MailboxProbe`/`GetMeter` (`actcd_types::meter`).
//! - From the backend actor: `Committed{seq}` (trim the write buffer) and `BackendFailed`
//!   (refuse further work: the next apply fails and the member stops).
//!
//! ## Reads: [`MvccReader`], from published [`ReadView`]s (`view.rs`, `reader.rs`)
//! After every batch — before its waiters are answered and before the applier (hence raft)
//! counts it applied — and after each commit reported, a snapshot installed or a failure, the
//! actor publishes a [`ReadView`] ([`MvccPeers::views`]): the revision and compaction mark,
//! the `key` records written but not yet reported committed (the write buffer's sealed runs),
//! and a handle on the key index, which readers read under its read lock at the view's
//! revision (the store takes the write lock once per batch, and compacts the index only after
//! the view accepting the compaction is published; `view.rs` says why a shared index and not
//! a copy: copies cost 10–13% of put throughput). [`ReadViews`] (the receiving end) reads
//! the newest view over an LMDB read transaction with the runs laid over it, on whatever thread
//! holds it: the front holds one as `actcd_types::msg::KeyReads` and serves Range and read-only
//! txns in its own task (linearizable ones after the ReadIndex barrier), so no read waits in any
//! mailbox. The reader, an actor with a mailbox of its own, answers the rest from the views:
//! `HashKv{revision}` and `History{from, to, max_events}` (events by revision, for watchers
//! catching up), plus `Range{request}` and `ReadTxn{request}` for callers without views. A compaction accepted after a view
//! was published may delete records that view names: a Range then answers `Compacted` at a
//! named revision (which it is, now) and is read again on the newest view at the latest one;
//! History and HashKV are read again when the compaction mark moved while they read. A HashKV
//! (the corruption checks, every 5 minutes by default) reads the whole key table: the reader
//! runs it on a blocking thread, and it holds the index's lock only while deciding which
//! revisions count, so neither the reader's thread (on 2 cores, the write path's) nor the
//! writer waits for the scan (at 4 GiB a Range waited up to 3 s for one).
//!
//! etcd 3.7's RangeStream is read from the views too, one chunk at a time (`chunk.rs`,
//! [`ReadViews::range_chunk`]): each chunk on the newest view, over a read transaction of its
//! own, at the revision the first chunk pinned, the index locked only while the chunk's
//! entries are picked; between chunks a stream holds only its cursor
//! (`actcd_types::msg::StreamCursor`).
//!
//! A top-level Range in the default order without filters, and any count-only one
//! ([`ReadViews::range_answer`], `encode.rs`) is answered in its wire form: a stored record's
//! body is already the `KeyValue`'s protobuf encoding, so the answer is written from the
//! records without decoding them, once, into a buffer of its exact size (the front's gRPC
//! Range writes it into tonic's); a keys-only one is written from the index entries the same
//! way, walking the index a second time when written rather than keeping anything per key;
//! the index is read in slices of 4096 keys, each under a lock
//! hold of its own, so a Range of a million keys no longer holds back every apply while it
//! reads (a large one is read on the front's blocking pool). 1M keys x 256 B, release, two
//! runs: peak RSS rise 1.11–1.16x the 283 MiB answer, against 3.58–3.60x through
//! `View::range` (decoded `KeyValue`s, then prost's growing buffer); server CPU per Range
//! 0.6–0.7 s against 1.6–2.3 s.
//!
//! Where the reader runs is the daemon's choice (`src/wiring.rs`): beside the front and the
//! store on small machines, on a thread of its own otherwise. Measured in docs/performance.md's rooms
//! table.
//!
//! ## Messages sent ([`MvccPeers`])
//! To the backend actor ([`BackendLink`]): `Commit{seq, ops, consistent_index}` with the buffered
//! writes at the old commit points (`FlushStore`, 10,000 requests or 64 MiB pending, and before
//! anything that must see them committed), and `Flush`,
//! `SyncBackend`, `Defragment`, `OpenStoreReader` where listed above. Without a backend actor
//! (start-up, tests, benches) the store commits straight into its engine ([`Sink::Direct`]).
//!
//! After each applied batch, before its results go out: `Notify{revision, events}` to the
//! watch hub (one Put or Delete event per record written, in revision order). Sending before
//! answering means a client that saw its write acknowledged and then watches finds the hub
//! past it.
//!
//! When a compaction's deletions finish: `CompactionHashed{hash, compact_revision,
//! hash_revision}` to the corruption checker (`Store::set_compaction_hashes`), etcd 3.5's
//! compaction hash, taken over the records the deletions scan (no read of its own): in
//! HashKV's format, the records at or below the compaction revision that are above the
//! previous compaction or kept by this one, with the previous compaction revision — what
//! HashKV at that revision said just before the compaction (a compaction resumed at start-up,
//! or one that met a damaged record, sends none). Members compare them to find one whose data
//! differ after history is gone.
//!
//! Top-level response headers carry the cluster and member ids, the term of the
//! last applied entry and the revision; headers of responses nested in a Txn carry only the
//! revision (a nested Txn's header is empty), as etcd's gRPC layer fills only the outer one.
//!
//! ## Invariants
//! - **Index and disk agree.** Batches are written into the store's write buffer
//!   ([`actcd_types::storage::WriteBuffer`]), which every read merges over the committed engine
//!   and which keeps a write until the backend reports the commit holding it; index changes are
//!   made as requests execute and logged, and taken back (with the batch's writes in the buffer)
//!   if a batch fails. If a commit holding earlier batches fails, the store refuses all work
//!   until a restart replays them from the WAL. A refused request is taken back out of both the
//!   buffer and the index before the next request runs, so it changes nothing.
//! - **The revision increases by exactly one per write request that changes something**; every
//!   change in it has that main revision and sub-revisions 0, 1, 2…. A request that changes
//!   nothing (a delete of nothing, a read-only txn) leaves it and reports the current revision.
//! - **The consistent index is written in the same transaction as the data it covers**, so a
//!   crash never leaves applied data without its index, and re-applying entries above it after
//!   a restart is idempotent.
//! - **Compaction finishes.** `scheduledCompactRev` is written in the batch that accepts the
//!   compaction; records are then deleted in bounded slices, the last of which writes
//!   `finishedCompactRev`. On open, a scheduled mark above the finished one is completed first.
//!
//! ## On disk
//! `key`: revision (17 bytes; 18 with a trailing `t` for a tombstone, see
//! [`actcd_types::Revision`]) → a CRC32C of the revision key and the record, then the encoded
//! `mvccpb.KeyValue` ([`actcd_types::key_record`], the one encode/decode pair). A tombstone's
//! record holds only the key, as etcd's does (its revision is the record's key). `meta`:
//! `consistent_index`, `term`, `scheduledCompactRev`, `finishedCompactRev`, `actcdKeyFormat`
//! (the `key` records' format, 1 = checksummed), each an 8-byte big-endian integer.
//!
//! ## Damaged records
//! Every read of a record checks it: ranges and txns on read views and on the writer's own
//! view (prev_kv, compares, the ranges of a txn), history for watchers, HashKV and the backend
//! hash, the index rebuild at start-up, compaction, the snapshots (etcd's file and a
//! follower's blob). A record that fails is never returned as data: the read fails with
//! etcd's `etcdserver: corrupt cluster` ([`Error::Damaged`] → `EtcdError::Corrupt`, gRPC
//! `DATA_LOSS`), and [`DamageReport`] logs its key (when its bytes still decode) and revision
//! and sends `RaiseCorrupt` for this member (the daemon wires it to whoever proposes the
//! CORRUPT alarm). In detail:
//! - a write that reads a damaged record (a put or delete with `prev_kv`, a txn comparing or
//!   ranging over it) fails alone, as a refused request does, and the batch goes on: this
//!   member then differs from the others, which is what the alarm says. Failing the whole
//!   batch instead would stop the member, and the WAL would replay the same entry into the
//!   same failure at every restart.
//! - at start-up a damaged record is logged, indexed if its bytes still decode (so its key's
//!   reads meet the damage rather than an older version, as if the newer one never existed),
//!   and reported once the alarm recipient is wired ([`Store::set_damage_report`]).
//! - compaction reports damage in the records it scans but still deletes the superseded ones.
//! - the background scrub ([`Scrubber`]) walks the whole table, a bounded slice per tick in a
//!   short read transaction of its own, so damage nobody reads is found too.
//!
//! A data dir written before checksums (no `actcdKeyFormat`) has its `key` table rewritten
//! once when [`Store::open`] opens it ([`upgrade_key_format`], which says why a rewrite and
//! not a tag byte); a store never reads a table whose format it does not know. A leader's
//! snapshot blob from such a build is sealed as it is installed.
//!
//! ## One key through its life
//! Key `foo`, on a store at revision 1:
//!
//! | request            | revision | generations of `foo`              | get(at) answers                  |
//! |--------------------|----------|-----------------------------------|----------------------------------|
//! | put foo=a          | 2        | `{2}` created 2                   | at 2: mod 2, create 2, version 1 |
//! | put foo=b          | 3        | `{2, 3}`                          | at 3: mod 3, create 2, version 2 |
//! | delete foo         | 4        | `{2, 3, 4(t)}` `{}`               | at 4: not found                  |
//! | put foo=c          | 5        | `{2, 3, 4(t)}` `{5}` created 5    | at 5: mod 5, create 5, version 1 |
//! | compact 3          | —        | `{3, 4(t)}` `{5}`                 | at 3: mod 3, version 2 (kept)    |
//! | compact 4          | —        | `{5}`                             | at 3: compacted; at 4: not found |
//!
//! Compacting at 3 keeps revision 3 (the greatest ≤ 3 of the first generation, which a read at 3
//! still needs) and deletes record 2. Compacting at 4 drops the whole first generation: its
//! tombstone is ≤ 4, so no read at 4 or later sees any of it, and records 3 and 4(t) go. A key
//! whose last generation ends at or below the compaction revision leaves the index entirely.
//!
//! ## Where this differs from etcd, and why
//! Every client-visible result is etcd 3.5.1's; these are differences inside.
//! - **Compaction runs in steps on the store's thread.** etcd compacts in a background
//!   scheduler; here, once the batch accepting the compaction is published, the actor runs it
//!   a step every 5 ms (and one per flush): first the key index, `compaction_batch_limit`
//!   keys a step (the whole index at once held the write lock, and the applies, for
//!   0.2–0.3 s at a million keys; a step takes about 0.6 ms), then the record deletions, as many records a step.
//!   A `physical` compaction's waiter is answered when the last step is done, as etcd's server
//!   waits for it outside the apply loop; applies go on meanwhile. It runs to the end at once
//!   only in [`Store::apply_batch`] and for a physical one whose result travels back with its
//!   batch. Reads below the compacted revision are refused from the moment it is accepted, as
//!   in etcd, and a key compacted or not yet reads the same at or above it, so nobody can tell.
//! - **A Txn op that fails after the checks rolls the txn back** with the op's error. etcd
//!   checks `ignore_value`/`ignore_lease` against the state before the txn and panics if the
//!   key is gone when the op runs (deleted earlier in the same txn); we keep etcd's check and
//!   answer `key not found` where etcd would crash.
//! - **Ranges read fewer records**: filters and every sort but VALUE run on the index, so only
//!   the records returned are read (etcd reads `limit + 1`, or everything when sorting).
//! - **Restart never moves the revision back.** etcd takes the current revision from the last
//!   record; if a crash mid-compaction deleted every record up to the scheduled revision,
//!   that would be below revisions already served. It is at least the scheduled revision here.
//! - **On-disk details**: `key` records are etcd's (revision keys, protobuf `KeyValue` values,
//!   key-only tombstones) behind a 4-byte checksum, which HashKV (`hash.rs`), the Snapshot
//!   RPC's file and the backend's outside views leave out, so `HashKV` equals etcd's for the
//!   same history; the compaction marks are 8-byte integers (etcd: 17-byte revisions). An
//!   actcd data directory is not a bbolt file, so nothing reads the marks but this crate.
//! - **Records verify themselves.** etcd 3.5 trusts bbolt's pages: a flipped byte inside a
//!   value is served as data. Here it is `corrupt cluster` and the CORRUPT alarm (above).
//!
//! ## Failpoints (feature `failpoints`, fail-rs; configured by `FAILPOINTS` in the daemon)
//! - `compaction_between_slices` (`Store::step_compaction`, when a slice has run and the next
//!   is about to): `return` fails the step as a failed engine write does; the batch or
//!   `FlushStore` that ran it answers the error, which is fatal (applier or ticker → `Fatal`).
//!   A restart finishes the compaction (`scheduledCompactRev`).
//! - `snapshot_before_install` (`InstallSnapshot` on [`MvccActor`], before anything of a
//!   leader's snapshot is written): `return` answers the install with an error, which the
//!   applier passes to the raft node, which reports `Fatal`.
//!
//! ## Layout
//! `key_index.rs` [`KeyIndex`], [`TreeIndex`], [`KeyRange`] · `view.rs` [`ReadView`],
//! [`ReadViews`] · `reader.rs` [`MvccReader`] · `range.rs` reading at a revision
//! (filters, sort, limit) · `write.rs` Put, DeleteRange, the undo log · `leased.rs` the lease
//! attachment changes of a request's writes, and the list of leased keys · `txn.rs` compares,
//! validation and execution of Txn · `store.rs` [`Store`]: its state, reads on the writer's
//! thread, status; `store/apply.rs` batches, the KV applier and the commit;
//! `store/compaction.rs` a compaction's index step and its deletions in slices;
//! `store/recovery.rs` open, snapshot restore and blobs, the checksum upgrade · `actor.rs` [`MvccActor`] · `error.rs` the crate's error and its mapping to
//! `EtcdError` · `damage.rs` [`DamageReport`] (tests of every damaged-record path in
//! `damage_tests.rs`) · `scrub.rs` [`Scrubber`], the background walk · `encode.rs` a Range
//! answered in its wire form (tests: `encode_tests.rs`).

mod actor;
mod chunk;
mod damage;
mod encode;
mod error;
mod hash;
mod history;
mod key_index;
mod leased;
mod ops;
mod range;
mod reader;
mod scrub;
mod store;
#[cfg(test)]
mod test_requests;
mod txn;
mod view;
mod write;

pub use actor::{BackendLink, MvccActor, MvccPeers};
pub use damage::DamageReport;
pub use error::Error;
pub use key_index::{Generation, KeyIndex, KeyRange, KeyRev, RevisionNotFound, TreeIndex};
pub use ops::OpCounts;
pub use reader::MvccReader;
pub use scrub::{Scrub, ScrubConfig, ScrubTick, Scrubber, Step as ScrubStep};
pub use store::{
    DEFAULT_COMPACTION_BATCH_LIMIT, META_CONSISTENT_INDEX, META_FINISHED_COMPACT,
    META_SCHEDULED_COMPACT, META_TERM, Outbox, Outcome, Sink, Store, upgrade_key_format,
};
pub use view::{ReadView, ReadViews, ViewPublisher};
