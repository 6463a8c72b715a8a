"""docker-py's own calls through dockwarden, for the transparency tests (tests/e2e_transparency.rs).

Usage: transparency.py <docker host> leave | network-create <name> | join <name> <image> |
       network-rm <name> | prune
Prints one JSON object; an APIError becomes {"status": <code>, "message": <explanation>}.
"""
import json
import sys

import docker

host, cmd, args = sys.argv[1], sys.argv[2], sys.argv[3:]
api = docker.APIClient(base_url=host, version="auto")


def call(f):
    try:
        return {"ok": f()}
    except docker.errors.APIError as e:
        return {"status": e.status_code, "message": str(e.explanation)}


if cmd == "leave":
    out = call(lambda: api.leave_swarm(force=True))
elif cmd == "network-create":
    out = call(lambda: api.create_network(args[0]))
    if "ok" in out:
        out["subnet"] = api.inspect_network(args[0])["IPAM"]["Config"][0]["Subnet"]
elif cmd == "join":
    def join():
        c = api.create_container(args[1], ["true"], host_config=api.create_host_config(network_mode=args[0]))
        api.start(c["Id"])
        code = api.wait(c["Id"])["StatusCode"]
        api.remove_container(c["Id"])
        return code
    out = call(join)
elif cmd == "network-rm":
    out = call(lambda: api.remove_network(args[0]))
elif cmd == "prune":
    out = {"containers": call(api.prune_containers), "images": call(api.prune_images)}
else:
    sys.exit(f"unknown command {cmd}")
print(json.dumps(out))
