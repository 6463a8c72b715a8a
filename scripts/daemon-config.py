#!/usr/bin/env python3
"""The dockerd settings the proxy relies on (packaging/daemon.json), for scripts/setup.sh.

  daemon-config.py merge FILE [--systemd]   prints FILE (absent: {}) with the proxy's settings
                                            merged in (builder entitlements off, cgroup-parent);
                                            every other key is kept as it is
  daemon-config.py diff FILE [--systemd]    prints one line per setting that differs, nothing
                                            when FILE already has them all

With --systemd (a daemon on the systemd cgroup driver) the cgroup parent is the slice
`dockwarden.slice`, as `dockwarden proxy` names it there; otherwise `/dockwarden`.
Keys are matched the way dockerd reads daemon.json (Go: case-insensitively).
"""
import json
import os
import sys

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def wanted(systemd):
    with open(os.path.join(TOP, "packaging", "daemon.json")) as f:
        w = json.load(f)
    if systemd:
        w["cgroup-parent"] = "dockwarden.slice"
    return w


def key(obj, name):
    """The key of obj that Go would match to name, or name itself."""
    for k in obj:
        if k.lower() == name.lower():
            return k
    return name


def load(path):
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        return {}
    return json.loads(text) if text.strip() else {}


def walk(have, want, prefix, out):
    for name, v in want.items():
        k = key(have, name)
        if isinstance(v, dict):
            sub = have.get(k)
            if not isinstance(sub, dict):
                sub = {}
            walk(sub, v, prefix + name + ".", out)
            have[k] = sub
        elif have.get(k) != v:
            out.append((prefix + name, have.get(k), v))
            have[k] = v


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("merge", "diff"):
        sys.exit(__doc__)
    systemd = "--systemd" in sys.argv[3:]
    have = load(sys.argv[2])
    # The proxy's settings that matter; `icc` and `userland-proxy` are dockerd's defaults.
    want = {k: v for k, v in wanted(systemd).items() if k in ("builder", "cgroup-parent")}
    diffs = []
    walk(have, want, "", diffs)
    if sys.argv[1] == "merge":
        print(json.dumps(have, indent=2))
    else:
        for name, old, new in diffs:
            print(f"{name} is {json.dumps(old) if old is not None else 'unset'}, the proxy expects {json.dumps(new)}")


if __name__ == "__main__":
    main()
