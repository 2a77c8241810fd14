# del: single key, ranges, prefix, from-key, prev-kv, deleting nothing
require_fresh
for k in a b c d e f; do ctl put "$k" "v$k"; done
ctl del a
ctl del a
ctl del b d --prev-kv -w json
ctl get "" --from-key --keys-only
ctl del e --from-key --prev-kv
ctl get "" --from-key -w json
ctl put x 1
ctl put x/1 2
ctl put x/2 3
ctl del x/ --prefix -w json
ctl get x --prefix
ctl del nothing --prefix -w json
