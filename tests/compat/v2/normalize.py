#!/usr/bin/env python3
"""Turns one side's raw v2 transcript into the canonical form that is diffed.

usage: normalize.py RAW CLIENT_PORT PEER_PORT CLUSTER_TOKEN PEER_URL

The raw transcript (written by steps.sh) is a sequence of steps, each opened by a line
starting with "$ ". A curl step is followed by "@@ headers", the raw response headers,
"@@ body", the body bytes, "@@ end" (with "no-eol" when the body had no final newline)
and "[curl exit N]". Everything else is copied and then run through the value rules.

Canonical curl step:
    $ curl -X PUT /v2/keys/foo?value=bar
    HTTP/1.1 201 Created
    Content-Type: application/json
    X-Etcd-Index: 4
    X-Etcd-Cluster-Id: CLUSTER_ID      (value replaced, presence kept)
    X-Raft-Index: RAFT_INDEX           (value replaced, presence kept)
    X-Raft-Term: RAFT_TERM             (value replaced, presence kept)
    Allow / Location / WWW-Authenticate: kept verbatim when present
    | <body line>                      (every body line, prefixed, after the value rules)
    | [no newline at end of body]      (when the body does not end in "\n")
    [curl exit N]
Header names are printed in Go's canonical case whatever case the server used; the
kept headers are printed in the order above; all other headers (Date, Content-Length,
Access-Control-*, X-Content-Type-Options, ...) are dropped.

Listings asked for without sorted=true (curl) or --sort (etcdctl ls) come in Go's map
order: their "nodes" arrays are sorted by key (the body re-encoded compactly and marked
"[nodes sorted]"), and the output lines of `etcdctl ls` are sorted.

Value rules (applied to the whole transcript):
  * the member id derived from PEER_URL + token, and the cluster id -> MEMBER_ID, CLUSTER_ID;
    any other hex id in "id"/"leader" JSON fields or in etcdctl member lines -> MEMBER_ID
  * 127.0.0.1:CLIENT_PORT / :PEER_PORT -> CLIENT_PORT / PEER_PORT tokens
  * RFC 3339 timestamps -> EXPIRATION ("startTime" values -> START_TIME)
  * "uptime" durations -> UPTIME
  * "ttl":N and etcdctl "TTL: N" with N within 5 s below one of the TTLs the scenarios set
    (TTLS below) -> TTL_OK; any other ttl stays exact
  * absolute /v2/stats/store counters -> N (field names and order kept)
  * counters in /v2/stats/self rates ("recvPkgRate", "sendPkgRate", "*BandwidthRate") -> RATE
"""
import hashlib
import json
import re
import sys

TTLS = (100, 200, 300, 1000)  # the TTLs the scenarios set; keep in sync with scenarios.sh

raw_path, client_port, peer_port, token, peer_url = sys.argv[1:6]
text = open(raw_path, encoding="utf-8", errors="replace").read()

KEEP = ["Content-Type", "X-Etcd-Index", "X-Etcd-Cluster-Id", "X-Raft-Index", "X-Raft-Term",
        "Allow", "Location", "Www-Authenticate"]
TOKEN_VALUES = {"X-Etcd-Cluster-Id": "CLUSTER_ID", "X-Raft-Index": "RAFT_INDEX",
                "X-Raft-Term": "RAFT_TERM"}


def canonical(name):
    return "-".join(p[:1].upper() + p[1:].lower() for p in name.split("-"))


def sort_nodes(node):
    if isinstance(node, dict):
        for v in node.values():
            sort_nodes(v)
        if isinstance(node.get("nodes"), list):
            node["nodes"].sort(key=lambda n: n.get("key", "") if isinstance(n, dict) else "")
    elif isinstance(node, list):
        for v in node:
            sort_nodes(v)


def unordered_listing(body):
    """A listing asked for without sorted=true comes in Go's map order: sort its nodes."""
    if len(body) != 1 or '"nodes":' not in body[0]:
        return body
    try:
        doc = json.loads(body[0])
    except ValueError:
        return body
    sort_nodes(doc)
    return [json.dumps(doc, separators=(",", ":"), ensure_ascii=False) + "  [nodes sorted]"]


def http_block(headers, body, no_eol, command):
    if "sorted=true" not in command:
        body = unordered_listing(body)
    out = []
    status = None
    found = {}
    for line in headers:
        line = line.rstrip("\r")
        if line.startswith("HTTP/"):
            # A later status line (after 100 Continue, say) replaces the earlier one.
            status, found = line.strip(), {}
            continue
        if ":" not in line:
            continue
        name, value = line.split(":", 1)
        name = canonical(name.strip())
        if name in KEEP:
            found[name] = TOKEN_VALUES.get(name, value.strip())
    out.append(status or "(no response)")
    for name in KEEP:
        if name in found:
            out.append(f"{name}: {found[name]}")
    for line in body:
        out.append("| " + line)
    if no_eol:
        out.append("| [no newline at end of body]")
    return out


lines = text.split("\n")
out = []
i = 0
command = ""
ls_rows = None  # output lines of an unsorted `etcdctl ls`, sorted when the step ends
while i < len(lines):
    line = lines[i]
    if ls_rows is not None and (line.startswith("$ ") or line.startswith("[exit ")):
        out.extend(sorted(ls_rows))
        ls_rows = None
    if line.startswith("$ "):
        command = line
        if line.startswith("$ etcdctl ") and " ls" in line and "--sort" not in line:
            ls_rows = []
    if line != "@@ headers":
        if ls_rows is not None and not line.startswith("$ "):
            ls_rows.append(line)
        else:
            out.append(line)
        i += 1
        continue
    i += 1
    headers = []
    while i < len(lines) and lines[i] != "@@ body":
        headers.append(lines[i])
        i += 1
    i += 1
    body = []
    while i < len(lines) and not lines[i].startswith("@@ end"):
        body.append(lines[i])
        i += 1
    no_eol = i < len(lines) and lines[i] == "@@ end no-eol"
    if not no_eol and body and body[-1] == "":
        body.pop()  # the newline that ended the body
    i += 1
    out.extend(http_block(headers, body, no_eol, command))
text = "\n".join(out)

# Ids: the member's id is derived from its peer URL and the cluster token (etcd's rule).
d = hashlib.sha1((peer_url + token).encode()).digest()
mid = int.from_bytes(d[:8], "big")
cid = int.from_bytes(hashlib.sha1(mid.to_bytes(8, "big")).digest()[:8], "big")
for value, name in ((mid, "MEMBER_ID"), (cid, "CLUSTER_ID")):
    text = re.sub(r"\b(%s|%d)\b" % (format(value, "x"), value), name, text)
text = re.sub(r'"(id|leader)":"[0-9a-f]{1,16}"', r'"\1":"MEMBER_ID"', text)
text = re.sub(r"^[0-9a-f]{1,16}(\[unstarted\])?: name=", r"MEMBER_ID\1: name=", text, flags=re.M)
text = re.sub(r"\bmember [0-9a-f]{1,16} is\b", "member MEMBER_ID is", text)
text = re.sub(r'"followers":\{"[0-9a-f]{1,16}"', '"followers":{"MEMBER_ID"', text)

text = text.replace("127.0.0.1:%s" % client_port, "127.0.0.1:CLIENT_PORT")
text = text.replace("127.0.0.1:%s" % peer_port, "127.0.0.1:PEER_PORT")
text = text.replace("localhost:%s" % client_port, "localhost:CLIENT_PORT")

ts = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)"
text = re.sub(r'"startTime":"%s"' % ts, '"startTime":"START_TIME"', text)
text = re.sub(ts, "EXPIRATION", text)
text = re.sub(r'"uptime":"[^"]*"', '"uptime":"UPTIME"', text)
text = re.sub(r'"(recvPkgRate|sendPkgRate|recvBandwidthRate|sendBandwidthRate)":[0-9.e+-]+',
              r'"\1":RATE', text)

# Absolute /v2/stats/store counters include the server's own reads and writes (membership,
# cluster version, auth checks): keep the fields and their order, not the numbers (the misc
# scenario compares the change across known writes instead).
text = re.sub(r'^\| \{"getsSuccess":.*$', lambda m: re.sub(r'":\d+', '":N', m.group(0)), text,
              flags=re.M)


# actcd reports the etcd 3.5 API level it implements as its own patch release; etcd 3.5.1 says
# 3.5.1. Both are 3.5 (the major.minor clients gate features on).
text = re.sub(r'"etcdserver":"3\.5\.\d+"', '"etcdserver":"3.5.PATCH"', text)
# actcd reports the etcd release it follows (3.7.1, README "The version actcd reports") and
# 3.6's `storage` field: an accepted difference, compared as etcd 3.5.1's answer.
text = re.sub(r'\{"etcdserver":"3\.7\.\d+","etcdcluster":"3\.7\.0","storage":"3\.7\.0"\}',
              '{"etcdserver":"3.5.PATCH","etcdcluster":"3.5.0"}', text)


def ttl_ok(n):
    return any(t - 5 <= n <= t for t in TTLS)


text = re.sub(r'"ttl":(\d+)', lambda m: '"ttl":TTL_OK' if ttl_ok(int(m.group(1))) else m.group(0), text)
text = re.sub(r"^TTL: (\d+)$", lambda m: "TTL: TTL_OK" if ttl_ok(int(m.group(1))) else m.group(0),
              text, flags=re.M)
sys.stdout.write(text if text.endswith("\n") else text + "\n")
