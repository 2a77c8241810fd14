#!/usr/bin/env python3
"""Prints N free TCP ports on 127.0.0.1, space-separated: free-ports.py N

Taken from below the kernel's ephemeral range: a port bind(0) hands out can become the source
port of some outgoing connection before a member listens on it. Shared by the compat scripts.
"""
import random
import socket
import sys

want = int(sys.argv[1])
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
found = []
for port in random.sample(range(max(1024, low - 12000), low), max(200, want * 30)):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        found.append(port)
    except OSError:
        pass
    finally:
        s.close()
    if len(found) == want:
        break
print(*found)
