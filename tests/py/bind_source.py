"""docker-py's own bind assertions, through the proxy: the Source a client reads back is the
path it asked for (issue 12 item 6). Prints one JSON line with what it saw.

usage: bind_source.py <image> <host dir> <name>   (DOCKER_HOST points at the proxy)
"""
import json
import sys

import docker

image, path, name = sys.argv[1:4]
client = docker.from_env(version="1.41")
api = client.api
ctr = api.create_container(
    image, ["sleep", "60"], name=name, volumes=["/data", "/m"],
    host_config=api.create_host_config(
        binds={path: {"bind": "/data", "mode": "ro"}},
        mounts=[docker.types.Mount("/m", path, type="bind")],
    ),
)
try:
    api.start(ctr)
    inspect = api.inspect_container(ctr)
    listed = api.containers(all=True, filters={"name": name})[0]
    mounts = sorted(inspect["Mounts"], key=lambda m: m["Destination"])
    print(json.dumps({
        "inspect_sources": [m["Source"] for m in mounts],
        "binds": inspect["HostConfig"]["Binds"],
        "hc_mounts": [m["Source"] for m in inspect["HostConfig"]["Mounts"]],
        "list_sources": sorted(m["Source"] for m in listed["Mounts"]),
        "high_level": client.containers.get(name).attrs["Mounts"][0]["Source"],
    }))
    # docker-py's test_create_with_binds_ro asserts exactly this.
    assert mounts[0]["Source"] == path, mounts
finally:
    api.remove_container(ctr, force=True)
