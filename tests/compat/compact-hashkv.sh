# compaction with --physical, repeated and future compactions, and HashKV across history
require_fresh
volatile hash_revision
for i in 1 2 3 4 5; do ctl put k "v$i"; done
ctl put gone x
ctl del gone
ctl endpoint hashkv -w json
ctl endpoint hashkv --rev=4 -w json
ctl compact 5 --physical
ctl compact 5
ctl compact 3
ctl compact 99
ctl get k --rev=4
ctl get k --rev=5 -w json
ctl endpoint hashkv -w json
ctl compact 8
ctl get gone --rev=8
ctl get "" --from-key -w json
ctl endpoint hashkv -w json
