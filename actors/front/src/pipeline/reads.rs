//! Reads: Range (unary, in its wire form, and etcd 3.7's RangeStream in chunks), read-only txns
//! served from the newest view with no trip through raft (after a ReadIndex when linearizable),
//! and the store, member and raft state the admin calls read.

use actcd_types::msg::RangeAnswer;

use super::*;

impl Pipeline {
    /// A Range, read from the store's newest published view in this task: a serializable one
    /// at once, a linearizable one once the ReadIndex barrier says everything committed before
    /// the call is applied (the store publishes a batch's view before it reports the batch
    /// applied, so the newest view then holds it).
    ///
    /// With auth on, the reader is judged by the newest permission view after the barrier, as
    /// etcd does (a grant revoked before the read began is never used).
    pub async fn range(
        &self,
        request: RangeRequest,
        who: AuthInfo,
    ) -> Result<RangeResponse, EtcdError> {
        actcd_types::validate::check_range(&request)?;
        let started = Instant::now();
        let answer = match self.before_range(&request, who).await {
            Ok(()) => self.timed_range(|| self.routes.reads.range(&request)),
            Err(e) => Err(e),
        };
        self.counters
            .durations
            .request("Range", answer.is_ok(), started.elapsed());
        answer
    }

    /// A storage read of a Range, timed as etcd times `txn.Range`
    /// (`etcd_server_range_duration_seconds`).
    pub(crate) fn timed_range<T>(
        &self,
        read: impl FnOnce() -> Result<T, EtcdError>,
    ) -> Result<T, EtcdError> {
        let started = Instant::now();
        let answer = read();
        self.counters
            .durations
            .range(answer.is_ok(), started.elapsed());
        answer
    }

    /// [`Self::range`] for the gRPC Range: the answer in its wire form where the store can
    /// give it so (`KeyReads::range_answer`; `range_route.rs` sends it).
    pub async fn range_answer(
        &self,
        request: RangeRequest,
        who: AuthInfo,
    ) -> Result<actcd_types::msg::RangeAnswer, EtcdError> {
        actcd_types::validate::check_range(&request)?;
        let started = Instant::now();
        let answer = match self.before_range(&request, who).await {
            Ok(()) => {
                let read = Instant::now();
                let answer = read_range(&self.routes.reads, request).await;
                self.counters
                    .durations
                    .range(answer.is_ok(), read.elapsed());
                answer
            }
            Err(e) => Err(e),
        };
        self.counters
            .durations
            .request("Range", answer.is_ok(), started.elapsed());
        answer
    }

    /// What a Range passes before it is read (after validation, which etcd's gRPC layer does
    /// before its server takes the request up and starts timing it): the corrupt alarm, the
    /// barrier of a linearizable read, then the permission check.
    pub(crate) async fn before_range(
        &self,
        request: &RangeRequest,
        who: AuthInfo,
    ) -> Result<(), EtcdError> {
        self.refuse_if_corrupt()?;
        if !request.serializable {
            self.linearizable_barrier().await?;
        }
        if self.auth.enabled() {
            self.check_read(who, request.key.clone(), request.range_end.clone())
                .await?;
        }
        Ok(())
    }

    /// etcd 3.7's RangeStream: Range's answer in chunks whose in-order merge is the unary
    /// answer (mvcc `chunk.rs`). Checked as a Range is, plus etcd's two refusals (custom sort
    /// orders and revision filters: `Unimplemented`); then the ReadIndex barrier and the auth
    /// check, once. The chunks come from a task of their own, down a channel holding one: it
    /// makes the next only when the client has taken the one before, holds nothing but the
    /// cursor between two, and stops when the client hangs up or the member shuts down. A
    /// learner never gets here (the tower layer refuses every stream but Snapshot, as etcd).
    ///
    /// Two answers are one chunk read like a Range: count_only (as etcd), and a sort target
    /// other than KEY with order NONE, which etcd 3.7 accepts and streams chunk by chunk sorted
    /// (its merge then is not its Range answer); here it is exactly the Range answer.
    pub async fn range_stream(
        self: Arc<Self>,
        request: RangeRequest,
        who: AuthInfo,
    ) -> Result<RangeChunks, tonic::Status> {
        use actcd_proto::etcdserverpb::range_request::{SortOrder, SortTarget};
        actcd_types::validate::check_range(&request)?;
        let none = request.sort_order == SortOrder::None as i32;
        let key_ascend = request.sort_order == SortOrder::Ascend as i32
            && request.sort_target == SortTarget::Key as i32;
        if !none && !key_ascend {
            return Err(tonic::Status::unimplemented(
                "RangeStream does not support custom sort orders",
            ));
        }
        if request.min_mod_revision != 0
            || request.max_mod_revision != 0
            || request.min_create_revision != 0
            || request.max_create_revision != 0
        {
            return Err(tonic::Status::unimplemented(
                "RangeStream does not support revision filters",
            ));
        }
        self.refuse_if_corrupt()?;
        if !request.serializable {
            self.linearizable_barrier().await?;
        }
        let auth_revision = self.auth.revision();
        if self.auth.enabled() {
            self.check_read(who.clone(), request.key.clone(), request.range_end.clone())
                .await?;
        }
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        let one_range = request.count_only || request.sort_target != SortTarget::Key as i32;
        if one_range {
            let answer = self
                .timed_range(|| self.routes.reads.range(&request))
                .map(|r| RangeStreamResponse {
                    range_response: Some(r),
                });
            let _ = tx.try_send(answer.map_err(tonic::Status::from));
            return Ok(rx);
        }
        tokio::spawn(self.produce_chunks(request, who, auth_revision, tx));
        Ok(rx)
    }

    /// RangeStream's producer (see [`Self::range_stream`]). The first chunk (at most ten
    /// key-values) is read in this task; the later ones, about [`Self::chunk_target`] bytes
    /// each, on a blocking thread, so that no gRPC worker reads for a millisecond at a time.
    pub(crate) async fn produce_chunks(
        self: Arc<Self>,
        request: RangeRequest,
        who: AuthInfo,
        auth_revision: u64,
        tx: tokio::sync::mpsc::Sender<Result<RangeStreamResponse, tonic::Status>>,
    ) {
        let target = self.chunk_target();
        let request = Arc::new(request);
        let mut cursor = StreamCursor::default();
        while !cursor.done {
            let permit = tokio::select! {
                biased;
                () = self.closed() => {
                    end_at_shutdown(&tx).await;
                    return;
                }
                permit = tx.reserve() => match permit {
                    Ok(permit) => permit,
                    // The client hung up.
                    Err(_) => return,
                },
            };
            // After an auth change since the stream began, the caller is judged again, by the
            // newest permissions, before the next chunk: as a Range sent now would be (a token
            // names its user, whose permissions are looked up afresh).
            if self.auth.revision() != auth_revision {
                let view = self.auth.view();
                let now = AuthInfo {
                    revision: if who.revision == 0 {
                        0
                    } else {
                        view.revision()
                    },
                    ..who.clone()
                };
                let checked = view.check_range(&now, &request.key, &request.range_end, Perm::Read);
                if let Err(e) = checked {
                    permit.send(Err(e.into()));
                    return;
                }
            }
            // Each chunk is a storage read, timed as etcd times each of its `txn.Range` calls.
            let chunk = if cursor.chunks == 0 {
                self.timed_range(|| self.routes.reads.range_chunk(&request, &mut cursor, target))
            } else {
                let reads = Arc::clone(&self.routes.reads);
                let req = Arc::clone(&request);
                let mut c = cursor.clone();
                let counters = Arc::clone(&self.counters);
                let read = tokio::task::spawn_blocking(move || {
                    let started = Instant::now();
                    let chunk = reads.range_chunk(&req, &mut c, target);
                    counters.durations.range(chunk.is_ok(), started.elapsed());
                    (chunk, c)
                })
                .await;
                match read {
                    Ok((chunk, c)) => {
                        cursor = c;
                        chunk
                    }
                    Err(e) => Err(EtcdError::internal(e)),
                }
            };
            match chunk {
                Ok(r) => permit.send(Ok(RangeStreamResponse {
                    range_response: Some(r),
                })),
                Err(e) => {
                    permit.send(Err(e.into()));
                    return;
                }
            }
        }
    }

    /// How big a RangeStream chunk grows: ¾ of `--max-request-bytes` (so that a client whose
    /// receive limit is the server's request limit takes it), at most 4 MiB (gRPC clients'
    /// default receive limit).
    pub fn chunk_target(&self) -> usize {
        let max_request = self.config.max_recv_bytes.saturating_sub(512 * 1024);
        (max_request / 4 * 3).clamp(1, 4 << 20)
    }

    /// A txn without writes is served like a read: linearizable through ReadIndex unless every
    /// op is a serializable range (etcd's rule), and it never enters the log.
    pub async fn read_only_txn(
        &self,
        request: TxnRequest,
        who: AuthInfo,
    ) -> Result<TxnResponse, EtcdError> {
        actcd_types::validate::check_txn(&request, self.config.max_txn_ops)?;
        self.refuse_if_corrupt()?;
        if !is_txn_serializable(&request) {
            self.linearizable_barrier().await?;
        }
        // Timed from here, as etcd times a read-only txn (after its ReadIndex wait). etcd's
        // `success` is the read's own outcome: a permission refusal is observed as a success
        // (its deferred observer sees only the error of the read), and so here.
        let started = Instant::now();
        let view = self.auth.view();
        let (answer, success) = if view.enabled() {
            // The same checks a txn gets at apply: every compare and every op, both branches.
            let as_entry = InternalRaftRequest {
                txn: Some(request),
                ..Default::default()
            };
            match view.check_request(&who, &as_entry, &|_| Vec::new()) {
                Ok(()) => {
                    let answer = self
                        .routes
                        .reads
                        .read_txn(&as_entry.txn.unwrap_or_default());
                    let success = answer.is_ok();
                    (answer, success)
                }
                Err(e) => (Err(e), true),
            }
        } else {
            let answer = self.routes.reads.read_txn(&request);
            let success = answer.is_ok();
            (answer, success)
        };
        self.counters
            .durations
            .request("ReadonlyTxn", success, started.elapsed());
        answer
    }

    /// The members as this member has applied them.
    pub async fn members(&self) -> Result<Vec<MemberRecord>, EtcdError> {
        Ok(self.routes.members.send(GetMembers).await?)
    }

    pub async fn store_status(&self) -> Result<StoreStatus, EtcdError> {
        self.routes.store_status.send(GetStoreStatus).await?
    }

    /// The raised alarms, as the applier has applied them.
    pub async fn alarms(&self) -> Result<Vec<AlarmMember>, EtcdError> {
        Ok(self.routes.alarms.send(GetAlarms).await?)
    }

    pub async fn hash_kv(&self, revision: i64) -> Result<HashKvResult, EtcdError> {
        self.routes.hash_kv.send(HashKv { revision }).await?
    }

    pub async fn raft_status(&self) -> Result<RaftStatusReply, EtcdError> {
        Ok(self.routes.raft_status.send(RaftStatus).await?)
    }
}

/// The chunks of one RangeStream answer, as its producer sends them.
pub type RangeChunks = tokio::sync::mpsc::Receiver<Result<RangeStreamResponse, tonic::Status>>;

/// No put and no delete anywhere in the txn, nested txns included.
pub fn is_txn_read_only(t: &TxnRequest) -> bool {
    t.success
        .iter()
        .chain(&t.failure)
        .all(|op| match &op.request {
            Some(request_op::Request::RequestRange(_)) | None => true,
            Some(request_op::Request::RequestTxn(n)) => is_txn_read_only(n),
            Some(
                request_op::Request::RequestPut(_) | request_op::Request::RequestDeleteRange(_),
            ) => false,
        })
}

/// Every op of both branches is a serializable range (an empty txn counts).
pub(crate) fn is_txn_serializable(t: &TxnRequest) -> bool {
    let serializable = |op: &RequestOp| matches!(&op.request, Some(request_op::Request::RequestRange(r)) if r.serializable);
    t.success.iter().chain(&t.failure).all(serializable)
}

/// Most keys a Range may ask for and still be read in the calling task: a larger one (or one
/// without a limit over more than one key) is read on the blocking pool, so that the thread it
/// came in on — on a small machine the one the store applies on too — goes on serving while
/// the records are checked (a million keys take about a second).
const INLINE_LIMIT: i64 = 4096;

/// Reads `request` from the newest view, on the blocking pool if it may be large.
pub(crate) async fn read_range(
    reads: &Arc<dyn KeyReads>,
    request: RangeRequest,
) -> Result<RangeAnswer, EtcdError> {
    let small = request.range_end.is_empty() || (1..=INLINE_LIMIT).contains(&request.limit);
    if small {
        return reads.range_answer(&request);
    }
    let reads = Arc::clone(reads);
    tokio::task::spawn_blocking(move || reads.range_answer(&request))
        .await
        .map_err(|e| EtcdError::internal(format!("actcd: range read failed: {e}")))?
}

#[cfg(test)]
#[path = "reads_tests.rs"]
mod tests;
