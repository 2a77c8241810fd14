# raised and cleared through the API with /health following them
require_fresh
# etcd 3.6's Status fields (storageVersion, dbSizeQuota, downgradeInfo), which actcd sends and
# 3.5.1 does not have: an accepted difference (docs/etcd-changes/3.6-3.7.md), not compared.
norm_sed '"dbSizeQuota": "[0-9]+", "downgradeInfo": \{\}, ' ''
norm_sed ', "storageVersion": "[^"]*"' ''
volatile hash
http POST /v3/kv/put "{\"key\":\"$(b64 a)\",\"value\":\"$(b64 1)\"}"
http POST /v3/kv/put "{\"key\":\"$(b64 b)\",\"value\":\"$(b64 2)\"}"
http POST /v3/kv/deleterange "{\"key\":\"$(b64 a)\"}"
http POST /v3/maintenance/status '{}'
MEMBER="$(jget "$(last_out)" header.member_id)"
http POST /v3/kv/compaction '{"revision":3}'
http POST /v3/maintenance/defragment '{}'
http POST /v3/kv/range "{\"key\":\"$(b64 b)\"}"
http POST /v3/maintenance/alarm '{"action":"GET"}'
http POST /v3/maintenance/alarm "{\"action\":\"ACTIVATE\",\"memberID\":\"$MEMBER\",\"alarm\":\"NOSPACE\"}"
http GET /health
http GET '/health?exclude=NOSPACE'
http POST /v3/kv/put "{\"key\":\"$(b64 c)\",\"value\":\"$(b64 3)\"}"
http POST /v3/kv/range "{\"key\":\"$(b64 b)\"}"
http POST /v3/kv/deleterange "{\"key\":\"$(b64 b)\"}"
http POST /v3/maintenance/status '{}'
http POST /v3/maintenance/alarm "{\"action\":\"DEACTIVATE\",\"memberID\":\"$MEMBER\",\"alarm\":\"NOSPACE\"}"
http GET /health
http POST /v3/kv/put "{\"key\":\"$(b64 c)\",\"value\":\"$(b64 3)\"}"
http POST /v3/maintenance/alarm "{\"action\":\"ACTIVATE\",\"memberID\":\"$MEMBER\",\"alarm\":\"CORRUPT\"}"
http GET /health
http POST /v3/maintenance/alarm '{"action":"GET"}'
