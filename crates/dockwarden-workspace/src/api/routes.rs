//! The routing table: every endpoint of the API is a variant of one closed enum.

use http::Method;

/// A file operation endpoint under `/v1/workspaces/{id}/files`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilesRoute {
    Read,
    Write,
    List,
    Exists,
    Info,
    Mkdir,
    Rename,
    Copy,
    Remove,
    /// `POST files/batch`: the SDK's `files.write([...])`.
    WriteBatch,
}

/// Every endpoint. `Unknown` answers 404; `WrongMethod` answers 400 `invalid`, naming the method.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Health,
    Create,
    List,
    DeleteMatching,
    Info(String),
    Delete(String),
    Exec(String),
    Snapshot(String),
    Snapshots(String),
    Kill(String),
    Connect(String),
    Suspend(String),
    Resume(String),
    Restart(String),
    Reprovision(String),
    Files(String, FilesRoute),
    /// Resource status (`resources`).
    Status(String),
    Resize(String),
    ResizeRequests(String),
    /// Approve (`true`) or reject a resize request by its id.
    DecideRequest(String, bool),
    WrongMethod,
    Unknown,
}

fn files(method: &Method, op: &str) -> Option<FilesRoute> {
    Some(match (method, op) {
        (&Method::GET, "content") => FilesRoute::Read,
        (&Method::PUT, "content") => FilesRoute::Write,
        (&Method::GET, "list") => FilesRoute::List,
        (&Method::GET, "exists") => FilesRoute::Exists,
        (&Method::GET, "info") => FilesRoute::Info,
        (&Method::POST, "mkdir") => FilesRoute::Mkdir,
        (&Method::POST, "rename") => FilesRoute::Rename,
        (&Method::POST, "copy") => FilesRoute::Copy,
        (&Method::DELETE, "") => FilesRoute::Remove,
        (&Method::POST, "batch") => FilesRoute::WriteBatch,
        _ => return None,
    })
}

/// Maps a method and path to its route.
pub fn route(method: &Method, path: &str) -> Route {
    let parts: Vec<&str> = path.trim_end_matches('/').split('/').collect();
    let m = method.clone();
    match parts.as_slice() {
        ["", "v1", "health"] => only(m == Method::GET, Route::Health),
        ["", "v1", "workspaces"] => match m {
            Method::POST => Route::Create,
            Method::GET => Route::List,
            Method::DELETE => Route::DeleteMatching,
            _ => Route::WrongMethod,
        },
        ["", "v1", "workspaces", id] => match m {
            Method::GET => Route::Info(id.to_string()),
            Method::DELETE => Route::Delete(id.to_string()),
            _ => Route::WrongMethod,
        },
        ["", "v1", "workspaces", id, verb] => {
            let id = id.to_string();
            match (*verb, m) {
                ("exec", Method::POST) => Route::Exec(id),
                ("snapshot", Method::POST) => Route::Snapshot(id),
                ("snapshots", Method::GET) => Route::Snapshots(id),
                ("kill", Method::POST) => Route::Kill(id),
                ("connect", Method::POST) => Route::Connect(id),
                ("suspend", Method::POST) => Route::Suspend(id),
                ("resume", Method::POST) => Route::Resume(id),
                ("restart", Method::POST) => Route::Restart(id),
                ("reprovision", Method::POST) => Route::Reprovision(id),
                ("status", Method::GET) => Route::Status(id),
                ("resize", Method::POST) => Route::Resize(id),
                ("resize-requests", Method::GET) => Route::ResizeRequests(id),
                ("files", m) => files(&m, "")
                    .map(|f| Route::Files(id, f))
                    .unwrap_or(Route::WrongMethod),
                (
                    "exec" | "snapshot" | "snapshots" | "kill" | "connect" | "suspend" | "resume"
                    | "restart" | "reprovision" | "status" | "resize" | "resize-requests",
                    _,
                ) => Route::WrongMethod,
                _ => Route::Unknown,
            }
        }
        [
            "",
            "v1",
            "resize-requests",
            rid,
            verb @ ("approve" | "reject"),
        ] => only(
            m == Method::POST,
            Route::DecideRequest(rid.to_string(), *verb == "approve"),
        ),
        ["", "v1", "workspaces", id, "files", op] => files(method, op)
            .map(|f| Route::Files(id.to_string(), f))
            .unwrap_or(Route::Unknown),
        _ => Route::Unknown,
    }
}

fn only(ok: bool, r: Route) -> Route {
    if ok { r } else { Route::WrongMethod }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_verbs_and_files() {
        assert_eq!(
            route(&Method::POST, "/v1/workspaces/a/exec"),
            Route::Exec("a".into())
        );
        assert_eq!(
            route(&Method::GET, "/v1/workspaces/a/files/content"),
            Route::Files("a".into(), FilesRoute::Read)
        );
        assert_eq!(
            route(&Method::DELETE, "/v1/workspaces/a/files"),
            Route::Files("a".into(), FilesRoute::Remove)
        );
        assert_eq!(
            route(&Method::GET, "/v1/workspaces/a/exec"),
            Route::WrongMethod
        );
        assert_eq!(route(&Method::GET, "/v2/anything"), Route::Unknown);
        assert_eq!(
            route(&Method::POST, "/v1/workspaces/a/restart"),
            Route::Restart("a".into())
        );
        assert_eq!(
            route(&Method::POST, "/v1/workspaces/a/reprovision"),
            Route::Reprovision("a".into())
        );
        assert_eq!(
            route(&Method::GET, "/v1/workspaces/a/reprovision"),
            Route::WrongMethod
        );
        assert_eq!(
            route(&Method::GET, "/v1/workspaces/a/status"),
            Route::Status("a".into())
        );
        assert_eq!(
            route(&Method::POST, "/v1/workspaces/a/status"),
            Route::WrongMethod
        );
        assert_eq!(
            route(&Method::POST, "/v1/workspaces/a/resize"),
            Route::Resize("a".into())
        );
        assert_eq!(
            route(&Method::POST, "/v1/resize-requests/rr-1/approve"),
            Route::DecideRequest("rr-1".into(), true)
        );
        assert_eq!(
            route(&Method::POST, "/v1/resize-requests/rr-1/reject"),
            Route::DecideRequest("rr-1".into(), false)
        );
        assert_eq!(
            route(&Method::GET, "/v1/resize-requests/rr-1/approve"),
            Route::WrongMethod
        );
        assert_eq!(
            route(&Method::POST, "/v1/resize-requests/rr-1/maybe"),
            Route::Unknown
        );
    }
}
