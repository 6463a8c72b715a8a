//! The run script is a runtime part too: one that ends with a non-zero status or a signal
//! while its workspace is live, and that nobody stopped (`stop_all` starts a new generation),
//! is started again by upkeep and recorded as the workspace's `last_recovery`. One that keeps
//! dying backs off (1 s doubling to 60 s, as `heal` does); one that exits 0 has finished.

use std::time::Instant;

use tracing::{info, warn};

use crate::heal::{FLAPPING, backoff};
use crate::model::{RecoveryReport, Workspace};
use crate::service::{Service, WsLive};
use crate::store;

/// How a run-script restart's recovery report begins.
pub const RUN_SCRIPT_RESTARTED: &str = "run script restarted after it died";

/// The run script of one workspace, as upkeep sees it (in memory, per service run).
#[derive(Debug, Default)]
pub struct RunScriptState {
    /// Bumped by every deliberate stop of the workspace's processes: a script of an older
    /// generation that ends was stopped, it did not die.
    pub generation: u64,
    /// Started (at, generation), when a run script runs.
    pub started: Option<(Instant, u64)>,
    /// How the script of `generation` ended, when it did.
    pub ended: Option<(u64, i32)>,
    pub failures: u32,
    pub next_try: Option<Instant>,
}

impl RunScriptState {
    /// Pure: whether the script of the current generation ended with a failure (without
    /// taking it, and whether or not its back-off is over).
    pub fn failed(&self) -> bool {
        self.ended
            .is_some_and(|(generation, code)| generation == self.generation && code != 0)
    }

    /// Pure: whether a script that ended should be started again now; takes the ending.
    pub fn due(&mut self, now: Instant) -> Option<i32> {
        let (generation, code) = self.ended?;
        if generation != self.generation || code == 0 {
            return None;
        }
        if self.next_try.is_some_and(|t| t > now) {
            return None;
        }
        self.ended = None;
        let ran = self
            .started
            .map(|(at, _)| now.saturating_duration_since(at));
        // It ran a while before it died: not a crash loop.
        if ran.is_some_and(|r| r >= FLAPPING) {
            self.failures = 0;
        }
        self.failures += 1;
        self.next_try = Some(now + backoff(self.failures));
        Some(code)
    }
}

/// Called from the run script's task: `generation`'s script ended with `code`.
pub fn ended(live: &WsLive, generation: u64, code: i32) {
    if let Ok(mut st) = live.run_script.lock()
        && st.generation == generation
    {
        st.ended = Some((generation, code));
    }
}

/// Called by `stop_all`: the scripts running now are being stopped, not dying.
pub fn new_generation(live: &WsLive) {
    if let Ok(mut st) = live.run_script.lock() {
        st.generation += 1;
        st.ended = None;
        st.started = None;
    }
}

impl Service {
    /// Upkeep: starts the run script of a live workspace again if it died.
    pub(crate) async fn heal_run_script(&self, ws: &Workspace) {
        let live = self.live(&ws.id);
        // The common case, every tick: nothing ended; no lock taken, nothing read.
        if !live.run_script.lock().is_ok_and(|st| st.failed()) {
            return;
        }
        // Not while a kill, restart or restore holds the workspace: they decide its processes.
        let Ok(_op) = live.op.clone().try_lock_owned() else {
            return;
        };
        let Ok(ws) = self.store.require(&ws.id) else {
            return;
        };
        if !ws.status.is_live() {
            return;
        }
        let due = live
            .run_script
            .lock()
            .ok()
            .and_then(|mut st| st.due(Instant::now()));
        let Some(code) = due else { return };
        let how = match code {
            c if c > 128 => format!("killed by signal {}", c - 128),
            c => format!("exit status {c}"),
        };
        info!(workspace.id = %ws.id, run.ended = %how, "the run script died; starting it again");
        self.start_run_script(&ws);
        let report = RecoveryReport::restarted(
            format!("{RUN_SCRIPT_RESTARTED}: {how}"),
            "the settings' run script was started again; its output goes on in $HOME/run.log"
                .into(),
        );
        // Read again: an exec (which takes no op lock) may have moved it to `running`.
        let recorded = self.store.require(&ws.id).and_then(|mut w| {
            w.last_recovery = Some(report);
            self.store.tx(|tx| store::put_ws(tx, &w))
        });
        if let Err(e) = recorded {
            warn!(workspace.id = %ws.id, error = %e, "recording the run script's restart failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn only_a_failure_of_the_current_generation_is_restarted_and_loops_back_off() {
        let t0 = Instant::now();
        let mut st = RunScriptState {
            started: Some((t0, 0)),
            ended: Some((0, 0)),
            ..Default::default()
        };
        assert!(!st.failed());
        assert_eq!(st.due(t0), None, "exit 0: finished");
        st.ended = Some((0, 137));
        st.generation = 1;
        assert!(!st.failed(), "an older generation's ending");
        assert_eq!(
            st.due(t0),
            None,
            "stopped by the service (older generation)"
        );
        st.generation = 0;
        assert!(st.failed());
        assert_eq!(st.due(t0), Some(137));
        assert!(!st.failed(), "taken");
        assert_eq!(st.ended, None, "taken");
        // Died again at once: backs off 2 s before the next restart.
        st.started = Some((t0, 0));
        st.ended = Some((0, 1));
        let soon = t0 + Duration::from_millis(500);
        assert_eq!(st.due(soon), None, "backing off");
        assert_eq!(st.due(t0 + Duration::from_millis(1100)), Some(1));
        assert_eq!(st.failures, 2);
        // Ran longer than FLAPPING before dying: the count starts over.
        st.started = Some((t0, 0));
        st.ended = Some((0, 1));
        st.next_try = None;
        st.due(t0 + FLAPPING + Duration::from_secs(1));
        assert_eq!(st.failures, 1);
    }
}
