//! Notes that tell a user what to do next, from what a command printed. Pure.
//!
//! A standard workspace has no Docker daemon: a setup script or a command that reaches for one
//! fails on the socket, and the failure should name the fix, the `docker-compose` runtime,
//! behind the same workspace id (seed 003: the runtime can be replaced behind the same thread).

use crate::model_runtime::RuntimeKind;

/// What Docker clients print when no daemon answers on the socket they were given.
const NO_DAEMON: &[&str] = &[
    // docker CLI, Compose v2, buildx
    "Cannot connect to the Docker daemon",
    "permission denied while trying to connect to the Docker daemon socket",
    // Compose v1 (docker-py)
    "Couldn't connect to Docker daemon",
    "Error while fetching server API version",
    // anything that dials the default socket itself
    "docker.sock: connect: no such file or directory",
    "docker.sock: connect: permission denied",
];

/// The note for a failed command of workspace `id` on `runtime` whose stderr shows that no
/// Docker daemon answered; `None` when it does not, or when the workspace has one.
pub fn docker_socket(id: &str, runtime: RuntimeKind, stderr: &str) -> Option<String> {
    if runtime != RuntimeKind::Standard || !NO_DAEMON.iter().any(|m| stderr.contains(m)) {
        return None;
    }
    Some(format!(
        "the command needed a Docker daemon, and this workspace runs the `standard` runtime, which has none; give it one, keeping its files, with `dockwarden ws reprovision {id} --runtime docker-compose`"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_client_s_no_daemon_message_gets_the_reprovision_note() {
        for stderr in [
            "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?",
            "permission denied while trying to connect to the Docker daemon socket at unix:///var/run/docker.sock: Get \"http://%2Fvar%2Frun%2Fdocker.sock/v1.24/containers/json\": dial unix /var/run/docker.sock: connect: permission denied",
            "Couldn't connect to Docker daemon at http+docker://localhost - is it running?",
        ] {
            let n = docker_socket("app", RuntimeKind::Standard, stderr).expect(stderr);
            assert!(
                n.contains("dockwarden ws reprovision app --runtime docker-compose"),
                "{n}"
            );
        }
    }

    #[test]
    fn other_failures_and_docker_workspaces_get_none() {
        assert_eq!(
            docker_socket("app", RuntimeKind::Standard, "make: *** [all] Error 1"),
            None
        );
        assert_eq!(
            docker_socket(
                "app",
                RuntimeKind::DockerCompose,
                "Cannot connect to the Docker daemon at unix:///x"
            ),
            None
        );
    }
}
