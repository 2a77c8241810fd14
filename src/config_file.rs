//! etcd's YAML configuration file (`--config-file`, `ETCD_CONFIG_FILE`) and the command line as
//! etcd's unit files write it.
//!
//! The file's keys are `embed.Config`'s: each top-level key is a flag's name, and the two
//! security sections (`client-transport-security`, `peer-transport-security`) hold the TLS
//! flags under shorter names. The file is turned into the command line it stands for and
//! parsed by the same `Flags` definition, so no flag is defined twice. As in etcd 3.5:
//! - with a file, the other command-line flags and the `ETCD_*` variables are ignored (they
//!   are still parsed, so a bad one still fails);
//! - keys etcd doesn't know are ignored (etcd ignores them silently; actcd names them in a
//!   warning);
//! - durations are integers of nanoseconds, as Go's JSON decoding of `time.Duration` takes
//!   them; a string such as `5s` is refused with etcd's message;
//! - a null value (`wal-dir:`) leaves the flag's default.
//!
//! Go's flag package also takes single-dash long flags (`-data-dir=/x`, `-name foo`), which
//! etcd's documentation and many unit files use: [`go_style_args`] rewrites them for clap.

use std::ffi::OsString;
use std::path::Path;

use clap::{CommandFactory, FromArgMatches};
use serde_yaml::Value;

use crate::config::Flags;

/// Keys whose values are Go `time.Duration`s in etcd's config struct.
const DURATION_KEYS: &[&str] = &[
    "backend-batch-interval",
    "grpc-keepalive-min-time",
    "grpc-keepalive-interval",
    "grpc-keepalive-timeout",
    "experimental-corrupt-check-time",
    "experimental-watch-progress-notify-interval",
    "experimental-warning-apply-duration",
    "experimental-downgrade-check-time",
    "experimental-compact-hash-check-time",
    "experimental-scrub-interval",
    "experimental-compaction-sleep-interval",
    "experimental-warning-unary-request-duration",
    // etcd 3.6's names of the ones above.
    "corrupt-check-time",
    "watch-progress-notify-interval",
    "warning-apply-duration",
    "downgrade-check-time",
    "compact-hash-check-time",
    "compaction-sleep-interval",
    "warning-unary-request-duration",
];

/// Keys etcd's config struct spells otherwise than the flag: `(key, flag)`. etcd 3.5.7+ and
/// 3.6 read `experimental-snapshot-catch-up-entries` (#15033's spelling) into
/// `--experimental-snapshot-catchup-entries`.
const KEY_ALIASES: &[(&str, &str)] = &[(
    "experimental-snapshot-catch-up-entries",
    "experimental-snapshot-catchup-entries",
)];

/// The keys of a `*-transport-security` section and the flags they set.
const CLIENT_SECURITY: &[(&str, &str)] = &[
    ("cert-file", "cert-file"),
    ("key-file", "key-file"),
    ("client-cert-auth", "client-cert-auth"),
    ("trusted-ca-file", "trusted-ca-file"),
    ("auto-tls", "auto-tls"),
    ("crl-file", "client-crl-file"),
    ("allowed-hostname", "client-cert-allowed-hostname"),
];
const PEER_SECURITY: &[(&str, &str)] = &[
    ("cert-file", "peer-cert-file"),
    ("key-file", "peer-key-file"),
    ("client-cert-auth", "peer-client-cert-auth"),
    ("trusted-ca-file", "peer-trusted-ca-file"),
    ("auto-tls", "peer-auto-tls"),
    ("crl-file", "peer-crl-file"),
    ("allowed-cn", "peer-cert-allowed-cn"),
    ("allowed-hostname", "peer-cert-allowed-hostname"),
];

/// Flags that are not configuration and have no key.
const NOT_KEYS: &[&str] = &["config-file", "help", "version"];

/// What reading a config file gives: the flags, and the keys that were ignored.
#[derive(Debug)]
pub struct FromFile {
    pub flags: Flags,
    /// Keys actcd has no flag for (ignored, as etcd ignores unknown keys).
    pub unknown_keys: Vec<String>,
}

/// The long names of the flags `Flags` defines.
pub fn long_flags() -> Vec<String> {
    Flags::command()
        .get_arguments()
        .filter_map(|a| a.get_long().map(str::to_string))
        .chain(["help".to_string(), "version".to_string()])
        .collect()
}

/// Rewrites Go's single-dash spelling of long flags (`-data-dir=/x`, `-name foo`) as
/// `--data-dir=/x`, `--name foo`, for the flags `Flags` knows; anything else is left alone (an
/// unknown `-foo` still fails, as in etcd). Stops at `--`, like Go's flags.
pub fn go_style_args<I, T>(args: I) -> Vec<OsString>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString>,
{
    let known = long_flags();
    let mut out = Vec::new();
    let mut rest = false;
    for (i, arg) in args.into_iter().map(Into::into).enumerate() {
        if i == 0 || rest {
            out.push(arg);
            continue;
        }
        let Some(s) = arg.to_str() else {
            out.push(arg);
            continue;
        };
        if s == "--" {
            rest = true;
            out.push(arg);
            continue;
        }
        let single = s.strip_prefix('-').filter(|r| !r.starts_with('-'));
        match single {
            Some(r) if known.iter().any(|k| k == r.split('=').next().unwrap_or("")) => {
                out.push(format!("-{s}").into());
            }
            _ => out.push(arg),
        }
    }
    out
}

/// What etcd says at start-up about `ETCD_*` variables (the command line's mode only): one that
/// names no flag is "unrecognized", one whose flag the command line also sets is "shadowed".
/// `(variable, message)` pairs, for warnings.
pub fn env_notes(
    env: impl IntoIterator<Item = (String, String)>,
    argv: &[OsString],
) -> Vec<(String, &'static str)> {
    let known = long_flags();
    let given: Vec<String> = argv
        .iter()
        .skip(1)
        .filter_map(|a| a.to_str()?.strip_prefix("--"))
        .map(|a| a.split('=').next().unwrap_or(a).to_string())
        .collect();
    let mut notes = Vec::new();
    for (var, _) in env {
        let Some(rest) = var.strip_prefix("ETCD_") else {
            continue;
        };
        let flag = rest.to_ascii_lowercase().replace('_', "-");
        if !known.contains(&flag) || NOT_KEYS[1..].contains(&flag.as_str()) {
            notes.push((var, "unrecognized environment variable"));
        } else if given.contains(&flag) {
            notes.push((
                var,
                "conflicting environment variable is shadowed by corresponding command-line flag (either unset environment variable or disable flag)",
            ));
        }
    }
    notes
}

/// Reads etcd's YAML config file at `path` into `Flags`, ignoring `ETCD_*` variables.
pub fn read(path: &Path) -> Result<FromFile, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("open {}: {e}", path.display()))?;
    from_yaml(&text)
}

/// Parses a config file's text into `Flags`, ignoring `ETCD_*` variables.
pub fn from_yaml(text: &str) -> Result<FromFile, String> {
    let (argv, unknown_keys) = to_args(text)?;
    let cmd = Flags::command().mut_args(|a| a.env(None::<&'static str>));
    let matches = cmd
        .try_get_matches_from(argv)
        .map_err(|e| e.render().to_string().trim_end().to_string())?;
    let flags = Flags::from_arg_matches(&matches).map_err(|e| e.to_string())?;
    Ok(FromFile {
        flags,
        unknown_keys,
    })
}

/// The command line a config file stands for (program name first), and the keys that have no
/// flag.
pub fn to_args(text: &str) -> Result<(Vec<String>, Vec<String>), String> {
    let doc: Value = serde_yaml::from_str(text)
        .map_err(|e| format!("error converting YAML to JSON: yaml: {e}"))?;
    let known = long_flags();
    let mut argv = vec!["actcd".to_string()];
    let mut unknown = Vec::new();
    let map = match doc {
        Value::Mapping(m) => m,
        Value::Null => return Ok((argv, unknown)),
        _ => return Err("error unmarshaling JSON: the config file is not a mapping".into()),
    };
    let mut push = |flag: &str, key: &str, value: &Value, unknown: &mut Vec<String>| {
        if NOT_KEYS.contains(&flag) || !known.iter().any(|k| k == flag) {
            unknown.push(key.to_string());
            return Ok(());
        }
        if let Some(v) = scalar(key, flag, value)? {
            argv.push(format!("--{flag}={v}"));
        }
        Ok::<(), String>(())
    };
    for (k, v) in &map {
        let Some(key) = k.as_str() else {
            unknown.push(format!("{k:?}"));
            continue;
        };
        let section = match key {
            "client-transport-security" => Some(CLIENT_SECURITY),
            "peer-transport-security" => Some(PEER_SECURITY),
            _ => None,
        };
        match (section, v) {
            (Some(_), Value::Null) => {}
            (Some(names), Value::Mapping(inner)) => {
                for (ik, iv) in inner {
                    let ik = ik.as_str().unwrap_or_default();
                    let full = format!("{key}.{ik}");
                    match names.iter().find(|(n, _)| *n == ik) {
                        Some((_, flag)) => push(flag, &full, iv, &mut unknown)?,
                        None => unknown.push(full),
                    }
                }
            }
            (Some(_), _) => {
                return Err(format!(
                    "error unmarshaling JSON: {key} must be a mapping of TLS settings"
                ));
            }
            (None, _) => {
                let flag = KEY_ALIASES
                    .iter()
                    .find(|(k, _)| *k == key)
                    .map_or(key, |(_, f)| *f);
                push(flag, key, v, &mut unknown)?
            }
        }
    }
    Ok((argv, unknown))
}

/// One key's value as its flag's text; `None` for a null (the default stays).
fn scalar(key: &str, flag: &str, value: &Value) -> Result<Option<String>, String> {
    // etcd 3.6's `feature-gates` is a string (`ServerFeatureGatesJSON`): `A=true,B=false`.
    if flag == "feature-gates" && !matches!(value, Value::String(_) | Value::Null) {
        return Err(format!(
            "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {} into Go struct field configYAML.{key} of type string",
            json_kind(value)
        ));
    }
    if DURATION_KEYS.contains(&flag) {
        return match value {
            Value::Null => Ok(None),
            Value::Number(n) if n.as_i64().is_some() => Ok(Some(format!("{}ns", n))),
            other => Err(format!(
                "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {} into Go struct field configYAML.{key} of type time.Duration",
                json_kind(other)
            )),
        };
    }
    Ok(match value {
        Value::Null => None,
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        Value::String(s) => Some(s.clone()),
        // Lists (`log-outputs`, `cipher-suites`) are their flags' comma lists.
        Value::Sequence(items) => Some(
            items
                .iter()
                .map(|i| scalar(key, flag, i).map(Option::unwrap_or_default))
                .collect::<Result<Vec<_>, _>>()?
                .join(","),
        ),
        other => {
            return Err(format!(
                "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {} into Go struct field configYAML.{key}",
                json_kind(other)
            ));
        }
    })
}

/// How Go's JSON decoder names a value's type.
fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "bool",
        Value::Sequence(_) => "array",
        Value::Mapping(_) => "object",
        _ => "value",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn single_dash_long_flags_are_gos_spelling() {
        let got = go_style_args([
            "actcd",
            "-name",
            "infra0",
            "-data-dir=/var/lib/etcd",
            "--listen-client-urls",
            "http://127.0.0.1:2379",
            "-pre-vote=false",
            "-nonsense",
            "-",
        ]);
        let got: Vec<_> = got.iter().map(|s| s.to_str().unwrap()).collect();
        assert_eq!(
            got,
            [
                "actcd",
                "--name",
                "infra0",
                "--data-dir=/var/lib/etcd",
                "--listen-client-urls",
                "http://127.0.0.1:2379",
                "--pre-vote=false",
                "-nonsense",
                "-",
            ]
        );
        let flags =
            Flags::try_parse_from(go_style_args(["actcd", "-name", "infra0", "-data-dir=/x"]))
                .unwrap();
        assert_eq!(flags.name, "infra0");
        assert_eq!(flags.data_dir.as_deref(), Some(Path::new("/x")));
        use clap::Parser as _;
        assert!(Flags::try_parse_from(go_style_args(["actcd", "-nonsense"])).is_err());
    }

    #[test]
    fn etcd_variables_are_checked_as_etcd_checks_them() {
        let env = [
            ("ETCD_NAME", "a"),
            ("ETCD_DATA_DIR", "/x"),
            ("ETCD_NO_SUCH_FLAG", "1"),
            ("ETCDCTL_API", "3"),
            ("HOME", "/root"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()));
        let argv: Vec<OsString> = ["actcd", "--name=b"].iter().map(Into::into).collect();
        let notes = env_notes(env, &argv);
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert_eq!(notes[0].0, "ETCD_NAME");
        assert!(
            notes[0]
                .1
                .starts_with("conflicting environment variable is shadowed")
        );
        assert_eq!(
            notes[1],
            (
                "ETCD_NO_SUCH_FLAG".to_string(),
                "unrecognized environment variable"
            )
        );
    }

    #[test]
    fn a_config_file_is_the_command_line_it_stands_for() {
        let yaml = r#"
# From etcd's etcd.conf.yml.sample, trimmed.
name: 'infra1'
data-dir: /var/lib/etcd
wal-dir:
snapshot-count: 10000
heartbeat-interval: 100
election-timeout: 1000
quota-backend-bytes: 0
listen-peer-urls: http://localhost:2380
listen-client-urls: http://localhost:2379
max-snapshots: 5
max-wals: 5
cors:
initial-advertise-peer-urls: http://localhost:2380
advertise-client-urls: http://localhost:2379
discovery:
discovery-fallback: 'proxy'
initial-cluster: infra1=http://localhost:2380
initial-cluster-token: 'etcd-cluster'
initial-cluster-state: 'new'
strict-reconfig-check: false
enable-v2: true
enable-pprof: true
proxy: 'off'
proxy-failure-wait: 5000
client-transport-security:
  cert-file:
  key-file:
  client-cert-auth: false
  trusted-ca-file:
peer-transport-security:
  client-cert-auth: true
debug: false
log-level: debug
logger: zap
log-outputs: [stderr]
auto-compaction-mode: revision
auto-compaction-retention: "1000"
grpc-keepalive-min-time: 2000000000
experimental-warning-apply-duration: 250000000
some-key-etcd-does-not-know: 1
"#;
        let got = from_yaml(yaml).unwrap();
        let mut f = got.flags;
        f.resolve().unwrap();
        assert_eq!(f.name, "infra1");
        assert_eq!(f.data_dir.as_deref(), Some(Path::new("/var/lib/etcd")));
        assert_eq!(f.wal_dir, Path::new(""));
        assert_eq!(f.snapshot_count, 10000);
        assert!(!f.strict_reconfig_check);
        assert!(f.enable_v2);
        assert!(f.enable_pprof);
        assert!(f.tls.peer_client_cert_auth);
        assert!(!f.tls.client_cert_auth);
        assert_eq!(f.log_level, "debug");
        assert_eq!(f.log_outputs, "stderr");
        assert_eq!(f.auto_compaction_mode, "revision");
        assert_eq!(f.auto_compaction_retention, "1000");
        assert_eq!(f.grpc_keepalive_min_time, Duration::from_secs(2));
        assert_eq!(
            f.experimental_warning_apply_duration,
            Duration::from_millis(250)
        );
        assert_eq!(f.cors, "*", "a null leaves the default");
        assert!(got.unknown_keys.contains(&"debug".to_string()));
        assert!(
            got.unknown_keys
                .contains(&"some-key-etcd-does-not-know".to_string())
        );
    }

    /// etcd 3.6's keys: `feature-gates` (a string), the renamed flags' new names (durations in
    /// nanoseconds), and the deprecated ones with the rules of the command line.
    #[test]
    fn a_config_file_takes_etcd_3_6s_keys() {
        let yaml = "feature-gates: InitialCorruptCheck=true,FastLeaseKeepAlive=false
watch-progress-notify-interval: 5000000000
corrupt-check-time: 60000000000
experimental-snapshot-catch-up-entries: 7
";
        let mut f = from_yaml(yaml).unwrap().flags;
        let r = f.resolve().unwrap();
        assert!(!r.gates.enabled(crate::config::gates::FAST_LEASE_KEEP_ALIVE));
        assert!(f.experimental_initial_corrupt_check);
        assert_eq!(
            f.experimental_watch_progress_notify_interval,
            Duration::from_secs(5)
        );
        assert_eq!(f.experimental_corrupt_check_time, Duration::from_secs(60));
        assert_eq!(f.snapshot_catchup_entries, 7);
        let both = "experimental-corrupt-check-time: 1\ncorrupt-check-time: 2\n";
        let mut f = from_yaml(both).unwrap().flags;
        assert!(f.resolve().is_err());
        let gate_and_flag =
            "experimental-compact-hash-check-enabled: true\nfeature-gates: CompactHashCheck=true\n";
        let mut f = from_yaml(gate_and_flag).unwrap().flags;
        assert!(
            f.resolve()
                .unwrap_err()
                .to_string()
                .starts_with("cannot specify both flags")
        );
        assert_eq!(
            from_yaml("feature-gates:\n  FastLeaseKeepAlive: true\n").unwrap_err(),
            "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal object into Go struct field configYAML.feature-gates of type string"
        );
        assert!(
            from_yaml("feature-gates: Nope=true\n")
                .unwrap_err()
                .contains("unrecognized feature gate: Nope")
        );
    }

    #[test]
    fn config_file_errors_are_etcds() {
        let err = from_yaml("grpc-keepalive-min-time: 5s\n").unwrap_err();
        assert_eq!(
            err,
            "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal string into Go struct field configYAML.grpc-keepalive-min-time of type time.Duration"
        );
        assert!(
            from_yaml("name: foo\n  bad: [\n")
                .unwrap_err()
                .starts_with("error converting YAML to JSON: yaml: ")
        );
        assert!(from_yaml("pre-vote: maybe\n").is_err());
        assert!(
            read(Path::new("/nonexistent/etcd.yml"))
                .unwrap_err()
                .starts_with("open /nonexistent/etcd.yml: ")
        );
    }
}
