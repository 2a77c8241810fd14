import re, json, sys, os
HERE = os.path.dirname(os.path.abspath(__file__))
def rs(s):
    return '"' + s.replace('\\', '\\\\').replace('"', '\\"').replace('\n', '\\n') + '"' 
def parse(fn):
    txt = open(fn).read()
    blocks = txt.split('###END')
    steps = []
    for b in blocks:
        b = b.lstrip('\n')
        if not b.startswith('### '): continue
        head, _, rest = b.partition('\n')
        m = re.match(r'### (\S+) (\S+) (.*)$', head)
        meth, path, tail = m.group(1), m.group(2), m.group(3)
        user = None
        mu = re.search(r' u=(\S+)$', ' '+tail.rstrip())
        if mu:
            user = mu.group(1); tail = (' '+tail.rstrip())[:mu.start()].strip()
        tail = tail.strip()
        body = tail[5:] if tail.startswith('body=') else ''
        if not rest.startswith('HTTP/1.1'):
            continue  # HEAD hung; skipped
        hdrs, _, resp = rest.partition('\n\n')
        lines = hdrs.split('\n')
        status = int(lines[0].split()[1])
        headers = [tuple(l.split(': ',1)) for l in lines[1:]]
        assert resp.endswith('\n'), repr(resp)
        resp = resp[:-1]
        # `grep` in the capture pipeline ends every body with a newline; trust Content-Length.
        cl = [int(v) for k, v in headers if k == 'Content-Length']
        if cl and len(resp.encode()) == cl[0] + 1 and resp.endswith('\n'):
            resp = resp[:-1]
        assert not cl or len(resp.encode()) == cl[0], (head, resp, cl)
        steps.append((meth, path, body, user, status, headers, resp))
    return steps
def emit(name, steps, note):
    out = [f'/// {note}', f'pub const {name}: &[Step] = &[']
    keep = ('Content-Type','Allow','X-Content-Type-Options','X-Etcd-Index')
    for (meth, path, body, user, status, headers, resp) in steps:
        cmd = f"curl -i -X {meth} 'http://127.0.0.1:PORT{path}'" + (f" -d '{body}'" if body else '') + (f" -u '{user}'" if user else '')
        hk = [(k,v) for k,v in headers if k in keep and not (path.startswith('/v2/keys') and status != 401)]
        cid = any(k == 'X-Etcd-Cluster-Id' for k,v in headers)
        u = 'None' if user is None else 'Some(%s)' % rs(user)
        hs = ', '.join('(%s, %s)' % (rs(k), rs(v)) for k,v in hk)
        out.append(f'    // {cmd}')
        out.append(f'    Step {{ method: "{meth}", path: {rs(path)}, body: {rs(body)}, user: {u}, status: {status}, headers: &[{hs}], cluster_id: {"true" if cid else "false"}, resp: {rs(resp)} }},')
    out.append('];')
    return '\n'.join(out)
print('//! Transcripts recorded with curl against etcd 3.4.23 (`etcd --enable-v2`, fresh data')
print('//! dir), generated from the raw `curl -i` output; `Date`, `Content-Length`, CORS and')
print('//! `X-Raft-*` headers dropped. `cluster_id` records whether `X-Etcd-Cluster-Id` was sent.')
print('//! Bodies of `/v2/keys` successes are etcd store output and are not compared.')
print()
print('#[derive(Debug)]')
print('pub struct Step {')
for f in ['method: &\'static str','path: &\'static str','body: &\'static str','user: Option<&\'static str>','status: u16','headers: &\'static [(&\'static str, &\'static str)]','cluster_id: bool','resp: &\'static str']:
    print(f'    pub {f},')
print('}')
print()
print(emit('ADMIN', parse(os.path.join(HERE, 'cap1.txt')), 'Users, roles, enable/disable, errors, with auth off then on.'))
print()
print(emit('ACCESS', parse(os.path.join(HERE, 'cap2.txt')), 'Key access (guest, bad credentials, write-not-read, recursive), escapes, odd bodies.'))
