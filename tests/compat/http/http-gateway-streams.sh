# grpc-gateway's bidirectional routes read the body as a stream of JSON requests: a keepalive
# body of several requests gets an answer each, a bad one after the first ends the requests (the
# earlier answered, nothing written about the bad one) and the stream ends with the body; a watch
# body creates a watch per request up to a bad one (a key after it is not watched), and
# /v3beta/ serves the same routes.
require_fresh
# Bodies holding server-made lease IDs go through a file, so the recorded arguments don't carry them.
post_file() { # PATH BODY
  printf '%s' "$2" >"$SCEN_TMP/body.json"
  opts json
  run_tool "POST $1" "$CURL" -sS -X POST --data-binary "@$SCEN_TMP/body.json" "http://$ENDPOINT$1"
}
http POST /v3/lease/grant '{"TTL":60}'
L="$(jget "$(last_out)" ID)"
post_file /v3/lease/keepalive "{\"ID\":\"$L\"} {\"ID\":$L}"
post_file /v3/lease/keepalive "{\"ID\":\"$L\"}
{\"ID\":\"x\"}
{\"ID\":\"$L\"}"
post_file /v3/lease/keepalive "{\"ID\":\"$L\"} {\"ID\""
post_file /v3beta/lease/keepalive "{\"ID\":\"$L\"}"
http POST /v3/lease/keepalive ''
http_bg_start w POST /v3/watch "{\"create_request\":{\"key\":\"$(b64 a)\"}}
{\"create_request\":{\"key\":\"$(b64 b)\"}}
{\"create_request\":{\"key\":1}}
{\"create_request\":{\"key\":\"$(b64 c)\"}}" 8
bg_wait w '"watch_id":"1","created":true'
http POST /v3/kv/put "{\"key\":\"$(b64 c)\",\"value\":\"$(b64 1)\"}"
http POST /v3/kv/put "{\"key\":\"$(b64 b)\",\"value\":\"$(b64 2)\"}"
bg_wait w '"events"'
bg_stop w
http_bg_start v POST /v3beta/watch "{\"create_request\":{\"key\":\"$(b64 b)\",\"start_revision\":1}}" 8
bg_wait v '"events"'
bg_stop v
# Every kind of watch request in one body, answered in order.
http_bg_start all POST /v3/watch "{\"create_request\":{\"key\":\"$(b64 x)\"}}
{\"progress_request\":{}}
{\"cancel_request\":{\"watch_id\":\"0\"}}
{\"create_request\":{\"key\":\"$(b64 y)\",\"watch_id\":\"7\"}}" 8
bg_wait all '"watch_id":"7","created":true'
bg_stop all
http POST /v3beta/kv/range "{\"key\":\"$(b64 b)\"}"
http POST /v3beta/kv/nosuch '{}'
http POST /v3alpha/kv/range '{}'
http GET /v3beta/kv/range
http GET /v3/watch
http POST /v3 '{}'
http GET /v3
http POST /v3beta '{}'
