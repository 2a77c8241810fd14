//! `range`: one key, `[key, range_end)` or a prefix, answered three ways.
//!
//! * **unary** (default): one `Range` call per request.
//! * **`--paginate N`**: one request is a whole walk of the range in pages
//!   of N keys, the way Kubernetes lists: `limit` N, the next page starting
//!   at the last key of the previous one plus `\0`, every page after the
//!   first pinned to the first page's revision (so the walk is one
//!   consistent snapshot even while writes go on). The walk's latency is the
//!   request's; each page's latency is reported as the `page` section.
//! * **`--stream`**: one request is a whole `RangeStream` (etcd 3.7): the
//!   chunks are merged in order (kvs appended, header, count and more from
//!   the last chunk that has them). Time to the first chunk is reported as
//!   the `first_chunk` section. A server without the rpc (etcd before 3.7)
//!   answers `Unimplemented`; the run then ends with one line saying so and
//!   exit status 3.
//!
//! Every mode reports, for the last answer, how many kvs it held (`kvs`), the
//! range's `count`, the revision it was read at, and the mean encoded size of
//! an answer in bytes (`bytes`, what went over the wire before HTTP/2
//! framing). Answers are dropped as soon as they are counted.
//!
//! Answers can be large (a million 256-byte values is some 300 MB), so the
//! receive limit is `--max-recv-bytes`, by default what etcd's Go client
//! allows (2³¹−1 bytes) rather than tonic's 4 MiB.

use actcd_proto::etcdserverpb::kv_client::KvClient;
use actcd_proto::etcdserverpb::{RangeRequest, RangeResponse};
use prost::Message as _;
use tokio::time::Instant;
use tonic::Status;
use tonic::transport::Channel;

use crate::BenchError;
use crate::load::{self, Conn, Op, Plan, Pool, Worker};
use crate::report::{Report, Stats};

/// etcd's Go client's default receive limit (`math.MaxInt32`).
pub const DEFAULT_MAX_RECV_BYTES: usize = i32::MAX as usize;

/// How each request reads the range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Unary,
    /// Pages of this many keys.
    Paginate(i64),
    Stream,
}

#[derive(Debug, Clone)]
pub struct RangeOpts {
    pub clients: usize,
    /// The request every call sends (paginated walks rewrite key, limit and
    /// revision page by page).
    pub req: RangeRequest,
    pub mode: Mode,
    pub max_recv_bytes: usize,
}

/// What one worker saw of its answers.
#[derive(Debug, Default)]
struct Seen {
    /// Of the last complete answer: kvs, count, revision, more.
    kvs: u64,
    count: i64,
    revision: i64,
    more: bool,
    /// Encoded bytes over all answers, and how many answers.
    bytes: u64,
    answers: u64,
    /// Pages of the last walk, chunks of the last stream.
    parts: u64,
    /// Per-page latencies (paginate) or times to first chunk (stream).
    part_lats: Vec<f64>,
}

impl Seen {
    fn answered(&mut self, resp: &RangeResponse, kvs: u64, bytes: u64, parts: u64) {
        self.kvs = kvs;
        self.count = resp.count;
        self.revision = resp.header.as_ref().map_or(0, |h| h.revision);
        self.more = resp.more;
        self.bytes += bytes;
        self.answers += 1;
        self.parts = parts;
    }
}

struct RangeWorker {
    kv: KvClient<Channel>,
    conn: Conn,
    req: RangeRequest,
    mode: Mode,
    seen: Seen,
}

impl RangeWorker {
    async fn unary(&mut self) -> Result<(), Status> {
        let resp = self
            .kv
            .range(self.conn.request(self.req.clone()))
            .await?
            .into_inner();
        let bytes = resp.encoded_len() as u64;
        self.seen.answered(&resp, resp.kvs.len() as u64, bytes, 1);
        Ok(())
    }

    async fn paginate(&mut self, page: i64) -> Result<(), Status> {
        let mut req = self.req.clone();
        req.limit = page;
        let (mut kvs, mut bytes, mut pages) = (0u64, 0u64, 0u64);
        loop {
            let start = Instant::now();
            let resp = self
                .kv
                .range(self.conn.request(req.clone()))
                .await?
                .into_inner();
            self.seen.part_lats.push(start.elapsed().as_secs_f64());
            pages += 1;
            kvs += resp.kvs.len() as u64;
            bytes += resp.encoded_len() as u64;
            let last = resp.kvs.last().map(|kv| kv.key.clone());
            match (resp.more, last) {
                (true, Some(last)) => {
                    if req.revision == 0 {
                        req.revision = resp.header.as_ref().map_or(0, |h| h.revision);
                    }
                    req.key = next_page_key(last);
                }
                _ => {
                    self.seen.answered(&resp, kvs, bytes, pages);
                    return Ok(());
                }
            }
        }
    }

    async fn stream(&mut self) -> Result<(), Status> {
        let start = Instant::now();
        let mut chunks = self
            .kv
            .range_stream(self.conn.request(self.req.clone()))
            .await?
            .into_inner();
        let mut merged = RangeResponse::default();
        let (mut kvs, mut bytes, mut n) = (0u64, 0u64, 0u64);
        while let Some(chunk) = chunks.message().await? {
            if n == 0 {
                self.seen.part_lats.push(start.elapsed().as_secs_f64());
            }
            n += 1;
            bytes += chunk.encoded_len() as u64;
            let Some(part) = chunk.range_response else {
                continue;
            };
            kvs += part.kvs.len() as u64;
            merge_chunk(&mut merged, part);
        }
        self.seen.answered(&merged, kvs, bytes, n);
        Ok(())
    }
}

impl Worker for RangeWorker {
    async fn call(&mut self, _: u64) -> Result<Op, Status> {
        match self.mode {
            Mode::Unary => self.unary().await?,
            Mode::Paginate(page) => self.paginate(page).await?,
            Mode::Stream => self.stream().await?,
        }
        Ok(Op::Read)
    }
}

/// The first key after `last`: `last` followed by a zero byte.
pub fn next_page_key(mut last: Vec<u8>) -> Vec<u8> {
    last.push(0);
    last
}

/// Folds one chunk into the merged answer as a protobuf merge would, but
/// without keeping the kvs (only their number matters here): scalar fields
/// set in the chunk replace the merged ones, the header is merged.
pub fn merge_chunk(merged: &mut RangeResponse, part: RangeResponse) {
    if let Some(h) = part.header {
        merged.header = Some(h);
    }
    if part.count != 0 {
        merged.count = part.count;
    }
    if part.more {
        merged.more = true;
    }
}

pub async fn range(pool: &Pool, opts: &RangeOpts, plan: Plan) -> Result<Report, BenchError> {
    if let Mode::Paginate(page) = opts.mode
        && page <= 0
    {
        return Err(BenchError::Usage("--paginate must be positive".into()));
    }
    let workers = (0..opts.clients)
        .map(|w| RangeWorker {
            kv: KvClient::new(pool.conn(w).channel.clone())
                .max_decoding_message_size(opts.max_recv_bytes),
            conn: pool.conn(w).clone(),
            req: opts.req.clone(),
            mode: opts.mode,
            seen: Seen::default(),
        })
        .collect();
    let (s, workers) = load::drive("range", workers, plan).await;
    if opts.mode == Mode::Stream
        && s.ok() == 0
        && let Some(e) = s.unimplemented()
    {
        return Err(BenchError::Unimplemented(format!(
            "RangeStream, an etcd 3.7 rpc ({e})"
        )));
    }
    let mut report = Report::new("range", Stats::new(s.all(), s.elapsed), s.errors);
    let mut parts = Vec::new();
    let (mut bytes, mut answers) = (0u64, 0u64);
    let mut last = None;
    for w in workers {
        bytes += w.seen.bytes;
        answers += w.seen.answers;
        parts.extend_from_slice(&w.seen.part_lats);
        if w.seen.answers > 0 {
            last = Some(w.seen);
        }
    }
    let mode = match opts.mode {
        Mode::Unary => "unary",
        Mode::Paginate(_) => "paginate",
        Mode::Stream => "stream",
    };
    report.extra.insert("mode".into(), mode.into());
    if let Some(last) = last {
        report.extra.insert("kvs".into(), last.kvs.into());
        report.extra.insert("count".into(), last.count.into());
        report.extra.insert("revision".into(), last.revision.into());
        report.extra.insert("more".into(), last.more.into());
        match opts.mode {
            Mode::Unary => {}
            Mode::Paginate(_) => {
                report.extra.insert("pages".into(), last.parts.into());
            }
            Mode::Stream => {
                report.extra.insert("chunks".into(), last.parts.into());
            }
        }
    }
    if let Some(mean) = bytes.checked_div(answers) {
        report.extra.insert("bytes".into(), mean.into());
    }
    match opts.mode {
        Mode::Unary => {}
        Mode::Paginate(_) => report
            .sections
            .push(("page".into(), Stats::new(parts, s.elapsed))),
        Mode::Stream => report
            .sections
            .push(("first_chunk".into(), Stats::new(parts, s.elapsed))),
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use actcd_proto::etcdserverpb::ResponseHeader;
    use tokio_stream::wrappers::TcpListenerStream;
    use tonic::service::Routes;

    use super::*;
    use crate::load::ConnOpts;

    /// A gRPC server with no services: every call is `Unimplemented`, as
    /// etcd before 3.7 answers RangeStream.
    async fn empty_server() -> Pool {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_routes(Routes::default())
                .serve_with_incoming(TcpListenerStream::new(listener)),
        );
        Pool::connect(&ConnOpts {
            endpoints: vec![addr.to_string()],
            conns: 1,
            user: None,
            password: None,
        })
        .await
        .unwrap()
    }

    fn opts(mode: Mode) -> RangeOpts {
        RangeOpts {
            clients: 2,
            req: RangeRequest {
                key: b"a".to_vec(),
                range_end: b"b".to_vec(),
                ..Default::default()
            },
            mode,
            max_recv_bytes: DEFAULT_MAX_RECV_BYTES,
        }
    }

    #[tokio::test]
    async fn a_stream_the_server_lacks_ends_the_run_with_one_clear_error() {
        let pool = empty_server().await;
        let err = range(&pool, &opts(Mode::Stream), Plan::exactly(5))
            .await
            .unwrap_err();
        assert!(matches!(err, BenchError::Unimplemented(_)), "{err:?}");
        assert_eq!(err.exit_code(), 3);
        let msg = err.to_string();
        assert!(!msg.contains('\n'), "{msg}");
        assert!(msg.contains("RangeStream, an etcd 3.7 rpc"), "{msg}");
        // A unary range against the same server is a report of failures, as
        // every other workload gives.
        let report = range(&pool, &opts(Mode::Unary), Plan::exactly(5))
            .await
            .unwrap();
        assert!(report.only_unimplemented());
    }

    #[tokio::test]
    async fn a_page_size_must_be_positive() {
        let pool = empty_server().await;
        let err = range(&pool, &opts(Mode::Paginate(0)), Plan::exactly(1))
            .await
            .unwrap_err();
        assert!(matches!(err, BenchError::Usage(_)), "{err:?}");
    }

    #[test]
    fn next_page_starts_just_after_the_last_key() {
        assert_eq!(next_page_key(b"a/1".to_vec()), b"a/1\0");
        assert!(next_page_key(b"a/1".to_vec()).as_slice() > b"a/1".as_slice());
        assert!(next_page_key(b"a/1".to_vec()).as_slice() < b"a/1\x01".as_slice());
    }

    #[test]
    fn chunks_merge_to_the_last_header_count_and_more() {
        let mut merged = RangeResponse::default();
        merge_chunk(&mut merged, RangeResponse::default());
        assert_eq!(merged, RangeResponse::default());
        let last = RangeResponse {
            header: Some(ResponseHeader {
                revision: 7,
                ..Default::default()
            }),
            count: 3,
            more: true,
            ..Default::default()
        };
        merge_chunk(&mut merged, last.clone());
        assert_eq!(merged, last);
    }
}
