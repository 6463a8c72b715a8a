//! Reading shell text for Docker use: which commands a script runs, and whether they reach a
//! local daemon. Nothing is run; words are matched whole, comments and here-documents skipped.

mod words;

use words::{Line, logical_lines, tokenize};

/// What one command does with Docker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Runs local containers: `docker run`, `docker compose up`, `supabase start`, ...
    Containers,
    /// Other use of the local daemon: `docker ps`, `docker compose down`, `supabase status`.
    Docker,
    /// Image builds and publishing only: `docker build`, `docker push`.
    BuildOnly,
    /// Targets a remote daemon (`DOCKER_HOST=tcp://`, `-H`, `--context` other than default).
    Remote,
}

/// A Docker-related command found in a script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    /// 1-based line of the command's start.
    pub line: usize,
    pub class: Class,
    /// The command, from its program name, shortened.
    pub command: String,
}

/// What a script does: its Docker commands, and the repository-local scripts it runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scan {
    pub hits: Vec<Hit>,
    pub refs: Vec<String>,
}

/// The script-wide state a command can change: `export DOCKER_HOST=...`, `docker context use`.
#[derive(Debug, Clone, Copy, Default)]
struct State {
    remote: bool,
}

const MAX_NESTING: usize = 4;

/// Scans a whole script (a settings script, a script file, a package.json script).
pub fn scan(text: &str) -> Scan {
    let mut out = Scan::default();
    scan_into(text, &mut State::default(), 0, 0, &mut out);
    out
}

fn scan_into(text: &str, st: &mut State, base_line: usize, nesting: usize, out: &mut Scan) {
    let lines = logical_lines(text);
    let mut i = 0;
    while let Some(Line { number, text }) = lines.get(i) {
        i += 1;
        let toks = tokenize(text);
        let line = base_line.max(1) + number - 1;
        for inner in &toks.substitutions {
            if nesting < MAX_NESTING {
                scan_into(inner, &mut st.clone(), line, nesting + 1, out);
            }
        }
        for cmd in &toks.commands {
            command(cmd, st, line, nesting, out);
        }
        // A here-document's body is data, not commands.
        for (delim, strip_tabs) in &toks.heredocs {
            while let Some(l) = lines.get(i) {
                i += 1;
                let body = if *strip_tabs {
                    l.text.trim_start_matches('\t')
                } else {
                    &l.text
                };
                if body == delim {
                    break;
                }
            }
        }
    }
}

fn is_assignment(w: &str) -> Option<(&str, &str)> {
    let (name, value) = w.split_once('=')?;
    let ok = !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit());
    ok.then_some((name, value))
}

/// Whether a `DOCKER_HOST` / `-H` value is this machine's daemon. Anything not plainly local
/// (a scheme other than unix/npipe/fd, a bare `host:port`, an unexpanded `$VAR`) is remote.
fn local_host(v: &str) -> bool {
    v.is_empty() || v.starts_with("unix://") || v.starts_with("npipe://") || v.starts_with("fd://")
}

fn remote_assignment(name: &str, value: &str) -> Option<bool> {
    match name {
        "DOCKER_HOST" => Some(!local_host(value)),
        "DOCKER_CONTEXT" => Some(!(value.is_empty() || value == "default")),
        _ => None,
    }
}

fn base(w: &str) -> &str {
    w.rsplit('/').next().unwrap_or(w)
}

/// Skips wrappers and runners (`sudo`, `env`, `npx`, `pnpm exec`, ...) in front of a program.
fn skip_prefixes(words: &[String], remote: &mut bool) -> usize {
    let mut i = 0;
    while let Some(w) = words.get(i) {
        if let Some((n, v)) = is_assignment(w) {
            if let Some(r) = remote_assignment(n, v) {
                *remote = r;
            }
            i += 1;
            continue;
        }
        let next = words.get(i + 1).map(String::as_str);
        i += match base(w) {
            "!" | "if" | "then" | "else" | "elif" | "do" | "while" | "until" | "{" | "time"
            | "exec" | "command" | "builtin" | "nohup" => 1,
            "sudo" | "doas" => {
                1 + flags(
                    &words[i + 1..],
                    &["-u", "-g", "-U", "-C", "-h", "-p", "-r", "-t", "-D"],
                )
            }
            "env" => 1 + flags(&words[i + 1..], &["-u", "-C", "-S"]),
            "nice" => 1 + flags(&words[i + 1..], &["-n"]),
            "timeout" => 2 + flags(&words[i + 1..], &["-s", "-k"]),
            "npx" | "bunx" => 1 + flags(&words[i + 1..], &["-p", "--package", "-c"]),
            "pnpm" | "yarn" | "bun" | "npm" if matches!(next, Some("exec" | "dlx" | "x")) => 2,
            "pnpm" | "yarn" => 1,
            "uv" | "poetry" | "pipenv" | "pdm" | "hatch" | "pipx" if next == Some("run") => 2,
            "--" => 1,
            _ => return i,
        };
    }
    i
}

/// How many leading words are flags (with the values of `valued` flags).
fn flags(words: &[String], valued: &[&str]) -> usize {
    let mut i = 0;
    while let Some(w) = words.get(i) {
        if !w.starts_with('-') || w == "-" {
            break;
        }
        if w == "--" {
            return i + 1;
        }
        i += if valued.contains(&w.as_str()) { 2 } else { 1 };
    }
    i.min(words.len())
}

fn command(words: &[String], st: &mut State, line: usize, nesting: usize, out: &mut Scan) {
    let mut remote = st.remote;
    let start = skip_prefixes(words, &mut remote);
    let Some(prog) = words.get(start) else {
        // Only assignments: they change the script's environment from here on.
        for w in words {
            if let Some(r) = is_assignment(w).and_then(|(n, v)| remote_assignment(n, v)) {
                st.remote = r;
            }
        }
        return;
    };
    let args = &words[start + 1..];
    // A package spec such as `supabase@latest` names the program `supabase`.
    let name = base(prog).split('@').next().unwrap_or("");
    let class = match name {
        "docker" => docker(args, &mut remote, st),
        "docker-compose" => compose(args, &mut remote),
        "supabase" => supabase(args),
        "localstack" | "lstk" => localstack(args),
        "export" | "readonly" | "declare" | "typeset" => {
            for (n, v) in args.iter().filter_map(|w| is_assignment(w)) {
                if let Some(r) = remote_assignment(n, v) {
                    st.remote = r;
                }
            }
            None
        }
        "unset" => {
            if args
                .iter()
                .any(|a| a == "DOCKER_HOST" || a == "DOCKER_CONTEXT")
            {
                st.remote = false;
            }
            None
        }
        "sh" | "bash" | "zsh" | "dash" | "ksh" => {
            shell_call(args, st, line, nesting, out);
            None
        }
        "eval" if nesting < MAX_NESTING => {
            scan_into(&args.join(" "), &mut st.clone(), line, nesting + 1, out);
            None
        }
        "source" | "." => {
            push_ref(args.first(), out);
            None
        }
        _ if prog.contains('/') => {
            push_ref(Some(prog), out);
            None
        }
        _ => None,
    };
    if let Some(class) = class {
        let class = match class {
            Class::Containers | Class::Docker if remote => Class::Remote,
            c => c,
        };
        let mut shown = words[start..].join(" ");
        if shown.chars().count() > 80 {
            shown = shown.chars().take(77).collect::<String>() + "...";
        }
        out.hits.push(Hit {
            line,
            class,
            command: shown,
        });
    }
}

fn shell_call(args: &[String], st: &State, line: usize, nesting: usize, out: &mut Scan) {
    let n = flags(args, &["-o", "-O"]);
    let opts = &args[..n];
    if opts.iter().any(|o| !o.starts_with("--") && o.contains('c')) {
        if let Some(text) = args.get(n).filter(|_| nesting < MAX_NESTING) {
            scan_into(text, &mut st.clone(), line, nesting + 1, out);
        }
    } else {
        push_ref(args.get(n), out);
    }
}

fn push_ref(path: Option<&String>, out: &mut Scan) {
    if let Some(p) = path.filter(|p| !p.starts_with('/') && !p.contains('$') && !p.is_empty()) {
        out.refs.push(p.clone());
    }
}

/// `docker` global flags, then the subcommand.
fn docker(args: &[String], remote: &mut bool, st: &mut State) -> Option<Class> {
    let sub_at = global_flags(
        args,
        remote,
        &[
            "--config",
            "-l",
            "--log-level",
            "--tlscacert",
            "--tlscert",
            "--tlskey",
        ],
    );
    let sub = args.get(sub_at).map(String::as_str)?;
    let next = args.get(sub_at + 1).map(String::as_str);
    Some(match sub {
        "compose" => return compose(&args[sub_at + 1..], remote),
        "context" => {
            if next == Some("use") {
                st.remote = args.get(sub_at + 2).is_some_and(|c| c != "default");
            }
            return None;
        }
        "version" | "help" => return None,
        "build" | "buildx" | "builder" | "push" | "tag" | "login" | "logout" | "manifest"
        | "trust" | "search" => Class::BuildOnly,
        "image" if matches!(next, Some("build" | "push" | "tag")) => Class::BuildOnly,
        "run" | "create" | "start" | "restart" | "exec" => Class::Containers,
        "container" if matches!(next, Some("run" | "create" | "start" | "restart" | "exec")) => {
            Class::Containers
        }
        _ => Class::Docker,
    })
}

/// Leading global flags of `docker`/`docker-compose`; records a remote `-H`/`--context`.
/// Returns the index of the subcommand.
fn global_flags(args: &[String], remote: &mut bool, valued: &[&str]) -> usize {
    let mut i = 0;
    while let Some(a) = args.get(i) {
        if !a.starts_with('-') || a == "-" {
            break;
        }
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if a.starts_with("--") => (f, Some(v)),
            _ if a.len() > 2
                && !a.starts_with("--")
                && (a.starts_with("-H") || a.starts_with("-c")) =>
            {
                (&a[..2], Some(&a[2..]))
            }
            _ => (a.as_str(), None),
        };
        let takes = matches!(flag, "-H" | "--host" | "-c" | "--context") || valued.contains(&flag);
        let value = inline.or_else(|| {
            if takes {
                args.get(i + 1).map(String::as_str)
            } else {
                None
            }
        });
        match flag {
            "-H" | "--host" => *remote |= !local_host(value.unwrap_or("")),
            "-c" | "--context" => *remote |= value.is_some_and(|v| v != "default"),
            _ => {}
        }
        i += if takes && inline.is_none() { 2 } else { 1 };
    }
    i
}

fn compose(args: &[String], remote: &mut bool) -> Option<Class> {
    let valued = [
        "-f",
        "--file",
        "-p",
        "--project-name",
        "--project-directory",
        "--env-file",
        "--profile",
        "--ansi",
        "--progress",
        "--parallel",
        "--log-level",
        "--tlscacert",
        "--tlscert",
        "--tlskey",
    ];
    let at = global_flags(args, remote, &valued);
    Some(match args.get(at).map(String::as_str)? {
        "version" | "help" => return None,
        "build" | "push" | "config" | "convert" => Class::BuildOnly,
        "up" | "run" | "start" | "restart" | "create" | "exec" | "watch" => Class::Containers,
        _ => Class::Docker,
    })
}

/// The Supabase CLI's local-stack commands; remote ones (`--linked`, `db push`, deploys) are not.
fn supabase(args: &[String]) -> Option<Class> {
    let remote_flag =
        |a: &String| a == "--linked" || a.starts_with("--project-ref") || a.starts_with("--db-url");
    if args.iter().any(remote_flag) {
        return None;
    }
    let mut pos = args
        .iter()
        .map(String::as_str)
        .filter(|a| !a.starts_with('-'));
    Some(match (pos.next()?, pos.next()) {
        ("start", _) | ("db", Some("start")) | ("functions", Some("serve")) => Class::Containers,
        ("db", Some("push")) => return None,
        ("stop" | "status" | "db" | "test" | "seed" | "migration", _) => Class::Docker,
        _ => return None,
    })
}

fn localstack(args: &[String]) -> Option<Class> {
    Some(
        match args
            .iter()
            .map(String::as_str)
            .find(|a| !a.starts_with('-'))?
        {
            "start" => Class::Containers,
            "stop" | "restart" | "status" | "wait" | "logs" => Class::Docker,
            _ => return None,
        },
    )
}
