# etcdctl elect: a leader campaigns, an observer follows, a second candidate waits and takes
# over when the first stops
idpat LEASE 'E/([0-9a-f]+)'
bg_start e1 elect "${P}E" v1
bg_wait e1 "${P}E/"
bg_start obs elect -l "${P}E"
bg_wait obs v1
bg_start e2 elect "${P}E" v2
wait_keys "${P}E/" 2
ctl get --prefix "${P}E/" --sort-by=CREATE
bg_stop e1
bg_wait e2 "${P}E/"
bg_wait obs v2
ctl get --prefix "${P}E/"
bg_stop e2
# Stopping the observer with SIGTERM may cut a unary call short, and etcdctl then logs a
# "retrying of unary invoker failed … context canceled" warning or not, depending on timing
# (seen from etcd 3.5.1 itself): its stderr is not part of the comparison.
opts quiet-stderr
bg_stop obs
ctl get --prefix "${P}E/" --count-only -w fields
