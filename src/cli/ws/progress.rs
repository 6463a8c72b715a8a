//! The `ws` CLI's progress bar for restores, forks and snapshots (indicatif), fed by the
//! service's progress events: files, bytes and rate, against the totals when the service
//! knows them (a restore), else a spinner with the counts so far (a capture).

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;

use serde_json::Value;

/// One bar for one long call; draws on stderr, and nothing when stderr is not a terminal.
pub struct Bar {
    verb: String,
    bar: Option<ProgressBar>,
    /// Without a terminal: the last counts, printed as one line at the end.
    last: Option<(u64, u64)>,
    started: std::time::Instant,
}

impl Bar {
    pub fn new(verb: &str) -> Bar {
        Bar {
            verb: verb.to_string(),
            bar: None,
            last: None,
            started: std::time::Instant::now(),
        }
    }

    /// Takes one event (`{"progress": {"files", "bytes", "total_files"?, "total_bytes"?}}`).
    pub fn update(&mut self, ev: &Value) {
        let p = &ev["progress"];
        let n = |k: &str| p[k].as_u64().unwrap_or(0);
        let (files, bytes, total_files, total_bytes) =
            (n("files"), n("bytes"), n("total_files"), n("total_bytes"));
        if !std::io::stderr().is_terminal() {
            self.last = Some((files, bytes));
            return;
        }
        let bar = self.bar.get_or_insert_with(|| {
            let (bar, template) = if total_bytes > 0 {
                (
                    ProgressBar::new(total_bytes),
                    "{prefix}: [{bar:30}] {msg}, {binary_bytes}/{binary_total_bytes} \
                     ({binary_bytes_per_sec}, {eta} left)",
                )
            } else {
                (
                    ProgressBar::new_spinner(),
                    "{prefix}: {spinner} {msg}, {binary_bytes} ({binary_bytes_per_sec})",
                )
            };
            bar.set_draw_target(ProgressDrawTarget::stderr());
            if let Ok(style) = ProgressStyle::with_template(template) {
                bar.set_style(style.progress_chars("=> "));
            }
            bar.set_prefix(self.verb.clone());
            bar
        });
        bar.set_position(bytes);
        bar.set_message(if total_files > 0 {
            format!("{files}/{total_files} files")
        } else {
            format!("{files} files")
        });
    }

    /// Leaves the last state on screen.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish();
        }
        if let Some((files, bytes)) = self.last {
            let secs = self.started.elapsed().as_secs_f64();
            eprintln!(
                "{}: {files} files, {bytes} bytes in {secs:.1} s ({:.1} MiB/s)",
                self.verb,
                bytes as f64 / secs.max(0.001) / 1_048_576.0
            );
        }
    }
}
