# user and role names (and passwords) that are not UTF-8: etcd takes any bytes (Go does not
# check a protobuf string), and the maintenance calls' refusal of a user without the root role
require_fresh
U=$'u\xff\xfe'
ROLE=$'r\xfe'
ctl user add root --new-user-password=rootpw --interactive=false
ctl user add "$U" --new-user-password=pw --interactive=false
ctl user add $'root\xff' --new-user-password=pw --interactive=false
ctl user add $'pw:p\xff\xfe' --interactive=false
ctl role add "$ROLE"
ctl user grant-role root root
ctl user grant-role "$U" "$ROLE"
ctl user grant-role pw "$ROLE"
ctl role grant-permission "$ROLE" readwrite a --prefix=true
ctl user list
ctl role list
ctl user get "$U"
ctl user get "$U" -w json
ctl role get "$ROLE"
ctl auth enable
A="--user=$U:pw"
ctl "$A" put a1 x
ctl "$A" get a1
ctl "$A" put b1 x
ctl "$A" user get "$U"
ctl "$A" role get "$ROLE"
ctl "$A" user list
ctl "--user=$U:bad" get a1
ctl $'--user=pw:p\xff\xfe' get a1
ctl $'--user=pw:p\xef\xbf\xbd\xef\xbf\xbd' get a1
ctl $'--user=u\xef\xbf\xbd\xef\xbf\xbd:pw' get a1
ctl $'--user=root\xff:pw' user list
ctl $'--user=root\xff:pw' put a2 x
ctl $'--user=root\xff:pw' defrag
ctl "$A" defrag
ctl "$A" endpoint hashkv
ctl "$A" alarm list
# Security rule (SECURITY.md): etcd 3.5.28+ keeps alarm disarm and compaction for root
# (GHSA-q8m4-xhhv-38mg); 3.5.1, the reference here, lets any user do both. actcd answers as
# the fixed release, so these two steps are an accepted difference, not compared here:
# tests/integration/security.rs asserts actcd's answer (`etcdserver: permission denied`).
note 'accepted difference (security rule): alarm disarm as a non-root user'
ctl "$A" member list -w json
note 'accepted difference (security rule): compaction as a non-root user'
ctl "$A" lease grant 100
ctl "$A" lease list
R=--user=root:rootpw
ctl $R user list -w json
ctl $R role list -w json
ctl $R user get $'nouser\xff'
ctl $R role get $'norole\xff'
ctl_in $'pw2\n' $R user passwd "$U" --interactive=false
ctl "$A" get a1
ctl "--user=$U:pw2" get a1
ctl $R user revoke-role "$U" "$ROLE"
ctl "--user=$U:pw2" get a1
ctl $R role revoke-permission "$ROLE" a --prefix=true
ctl $R role delete "$ROLE"
ctl $R user delete "$U"
ctl $R user list
