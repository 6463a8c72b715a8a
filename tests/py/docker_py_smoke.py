"""docker-py through dockwarden: run a container, stream its logs, remove it."""
import sys

import docker

host, image = sys.argv[1], sys.argv[2]
client = docker.DockerClient(base_url=host, version="auto")
container = client.containers.run(image, ["sh", "-c", "echo one; sleep 0.3; echo two"], detach=True)
lines = [chunk.decode().strip() for chunk in container.logs(stream=True, follow=True)]
container.wait()
container.remove()
print("|".join(line for line in lines if line))
