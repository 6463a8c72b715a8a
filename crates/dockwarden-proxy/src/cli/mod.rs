//! The `dockwarden proxy` command: its typed arguments (`proxy::ProxyArgs`, also written as
//! JSON by the workspace service for its child proxies), the budget and logging set-up.

pub mod budget;
pub mod logging;
pub mod proxy;
