# get --keys-only / --count-only at every revision of a history with leases: keys-only answers
# keep each key's lease (etcd 3.5's answer), also for keys rewritten since the revision read
require_fresh
ctl lease grant 600
L1="$(awk '{print $2}' "$(last_out)")"
ctl lease grant 600
L2="$(awk '{print $2}' "$(last_out)")"
ctl put --lease="$L1" ka 1
ctl put --lease="$L2" kb 1
ctl put kc 1
ctl put --lease="$L1" kb 2
ctl del ka
ctl put --lease="$L2" ka 2
ctl put kb 3
ctl_in $'\nput kd 1\ndel kc\n\n\n' txn --interactive=false -w json
for r in 1 2 3 4 5 6 7 8 9; do
  ctl get k --prefix --keys-only --rev="$r" -w json
  ctl get k --prefix --count-only --rev="$r" -w fields
done
ctl get k --prefix --keys-only --limit=2 -w json
ctl get ka kd --keys-only --rev=6 -w json
ctl get "" --from-key --count-only -w fields
ctl get kb --count-only --rev=4 -w fields
