# a watch starting below the compact revision is cancelled; one starting at it replays
require_fresh
for i in 1 2 3 4 5; do ctl put c "v$i"; done
ctl compact 4
bg_start old watch c --rev=2
bg_wait_exit old
bg_stop old
bg_start at watch c --rev=4 -w json
bg_wait_count at '"Events"' 2
bg_stop at
bg_start hist watch --prefix "" --rev=5 --prev-kv
bg_wait hist v5
bg_stop hist
