# fuzz/make-seeds.py: writes the hand-made seeds under fuzz/seeds/ (run from anywhere; the
# snapshot seed is copied from crates/etcd-snapshot/tests/fixtures, crash inputs are added by hand).
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def put(target, name, data):
    d = os.path.join(HERE, "seeds", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


# ---- gojson: first byte picks the message (fuzz_targets/gojson.rs, NAMES) ----
gateway = {
    "put": (0, '{"key":"Zm9v","value":"YmFy"}'),
    "put-lease": (0, '{"key":"Zm9v","value":"YmFy","lease":"7587862345678","prev_kv":true}'),
    "range": (1, '{"key":"Zm9v","range_end":"Zm9w","limit":"10","sort_order":"DESCEND","sort_target":"MOD","serializable":true}'),
    "range-all": (1, '{"key":"AA==","range_end":"AA==","keys_only":true,"count_only":false,"revision":12}'),
    "txn": (2, '{"compare":[{"key":"Zm9v","result":"EQUAL","target":"VALUE","value":"YmFy"},{"key":"Zm9v","target":"MOD","mod_revision":"3","result":"LESS"}],'
               '"success":[{"request_put":{"key":"Zm9v","value":"YmF6"}},{"request_txn":{"success":[{"request_range":{"key":"Zm9v"}}]}}],'
               '"failure":[{"request_delete_range":{"key":"Zm9v","prev_kv":true}}]}'),
    "watch-stream": (3, '{"create_request":{"key":"Zm9v","range_end":"Zm9w","start_revision":"5","prev_kv":true,"progress_notify":true,"filters":["NOPUT"],"watch_id":"1"}}\n'
                        '{"progress_request":{}}\n{"cancel_request":{"watch_id":"1"}}'),
    "authenticate": (4, '{"name":"root","password":"s3cr\\u00e9t\\n"}'),
    "deleterange": (5, '{"key":"Zm9v","range_end":"AA==","prev_kv":1}'),
    "keepalive-stream": (6, '{"ID":7587862345678} {"ID":"7587862345678"} {"ID":1}'),
    "lease-grant": (7, '{"TTL":60,"ID":0}'),
    "compaction": (8, '{"revision":"100","physical":true}'),
    "role-grant": (9, '{"name":"r","perm":{"permType":"READWRITE","key":"YQ==","range_end":"Yg=="}}'),
    "member-add": (10, '{"peerURLs":["http://10.0.0.2:2380"],"isLearner":true}'),
    "alarm": (11, '{"action":"GET","memberID":"0","alarm":"NOSPACE"}'),
    "lock": (12, '{"name":"bXlsb2Nr","lease":"123"}'),
    "campaign": (13, '{"name":"ZWxlY3Rpb24=","lease":"123","value":"dg=="}'),
    "empty": (0, ''),
    "null": (1, 'null'),
    "errors": (1, '{"key":[300],"limit":1.5e3,"sort_target":"NOPE" ,"x":[{"y":[[[]]]}]}'),
}
for name, (pick, body) in gateway.items():
    put("gojson", name, bytes([pick]) + body.encode())


# ---- hpack / h2authority: etcdctl 3.4's maintenance call with a URL :authority ----
def s(b):
    b = b if isinstance(b, bytes) else b.encode()
    assert len(b) < 127
    return bytes([len(b)]) + b


def frame(kind, flags, stream, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


first_block = (
    b"\x83"  # :method POST
    + b"\x86"  # :scheme http
    + b"\x44" + s("/etcdserverpb.Maintenance/Status")  # :path, indexed
    + b"\x41" + s("http://127.0.0.1:2379")  # :authority, indexed
    + b"\x5f" + s("application/grpc")  # content-type, indexed
    + b"\x40" + s("te") + s("trailers")  # a new name, indexed
    + b"\x40" + s("user-agent") + s("grpc-go/1.26.0")
    + b"\x00" + s("grpc-timeout") + s("5000m")  # without indexing
)
# The next call: its fields from the dynamic table (62 is the newest entry), a table size update.
second_block = b"\x3f\xe1\x1f" + b"\x83\x86\xc1\xc2\xbf\xbe\x10" + s("x-never") + s("v")
huffman_block = b"\x82\x86\x84\x41\x8c\xf1\xe3\xc2\xe5\xf2\x3a\x6b\xa0\xab\x90\xf4\xff"  # RFC 7541 C.4.1
preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
settings = frame(0x4, 0, 0, b"\x00\x02\x00\x00\x00\x00\x00\x04\x00\x40\x00\x00")
window = frame(0x8, 0, 0, struct.pack(">I", 1 << 20))
grpc_body = frame(0x0, 0x1, 1, b"\x00\x00\x00\x00\x00")
conn = (
    preface + settings + window
    + frame(0x1, 0x4, 1, first_block) + grpc_body
    + frame(0x1, 0x4 | 0x20, 3, b"\x00\x00\x00\x00\x10" + second_block)  # PRIORITY
    + frame(0x1, 0x8, 5, b"\x03" + huffman_block[:6] + b"\x00\x00\x00")  # PADDED, no END_HEADERS
    + frame(0x9, 0x4, 5, huffman_block[6:])  # CONTINUATION
    + frame(0x6, 0, 0, b"12345678")  # PING
)
put("h2authority", "etcdctl34-status", b"\x00" + conn)
put("h2authority", "etcdctl34-status-pieces", b"\x05" + conn)
put("h2authority", "valid-authority", b"\x01" + preface + settings
    + frame(0x1, 0x5, 1, b"\x83\x86\x44" + s("/etcdserverpb.KV/Range") + b"\x41" + s("127.0.0.1:2379")))


def blk(b):  # fuzz_targets/hpack.rs: a length byte, then the block
    assert len(b) < 256
    return bytes([len(b)]) + b


put("hpack", "etcdctl34-blocks", blk(first_block) + blk(second_block) + blk(huffman_block))
put("hpack", "rfc7541-c3", blk(b"\x82\x86\x84\x41\x0fwww.example.com")
    + blk(b"\x82\x86\x84\xbe\x58\x08no-cache")
    + blk(b"\x82\x87\x85\xbf\x40\x0acustom-key\x0ccustom-value"))

# ---- v2keys: method, path, then form values ----
for name, text in {
    "put-ttl": "PUT\n/foo/bar\nvalue=x\nttl=5\nprevExist=false",
    "cas": "PUT\n/foo\nvalue=y\nprevValue=x\nprevIndex=7",
    "refresh": "PUT\n/dir/\nrefresh=true\nttl=30\ndir=true",
    "watch": "GET\n/foo\nwait=true\nrecursive=true\nwaitIndex=12\nstream=true",
    "quorum": "GET\n/a/../b/./c\nquorum=1\nsorted=T",
    "post": "POST\n/queue\nvalue=job\nnoValueOnSuccess=true",
    "delete": "DELETE\n/foo\nprevIndex=3\nrecursive=true\ndir=true",
    "bad": "GET\n/\nwait=yes\nttl=-1\nprevValue=",
}.items():
    put("v2keys", name, text)


# ---- wal: CRC32C records as actors/wal writes them ----
def crc32c_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


T = crc32c_table()


def crc32c(seed, data):
    c = seed ^ 0xFFFFFFFF
    for b in data:
        c = T[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def record(prev, kind, payload):
    c = crc32c(crc32c(prev, bytes([kind])), payload)
    return struct.pack("<IBI", len(payload), kind, c) + payload, c


def segment(start_crc, metadata, hard_state, records):
    out, c = record(start_crc, 4, struct.pack("<I", start_crc))
    for kind, payload in [(1, metadata), (3, struct.pack("<QQQ", *hard_state))] + records:
        r, c = record(c, kind, payload)
        out += r
    return out, c


def raft_entry(term, index, data):  # eraftpb.Entry: term 2, index 3, data 4
    return b"\x10" + bytes([term]) + b"\x18" + bytes([index]) + b"\x22" + bytes([len(data)]) + data


def entry(index, term, data):
    return (2, struct.pack("<QQ", index, term) + raft_entry(term, index, data))


meta = struct.pack("<QQ", 0x8E9E05C52164694D, 0xCDF818194E3A8C32)
seg0, end0 = segment(0, meta, (1, 1, 0), [entry(1, 1, b""), entry(2, 1, b"put foo"), (3, struct.pack("<QQQ", 2, 1, 2)), entry(3, 2, b"put bar")])
seg1, _ = segment(end0, meta, (2, 1, 3), [entry(3, 2, b"overwrite"), (5, struct.pack("<QQ", 2, 1) + b"\x0a\x01\x01"), entry(4, 2, b"x")])
put("wal", "one-segment", b"\x00" + seg0)
put("wal", "one-segment-torn", b"\x00" + seg0 + seg1[:20])
put("wal", "two-segments", b"\x01" + struct.pack("<H", len(seg0)) + seg0 + seg1)
put("wal", "preallocated-tail", b"\x00" + seg0 + bytes(600))

# ---- snapshot: etcd 3.5.1's file (first byte even: bolt), a whole-store blob (odd) ----
with open(os.path.join(HERE, "..", "crates", "etcd-snapshot", "tests", "fixtures", "etcd-3.5.1-snapshot.db"), "rb") as f:
    put("snapshot", "etcd-3.5.1", b"\x00" + f.read())

# ---- raft_envelope: first byte picks RaftMessage / SnapshotChunk / MembersReply / raw ----
# eraftpb.Message: msg_type 1 (MsgAppend=3), to 2, from 3, term 4, log_term 5, index 6,
# entries 7, commit 8.
msg_append = b"\x08\x03\x10\x02\x18\x01\x20\x02\x28\x01\x30\x02\x3a" + s(raft_entry(2, 3, b"put")) + b"\x40\x02"
heartbeat = b"\x08\x08\x10\x02\x18\x01\x20\x02\x40\x05"
put("raft_envelope", "raft-message-append", b"\x00" + b"\x0a" + s(msg_append))
put("raft_envelope", "raft-message-heartbeat", b"\x00" + b"\x0a" + s(heartbeat))
# MsgSnapshot (7) with snapshot 9 {data 1, metadata 2 {conf_state 1, index 2, term 3}}.
snap_msg = b"\x08\x07\x10\x02\x18\x01\x20\x02\x4a" + s(b"\x12" + s(b"\x0a\x02\x08\x01\x10\x09\x18\x02"))
put("raft_envelope", "snapshot-chunk", b"\x01" + b"\x0a" + s(snap_msg) + b"\x12\x04data\x18\x01")
put("raft_envelope", "members-reply", b"\x02" + b"\x08\x2a\x12" + s(b"\x08\x01\x12\x02m1\x1a\x15http://127.0.0.1:2380"))
put("raft_envelope", "raw-append", b"\x03" + msg_append)


# Hand-made bbolt files of 512-byte pages (crates/etcd-snapshot/src/bolt.rs, etcd_file tests):
# a branch page that lists itself 30 times (exponential walk before the fix), and a leaf whose
# 20 elements all point at one 171-byte key and value (copies past the file's size).
def bolt_file(pages):
    size = 512
    out = b""
    for pgid in range(2):
        meta = struct.pack("<IIII", 0xED0CDAED, 2, size, 0) + struct.pack("<QQQQQQ", 2, 0, 0, 2 + len(pages), pgid, 0)
        out += (struct.pack("<QHHI", pgid, 0x04, 0, 0) + meta).ljust(size, b"\0")
    for i, (flags, count, body) in enumerate(pages):
        out += (struct.pack("<QHHI", 2 + i, flags, count, 0) + body).ljust(size, b"\0")
    return out


root = (0x02, 1, struct.pack("<IIII", 1, 16, 1, 16) + b"b" + struct.pack("<QQ", 3, 0))
cycle = (0x01, 30, struct.pack("<IIQ", 0, 0, 3) * 30)
overlap = (0x02, 20, b"".join(struct.pack("<IIII", 0, (20 - i) * 16, 1, 170) for i in range(20)) + b"k" * 171)
put("snapshot", "page-cycle", b"\x00" + bolt_file([root, cycle]))
put("snapshot", "overlapping-elements", b"\x00" + bolt_file([root, overlap]))
# A whole-store blob: magic, then table code, key length, key, value length, value (BE).
blob = b"actcdsn1" + b"".join(bytes([t]) + struct.pack(">I", len(k)) + k + struct.pack(">I", len(v)) + v
                              for t, k, v in [(0, b"k1", b"v1"), (1, b"lease", b""), (9, b"", b"x" * 3)])
put("snapshot", "whole-store", b"\x01" + blob)
