# get: every sort target and order, revision filters, keys/count only, from-key, serializable
require_fresh
ctl put a 3
ctl put b 1
ctl put b1 2
ctl put b2 0
ctl put c 5
ctl put b1 22
for t in KEY VERSION CREATE MODIFY VALUE; do
  ctl get "" --from-key --sort-by=$t --order=ASCEND
  ctl get "" --from-key --sort-by=$t --order=DESCEND -w json
done
ctl get "" --from-key --sort-by=VALUE
ctl get "" --from-key --sort-by=MODIFY --limit=2 -w json
ctl get "" --from-key --min-mod-rev=6 -w json
ctl get "" --from-key --max-mod-rev=3
ctl get "" --from-key --min-create-rev=4 --max-create-rev=5
ctl get b --prefix --keys-only
ctl get b --prefix --count-only -w json
ctl get b --from-key --print-value-only
ctl get a c
ctl get a c --consistency=s -w fields
ctl get b1 --rev=4 -w json
ctl get b1 --rev=7 -w json
ctl get "" --prefix --rev=3
