//! `dockwarden ws exec`: the command's output as it comes, then (on stderr, so stdout stays
//! the command's) whether the workspace had to be resumed and what a restore recovered.

use std::io::Write;

use serde_json::json;

use super::{map, render};
use crate::workspace::client::Client;

pub(super) async fn exec(
    c: &Client,
    id: &str,
    timeout: Option<f64>,
    env: &[(String, String)],
    cmd: &str,
    as_json: bool,
) -> anyhow::Result<()> {
    let timeout_ms = timeout.map(|t| (t * 1000.0) as u64);
    let body = json!({ "cmd": cmd, "timeout_ms": timeout_ms, "env": map(env) });
    if as_json {
        println!("{}", c.exec(id, body).await?);
        return Ok(());
    }
    let r = c
        .exec_streaming(id, body, |stream, data| {
            if stream == "stderr" {
                eprint!("{data}");
            } else {
                print!("{data}");
                let _ = std::io::stdout().flush();
            }
        })
        .await?;
    let _ = std::io::stdout().flush();
    eprint!("{}", render::exec_report(id, &r));
    std::process::exit(r["exit_code"].as_i64().unwrap_or(1) as i32);
}
