# --prev-kv on a live watch, JSON: a put over a value, a delete, a re-create (no previous)
require_fresh
ctl put pk a
bg_start w watch pk --prev-kv -w json
bg_ready w
ctl put pk b
ctl del pk
ctl put pk c
bg_wait_count w '"Events"' 3
bg_stop w
