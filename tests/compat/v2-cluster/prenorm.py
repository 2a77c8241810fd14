#!/usr/bin/env python3
"""Cluster-specific normalization of one side's raw v2 cluster transcript, run before the
single-member tests/compat/v2/normalize.py (which then formats the curl blocks, replaces
timestamps and uptimes, and sorts unsorted listings).

usage: prenorm.py RAW TOKEN TLS_TOKEN "NAMES" "CLIENT_PORTS" "PEER_PORTS"
  NAMES         "m1 m2 m3 m4 t1" (t1, the TLS member, has the cluster token TLS_TOKEN)
  CLIENT_PORTS  their client ports (0: none), PEER_PORTS their peer ports, same order

Rules:
  * etcd #21669's fixed answers to the membership scenario's duplicate adds (see
    fixed_release): an accepted, documented difference from 3.5.1
  * 127.0.0.1:<client port of mN> -> 127.0.0.1:CN (C1, C2, ...), peer ports -> PN; t1's
    ports -> C_t1, P_t1
  * member ids derived from the peer URLs and tokens (hex or decimal) -> <m1>, <m2>, ...;
    the cluster ids -> <cluster> (m1..m3) and <tls-cluster> (t1); ids made at run time
    (marker "@@ id NAME HEX", m4's) -> <NAME>
  * leadership, which differs by run ("@@ leader HEX" marker: found independently, with the
    v3 etcdctl; the markers are removed):
      - etcdctl member list lines: isLeader=true on the leader's line and false on the others
        -> isLeader=AS_EXPECTED; a wrong value stays (and differs)
      - /v2/members/leader bodies: the leader's id, name and ports -> <LEADER>, LEADER,
        C_LEADER, P_LEADER (any other member stays, and differs)
      - /v2/stats/self: "state" StateLeader on the leader, StateFollower elsewhere ->
        "state":"AS_EXPECTED"; "leaderInfo":{"leader": the leader} -> "<LEADER>";
        the append counters -> N; the rates are removed (present only when there were
        appends in the last second)
      - /v2/stats/leader: "leader" -> <LEADER>, the followers' ids -> <FOLLOWER>, latencies
        and counts -> N
  * m4's position among the members (its id is random, members are listed by id) is made
    last: in runs of member lines, in /v2/members bodies, in ETCD_INITIAL_CLUSTER
"""
import hashlib
import re
import sys

raw_path, token, tls_token, names, cports, pports = sys.argv[1:7]
names = names.split()
cports = cports.split()
pports = pports.split()
text = open(raw_path, encoding="utf-8", errors="replace").read()

# Ports first (ids never contain "127.0.0.1:").
for name, c, p in zip(names, cports, pports):
    n = name[1:] if name.startswith("m") else "_" + name
    if c != "0":
        text = re.sub(r"127\.0\.0\.1:%s\b" % c, "127.0.0.1:C" + n, text)
    if p != "0":
        text = re.sub(r"127\.0\.0\.1:%s\b" % p, "127.0.0.1:P" + n, text)

ids = {}
for name, p in zip(names, pports):
    if name == "m4":
        continue
    tok = tls_token if name == "t1" else token
    d = hashlib.sha1(("http://127.0.0.1:%s" % p + tok).encode()).digest()
    ids[name] = int.from_bytes(d[:8], "big")
for m in re.finditer(r"^@@ id (\S+) ([0-9a-f]+)$", text, flags=re.M):
    ids[m.group(1)] = int(m.group(2), 16)
text = re.sub(r"^@@ id .*\n", "", text, flags=re.M)


def cluster_id(members):
    h = hashlib.sha1(b"".join(i.to_bytes(8, "big") for i in sorted(members))).digest()
    return int.from_bytes(h[:8], "big")


clusters = {"<cluster>": cluster_id([ids[n] for n in ("m1", "m2", "m3")]),
            "<tls-cluster>": cluster_id([ids["t1"]])}
for name, value in list(ids.items()) + list(clusters.items()):
    label = name if name.startswith("<") else "<%s>" % name
    text = re.sub(r"\b(%s|%d)\b" % (format(value, "x"), value), label, text)

# Steps: a "$ " line opens one; markers update the leader.
out = []
leader = None
command = ""
step = []


def member_of_line(line):
    m = re.match(r"^<(m\d)>", line)
    return m.group(1) if m else None


MEMBER_LINE = re.compile(r"^(<m\d>|member <m\d>|failed to check the health of member <m\d>)")


def m4_last(lines):
    """In each run of member lines, m4's lines go last (their position follows a random id)."""
    res, run = [], []
    for line in lines + [None]:
        if line is not None and MEMBER_LINE.match(line):
            run.append(line)
            continue
        res.extend(sorted(run, key=lambda l: "<m4>" in l))
        run = []
        if line is not None:
            res.append(line)
    return res


def members_body_m4_last(line):
    m = re.match(r'^(\{"members":\[)(.*)(\]\}.*)$', line)
    if not m or "<m4>" not in line:
        return line
    objs = re.findall(r"\{[^{}]*\}", m.group(2))
    if ",".join(objs) != m.group(2):
        return line
    objs.sort(key=lambda o: '"<m4>"' in o)
    return m.group(1) + ",".join(objs) + m.group(3)


def leadership(cmd, lines):
    if leader is None:
        return lines
    res = []
    for line in lines:
        if cmd.startswith("$ etcdctl ") and " member list" in cmd:
            m = re.match(r"^<(m\d)>: name=.* isLeader=(true|false)$", line)
            if m and (m.group(1) == leader) == (m.group(2) == "true"):
                line = line[: line.rindex("isLeader=")] + "isLeader=AS_EXPECTED"
        if cmd.startswith("$ curl ") and "/v2/members/leader" in cmd:
            n = leader[1:]
            line = line.replace("<%s>" % leader, "<LEADER>").replace('"%s"' % leader, '"LEADER"')
            line = line.replace("127.0.0.1:C%s" % n, "127.0.0.1:C_LEADER")
            line = line.replace("127.0.0.1:P%s" % n, "127.0.0.1:P_LEADER")
        if cmd.startswith("$ curl ") and "/v2/stats/self" in cmd and '"state":' in line:
            m = re.search(r'"id":"<(m\d)>"', line)
            s = re.search(r'"state":"(\w+)"', line)
            if m and s and s.group(1) == ("StateLeader" if m.group(1) == leader else "StateFollower"):
                line = line.replace(s.group(0), '"state":"AS_EXPECTED"')
            line = line.replace('"leaderInfo":{"leader":"<%s>"' % leader, '"leaderInfo":{"leader":"<LEADER>"')
            line = re.sub(r'"(recv|send)AppendRequestCnt":\d+', r'"\1AppendRequestCnt":N', line)
            line = re.sub(r',"(recv|send)(PkgRate|BandwidthRate)":[0-9.e+-]+', "", line)
        if cmd.startswith("$ curl ") and "/v2/stats/leader" in cmd and line.startswith("{"):
            line = line.replace('"leader":"<%s>"' % leader, '"leader":"<LEADER>"')
            line = re.sub(r'"<m\d>":\{', '"<FOLLOWER>":{', line)
            line = re.sub(r'"(current|average|standardDeviation|minimum|maximum|fail|success)":[0-9.e+-]+',
                          r'"\1":N', line)
        res.append(line)
    return res


def flush():
    global step
    if not step:
        return
    cmd = step[0] if step[0].startswith("$ ") else ""
    lines = leadership(cmd, step)
    lines = m4_last(lines)
    lines = [members_body_m4_last(l) for l in lines]
    lines = [l if not l.startswith('ETCD_INITIAL_CLUSTER="') else
             'ETCD_INITIAL_CLUSTER="%s"' % ",".join(
                 sorted(l[len('ETCD_INITIAL_CLUSTER="'):-1].split(","), key=lambda p: p.startswith("m4=")))
             for l in lines]
    out.extend(lines)
    step = []


for line in text.split("\n"):
    m = re.match(r"^@@ leader (\S+)$", line)
    if m:
        v = m.group(1)
        mm = re.match(r"^<(\w+)>$", v)
        leader = mm.group(1) if mm else None
        if v == "none":
            flush()
            out.append("# (the members did not agree on a leader: leadership not normalized)")
        continue
    if line.startswith("$ "):
        flush()
    step.append(line)
flush()
result = "\n".join(out)


def fixed_release(text):
    """etcd #21669 (3.5.29, 3.6.9; adopted, docs/etcd-changes/3.5.md): with one member of four
    never started, --strict-reconfig-check no longer refuses MemberAdd (the connected voters
    make a quorum with the new member counted as down), so the duplicate adds of the membership
    scenario reach etcd's own checks and answer as the fixed release does: 'ID exists',
    'peerURL exists', 409. etcd 3.5.1 refuses them as unhealthy (a 500, which etcdctl 2 reports
    as 'has no leader'); its answers there are rewritten to the fixed release's, an accepted,
    documented difference."""
    start = text.find("# refused while m4 has never connected")
    end = text.find("member remove", start)
    if start < 0 or end < 0:
        return text
    block = text[start:end]
    no_leader = re.compile(
        r"client: etcd cluster is unavailable or misconfigured; error #0: client: etcd member "
        r"http://127\.0\.0\.1:\S+ has no leader\n(\n)?")
    for answer in ("membership: ID exists\n", "membership: peerURL exists\n"):
        block = no_leader.sub(answer, block, count=1)
    block = block.replace("HTTP/1.1 500 Internal Server Error", "HTTP/1.1 409 Conflict")
    block = block.replace('{"message":"Internal Server Error"}', '{"message":"membership: ID exists"}')
    # A new member's id hashes its peer URLs with the time in whole seconds (etcd's NewMember),
    # so an add with m4's peer URL within m4's second is 'ID exists', later 'peerURL exists':
    # both are the refusal, by the clock.
    for refusal in ("membership: ID exists", "membership: peerURL exists"):
        block = block.replace(refusal, "membership: ID or peerURL exists")
    return text[:start] + block + text[end:]


sys.stdout.write(fixed_release(result))
