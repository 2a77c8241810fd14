# interactive watch: a progress request, then live events on the same stream
require_fresh
ctl put a 1
bg_start_in w $'watch --prefix a\nprogress\n' watch -i -w json
bg_ready w
pause 1
ctl put a 2
ctl put b/x 3
ctl put a/b 4
bg_wait_count w '"Events"' 3
bg_stop w
