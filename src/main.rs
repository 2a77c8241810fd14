//! # actcd — the daemon
//!
//! Parses etcd's flags (`config.rs`), recovers state from disk, starts the actors and wires them
//! together (`node.rs`), serves the client API, and shuts down in order on SIGINT/SIGTERM (exit
//! 0), when this member is removed from the cluster (exit 0), or when an actor reports a fatal
//! error to the supervisor (`supervisor.rs`; exit 1, as etcd).
//!
//! The threads and the wiring are described in the library (`src/lib.rs`).

use std::process::ExitCode;

use actcd::config::{Config, Flags};
use actcd::node;
use clap::Parser;

/// gRPC and prost allocate and free many small buffers per request; with glibc's allocator that
/// showed as ~7% of server CPU under a range load (perf), mimalloc's thread-local caches cut it.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn init_logging(level: &str, format: &str, outputs: &str) -> Result<(), String> {
    let outputs = actcd::log_outputs::LogOutputs::open(outputs)?;
    // zap's levels above error are errors here.
    let level = match level {
        "dpanic" | "panic" | "fatal" => "error",
        other => other,
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    use std::io::IsTerminal;
    let ansi = outputs.only_stderr() && std::io::stderr().is_terminal();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(outputs);
    if format == "json" {
        builder
            .with_ansi(false)
            .event_format(actcd::logging::JsonLines)
            .init();
    } else {
        builder.with_ansi(ansi).init();
    }
    Ok(())
}

/// `--version` (`-version`, `--version=true`), which etcd answers before anything else.
fn wants_version(argv: &[std::ffi::OsString]) -> bool {
    argv.iter().skip(1).any(|a| match a.to_str() {
        Some("--version") => true,
        Some(a) => a
            .strip_prefix("--version=")
            .is_some_and(|v| actcd::config::parse_go_bool(v) == Ok(true)),
        None => false,
    })
}

/// `etcd --version`'s four lines, so scripts that read the first keep working; the version is
/// the etcd API version actcd serves, the rest says what actcd is.
fn print_version() {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    let text = format!(
        "etcd Version: {}\nGit SHA: actcd {}\nGo Version: none (actcd is written in Rust)\nGo OS/Arch: {}/{arch}\n",
        actcd::node::API_VERSION,
        env!("CARGO_PKG_VERSION"),
        std::env::consts::OS,
    );
    // A reader that closed the pipe early (`actcd --version | head -1`) is not an error
    // (println! would panic on it).
    let _ = std::io::Write::write_all(&mut std::io::stdout(), text.as_bytes());
}

/// The flags; with `--config-file`, its path and the keys it has no flag for; the warnings
/// about `ETCD_*` variables.
type ReadFlags = (
    Flags,
    Option<(std::path::PathBuf, Vec<String>)>,
    Vec<(String, &'static str)>,
);

/// The flags: the command line (Go's single-dash spelling too) and `ETCD_*` variables, or,
/// with `--config-file`, that file alone as etcd reads it. Logging is not up yet: errors are
/// returned for the caller to print.
fn read_flags() -> Result<ReadFlags, String> {
    let argv = actcd::config_file::go_style_args(std::env::args_os());
    if wants_version(&argv) {
        print_version();
        std::process::exit(0);
    }
    let flags = Flags::parse_from(&argv);
    let Some(path) = flags
        .config_file
        .clone()
        .filter(|p| !p.as_os_str().is_empty())
    else {
        let env = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.to_string_lossy().into_owned())));
        let env_notes = actcd::config_file::env_notes(env, &argv);
        return Ok((flags, None, env_notes));
    };
    let mut from_file = actcd::config_file::read(&path)?;
    from_file.flags.config_file = Some(path.clone());
    Ok((
        from_file.flags,
        Some((path, from_file.unknown_keys)),
        Vec::new(),
    ))
}

fn main() -> ExitCode {
    // Before the actors allocate (see the allocator module's doc); logged once logging is up.
    let thp = actcd::allocator::no_transparent_huge_pages();
    // `actcd snapshot save|status|restore`: etcdctl's and etcdutl's snapshot commands.
    if std::env::args().nth(1).as_deref() == Some("snapshot") {
        let cli = actcd::snapshot::SnapshotCli::parse_from(std::env::args().skip(1));
        let _ = init_logging("info", "text", "stderr");
        return match actcd::snapshot::run(cli) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("Error: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let (flags, config_file, env_notes) = match read_flags() {
        Ok(f) => f,
        Err(e) => {
            eprintln!("actcd: failed to verify flags: {e}");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = init_logging(&flags.log_level, &flags.log_format, &flags.log_outputs) {
        eprintln!("actcd: failed to verify flags: {e}");
        return ExitCode::from(2);
    }
    if let Some((path, unknown_keys)) = &config_file {
        tracing::info!(
            path = %path.display(),
            "loaded server configuration, other configuration command line flags and environment variables will be ignored if provided"
        );
        for key in unknown_keys {
            tracing::warn!(key = %key, "unknown key in the config file ignored");
        }
    }
    for (var, note) in &env_notes {
        tracing::warn!(environment_variable = %var, "{note}");
    }
    flags.warn_ignored();
    // A panic is a bug; it ends the member, as a Go panic ends etcd (exit 2). Without this a
    // panicking actor would only lose its own thread or task, and the member would go on
    // half alive: answering some requests, never applying again. (Failpoints builds abort
    // instead, below, like a crash.)
    #[cfg(not(feature = "failpoints"))]
    {
        let default_hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            default_hook(info);
            tracing::error!("panic: {info}; stopping the member");
            std::process::exit(2);
        }));
    }
    // Failpoints builds only: `FAILPOINTS` (fail-rs syntax, e.g. `wal_after_fsync=panic` or
    // `3*off->return`) configures the actors' failpoints for the whole run. A panic anywhere
    // aborts the process, as a crash does: a panicking actor would otherwise only lose its
    // task, and the member would hang on instead of dying.
    #[cfg(feature = "failpoints")]
    let _failpoints = {
        let default_hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            default_hook(info);
            std::process::abort();
        }));
        let scenario = fail::FailScenario::setup();
        if let Ok(set) = std::env::var("FAILPOINTS") {
            tracing::warn!(failpoints = %set, "failpoints configured");
        }
        scenario
    };
    if let Err(e) = thp {
        tracing::warn!("could not turn transparent huge pages off: {e}");
    }
    if let Err(e) = actcd::allocator::start_housekeeping() {
        tracing::warn!("could not start the allocator's housekeeping thread: {e}");
    }
    let config = match Config::try_from(flags) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!("{e}");
            return ExitCode::from(2);
        }
    };
    match node::run(config) {
        Ok(()) => ExitCode::SUCCESS,
        // The supervisor logged it when it happened.
        Err(node::StartError::Fatal { .. }) => ExitCode::FAILURE,
        Err(e) => {
            tracing::error!("{e}");
            ExitCode::FAILURE
        }
    }
}
