#!/usr/bin/env python3
"""Open N `GET /events` streams on a Unix socket, then print the VmRSS (KiB) of the given pids.

Usage: hold_streams.py SOCKET N PID [PID...]
Prints one line per pid: `<pid> <VmRSS KiB>`, plus `opened <n>` on stderr.
"""
import resource
import socket
import sys
import time


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def main():
    path, n, pids = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, n + 256)), hard))
    conns = []
    for _ in range(n):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        s.sendall(b"GET /v1.41/events HTTP/1.1\r\nHost: docker\r\n\r\n")
        conns.append(s)
    ok = 0
    for s in conns:
        s.settimeout(10)
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = s.recv(4096)
            if not chunk:
                break
            head += chunk
        ok += head.startswith(b"HTTP/1.1 200")
    time.sleep(1.0)
    print(f"opened {ok}", file=sys.stderr)
    for pid in pids:
        print(pid, rss_kib(pid))
    for s in conns:
        s.close()
    if ok != n:
        sys.exit(f"only {ok} of {n} streams opened")


if __name__ == "__main__":
    main()
