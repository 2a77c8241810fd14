//! `--log-outputs`: where log lines go. As in etcd, `default` and `stderr` are standard error,
//! `stdout` standard output, anything else a file the lines are appended to (created if
//! missing); a comma list writes every line to each.

use std::fs::File;
use std::io::{self, Write};
use std::sync::Arc;

use tracing_subscriber::fmt::MakeWriter;

#[derive(Debug, Clone)]
enum Sink {
    Stderr,
    Stdout,
    File(Arc<File>),
}

/// The opened `--log-outputs`.
#[derive(Debug, Clone)]
pub struct LogOutputs {
    sinks: Vec<Sink>,
}

impl LogOutputs {
    /// Opens each output of a `--log-outputs` list; a file that can't be opened fails with
    /// etcd's message.
    pub fn open(list: &str) -> Result<Self, String> {
        let mut sinks = Vec::new();
        let mut seen = Vec::new();
        for out in list.split(',').map(str::trim).filter(|o| !o.is_empty()) {
            // etcd writes each output once however often it is listed.
            let name = if out == "default" { "stderr" } else { out };
            if seen.contains(&name) {
                continue;
            }
            seen.push(name);
            sinks.push(match name {
                "stderr" => Sink::Stderr,
                "stdout" => Sink::Stdout,
                path => {
                    let file = std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(path)
                        .map_err(|e| {
                            format!(
                                "couldn't open sink {path:?}: open {path}: {}",
                                os_reason(&e)
                            )
                        })?;
                    Sink::File(Arc::new(file))
                }
            });
        }
        if sinks.is_empty() {
            sinks.push(Sink::Stderr);
        }
        Ok(Self { sinks })
    }

    /// Whether every output is standard error (colours are then up to the terminal).
    pub fn only_stderr(&self) -> bool {
        self.sinks.iter().all(|s| matches!(s, Sink::Stderr))
    }
}

/// Go's words for an OS error ("no such file or directory"), without Rust's "(os error 2)".
fn os_reason(e: &io::Error) -> String {
    let text = e.to_string();
    let text = text.split(" (os error").next().unwrap_or(&text).to_string();
    let mut c = text.chars();
    match c.next() {
        Some(first) => first.to_lowercase().chain(c).collect(),
        None => text,
    }
}

/// One log line's writer: buffers the line and hands it whole to every output.
pub struct LineWriter {
    sinks: Vec<Sink>,
    buf: Vec<u8>,
}

impl Write for LineWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        for sink in &self.sinks {
            // A failing output must not stop the others, nor the member.
            let _ = match sink {
                Sink::Stderr => io::stderr().write_all(&self.buf),
                Sink::Stdout => io::stdout().write_all(&self.buf),
                Sink::File(f) => (&**f).write_all(&self.buf),
            };
        }
        self.buf.clear();
        Ok(())
    }
}

impl Drop for LineWriter {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

impl<'a> MakeWriter<'a> for LogOutputs {
    type Writer = LineWriter;

    fn make_writer(&'a self) -> LineWriter {
        LineWriter {
            sinks: self.sinks.clone(),
            buf: Vec::with_capacity(256),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_are_opened_as_etcd_opens_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("etcd.log");
        let list = format!("default,stderr,{}", path.display());
        let outs = LogOutputs::open(&list).unwrap();
        assert_eq!(outs.sinks.len(), 2, "default is stderr, listed once");
        {
            let mut w = outs.make_writer();
            w.write_all(b"one line\n").unwrap();
        }
        {
            let mut w = outs.make_writer();
            w.write_all(b"two\n").unwrap();
        }
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "one line\ntwo\n");
        assert!(LogOutputs::open("stderr").unwrap().only_stderr());
        assert!(!LogOutputs::open("stdout").unwrap().only_stderr());
        assert_eq!(
            LogOutputs::open("/nonexistent/dir/x").unwrap_err(),
            "couldn't open sink \"/nonexistent/dir/x\": open /nonexistent/dir/x: no such file or directory"
        );
    }
}
