# grpc-gateway lock and election services: lock with a fresh or named lease, contention seen
# through the owner keys, unlock; campaign, leader, proclaim, observe, resign and their errors
require_fresh
idpat LEASE '/([0-9a-f]{12,16})'
# Bodies holding server-made keys go through a file, so the recorded arguments don't carry them.
post_file() { # PATH BODY
  printf '%s' "$2" >"$SCEN_TMP/body.json"
  opts json
  run_tool "POST $1" "$CURL" -sS -X POST --data-binary "@$SCEN_TMP/body.json" "http://$ENDPOINT$1"
}
http POST /v3/lock/lock "{\"name\":\"$(b64 L)\"}"
LOCKKEY="$(jget "$(last_out)" key)"
http POST /v3/kv/range "{\"key\":\"$(b64 L/)\",\"range_end\":\"$(b64 L0)\",\"keys_only\":true}"
post_file /v3/lock/unlock "{\"key\":\"$LOCKKEY\"}"
http POST /v3/kv/range "{\"key\":\"$(b64 L/)\",\"range_end\":\"$(b64 L0)\",\"count_only\":true}"
http POST /v3/lease/grant '{"TTL":30}'
LEASE="$(jget "$(last_out)" ID)"
http POST /v3/lock/lock "{\"name\":\"$(b64 M)\",\"lease\":\"$LEASE\"}"
http POST /v3/lock/lock "{\"name\":\"$(b64 M)\",\"lease\":\"$LEASE\"}"
http POST /v3/lock/lock "{\"name\":\"$(b64 N)\",\"lease\":\"12345\"}"
http POST /v3/election/leader "{\"name\":\"$(b64 E)\"}"
http POST /v3/election/campaign "{\"name\":\"$(b64 E)\",\"lease\":\"$LEASE\",\"value\":\"$(b64 v1)\"}"
LEADER="$("${COMPAT_PY:-python3}" -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["leader"]))' "$(last_out)")"
http POST /v3/election/leader "{\"name\":\"$(b64 E)\"}"
http POST /v3/election/campaign "{\"name\":\"$(b64 E)\",\"lease\":\"$LEASE\",\"value\":\"$(b64 v2)\"}"
post_file /v3/election/proclaim "{\"leader\":$LEADER,\"value\":\"$(b64 v3)\"}"
http POST /v3/election/leader "{\"name\":\"$(b64 E)\"}"
http POST /v3/election/proclaim "{\"value\":\"$(b64 v3)\"}"
post_file /v3/election/resign "{\"leader\":$LEADER}"
http POST /v3/election/leader "{\"name\":\"$(b64 E)\"}"
post_file /v3/election/proclaim "{\"leader\":$LEADER,\"value\":\"$(b64 v4)\"}"
post_file /v3/election/resign "{\"leader\":$LEADER}"
http POST /v3/election/resign '{}'
