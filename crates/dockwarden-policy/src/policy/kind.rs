//! kind (Kubernetes in Docker) node containers need privileges the workspace never grants
//! (privileged, unconfined seccomp and AppArmor, the host's module tree). When a refused
//! container create looks like a kind node, the refusal says so, so users stop retrying.

use super::{Denial, Request};
use crate::api::json::Json;

/// The label kind puts on every node container, and its node image.
const KIND_LABEL: &str = "io.x-k8s.kind.cluster";
const KIND_IMAGE: &str = "kindest/node";

/// Adds "kind cannot run here" to a refusal of a kind node create; other refusals pass unchanged.
pub fn annotate(req: &Request, mut d: Denial) -> Denial {
    if is_kind_node(req) {
        d.message.push_str("; kind cannot run here: its node containers need privileges the workspace does not grant");
    }
    d
}

fn is_kind_node(req: &Request) -> bool {
    let Some(Json::Object(body)) = &req.body else {
        return false;
    };
    let image = body.str("Image").ok().flatten().unwrap_or("");
    let labelled = body
        .str_map("Labels")
        .ok()
        .flatten()
        .unwrap_or_default()
        .iter()
        .any(|(k, _)| k == KIND_LABEL);
    labelled || image.starts_with(KIND_IMAGE) || image.contains(&format!("/{KIND_IMAGE}"))
}
