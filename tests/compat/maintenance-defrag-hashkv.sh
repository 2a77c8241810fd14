# defragmentation keeps the key space: HashKV (etcd's own value), history and reads are the
# same before and after, and writes go on
require_fresh
for i in 1 2 3 4 5 6; do ctl put "d/$i" "v$i"; done
ctl del d/2 d/5
ctl endpoint hashkv -w json
ctl compact 6
ctl endpoint hashkv -w json
ctl defrag
ctl endpoint hashkv -w json
ctl get d/ --prefix -w json
ctl get d/3 --rev=6
ctl get d/3 --rev=5
ctl put d/7 v7
ctl endpoint hashkv -w json
ctl defrag --cluster
ctl get d/7
ctl alarm list
