# txn: compares on mod/create revision and version, all operators; read-only txns
# (no lease() compare: etcdctl 3.5.1 itself panics parsing one)
require_fresh
ctl put k1 v1
ctl put k2 v2
ctl put k1 v1b
ctl_in $'mod("k1") = "4"\n\nput r1 ok\n\nput r1 no\n' txn --interactive=false
ctl_in $'mod("k1") < "4"\n\nput r2 ok\n\nput r2 no\n' txn --interactive=false
ctl_in $'create("k2") = "3"\n\nput r3 ok\n\n' txn --interactive=false
ctl_in $'create("missing") = "0"\n\nput r4 ok\n\n' txn --interactive=false
ctl_in $'version("k1") > "1"\nversion("k2") = "1"\n\nput r5 ok\n\n' txn --interactive=false
ctl_in $'version("k1") != "2"\n\nput r6 ok\n\nput r6 no\n' txn --interactive=false
ctl_in $'value("k2") > "v1"\n\nget k2\nget k1\n\nget missing\n' txn --interactive=false -w json
ctl_in $'value("missing") = ""\n\nget k1\n\nget k2\n' txn --interactive=false
ctl get r --prefix -w json
ctl_in $'\nget k1 --rev=99\n\n' txn --interactive=false
