//! Log output of the long-running commands (`proxy`, `serve`): one subscriber set-up for both,
//! and how a command's fatal error reaches stderr in the format chosen.

use std::io::IsTerminal;
use std::sync::OnceLock;

/// What a log line looks like on stderr.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human lines; colour only when stderr is a terminal.
    #[default]
    Text,
    /// One JSON object a line (`timestamp`, `level`, `fields.message`, `target`, spans).
    Json,
}

/// The `--log-format` flag, shared by the commands that log.
#[derive(Debug, Clone, Default, clap::Args, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogArgs {
    /// Log line format on stderr: `text` (colour only on a terminal) or `json` (one object a
    /// line, for log collectors). `RUST_LOG` picks what is logged (default `info`).
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// The format of the subscriber this process installed, if it installed one.
static ACTIVE: OnceLock<LogFormat> = OnceLock::new();

/// Installs the process's subscriber: stderr, `RUST_LOG` as the filter (`info` when unset or
/// invalid). A second call, or one after another subscriber was set, changes nothing.
pub fn init(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // Colour codes only for a terminal: they cost formatting time on every line and make log
    // files harder to grep. JSON never carries them.
    let installed = match format {
        LogFormat::Text => builder
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
        LogFormat::Json => builder.with_ansi(false).json().try_init(),
    };
    if installed.is_ok() {
        let _ = ACTIVE.set(format);
    }
}

/// Prints a command's fatal error on stderr. With JSON logs it is one more JSON line (level
/// `ERROR`, the whole cause chain in `fields.message`), so a collector never sees a stray text
/// line; otherwise it is the usual `Error: ...` with its `Caused by:` list.
pub fn report_fatal(err: &anyhow::Error) {
    if ACTIVE.get() == Some(&LogFormat::Json) {
        tracing::error!("{err:#}");
    } else {
        eprintln!("Error: {err:?}");
    }
}
