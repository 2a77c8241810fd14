# the gateway writes user and role names that are not UTF-8 as etcd's gateway does (each bad
# byte one U+FFFD), and a JSON body cannot name them (Go's decoder replaces the bytes too)
require_fresh
ctl user add $'u\xff\xfe' --new-user-password=pw --interactive=false
ctl role add $'r\xfe'
ctl user grant-role $'u\xff\xfe' $'r\xfe'
http POST /v3/auth/user/list '{}'
http POST /v3/auth/role/list '{}'
http POST /v3/auth/user/get $'{"name":"u\xff\xfe"}'
http POST /v3/auth/role/get $'{"role":"r\xfe"}'
