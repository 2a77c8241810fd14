# grpc-gateway errors: malformed bodies, unknown paths, and etcd's errors as HTTP statuses
require_fresh
http POST /v3/kv/put "{\"key\":\"$(b64 a)\",\"value\":\"$(b64 1)\"}"
http POST /v3/kv/put '{}'
http POST /v3/kv/put '{"key":"not base64!"}'
http POST /v3/kv/range "{\"key\":\"$(b64 a)\",\"revision\":99}"
http POST /v3/kv/range "{\"key\":\"$(b64 a)\",\"sort_target\":\"NOPE\"}"
http POST /v3/kv/nosuch '{}'
http POST /v3/lease/revoke '{"ID":12345}'
http POST /v3/lease/timetolive '{"ID":12345}'
http POST /v3/kv/put "{\"key\":\"$(b64 b)\",\"value\":\"$(b64 1)\",\"lease\":12345}"
http POST /v3/kv/compaction '{"revision":99}'
http POST /v3/kv/compaction '{"revision":2}'
http POST /v3/kv/compaction '{"revision":2}'
http POST /v3/kv/range "{\"key\":\"$(b64 a)\",\"revision\":1}"
http POST /v3/auth/authenticate '{"name":"x","password":"y"}'
http POST /v3/auth/user/get '{"name":"nobody"}'
http POST /v3/cluster/member/remove '{"ID":1}'
http POST /v3/maintenance/transfer-leadership '{"targetID":1}'
http POST /v3/kv/range '{"key":"YQ="}'
http POST /v3/kv/range '{"key":"YQ"}'
http POST /v3/kv/range '{"key":"YQ==","sort_order":"UP","bogus":1}'
http POST /v3/kv/txn "{\"compare\":[{\"key\":\"$(b64 a)\",\"target\":\"VALUE\",\"result\":\"SOMETIMES\"}]}"
