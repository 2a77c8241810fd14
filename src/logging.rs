//! Log output: tracing's human-readable lines, or (`--log-format json`) one JSON object a line
//! in the shape of etcd's zap logger — `level`, `ts` (RFC 3339, UTC), `caller` (the module),
//! `msg`, then the event's own fields — for log shippers that parse etcd's logs.

use std::fmt;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::FormatTime;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// Formats each event as one JSON line.
pub struct JsonLines;

/// Collects an event's fields as JSON values.
struct Fields<'a>(&'a mut Map<String, Value>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(
            field.name().to_string(),
            Value::String(format!("{value:?}")),
        );
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0
            .insert(field.name().to_string(), Value::String(value.to_string()));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().to_string(), value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_string(), value.into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().to_string(), value.into());
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().to_string(), value.into());
    }
}

/// One event as etcd's zap logger would write it.
pub fn json_line(level: &str, ts: &str, caller: &str, mut fields: Map<String, Value>) -> String {
    // zap's order: the fixed keys first, then the event's fields.
    let msg = fields
        .remove("message")
        .unwrap_or(Value::String(String::new()));
    let text = |v: &str| Value::String(v.to_string()).to_string();
    let mut line = format!(
        "{{\"level\":{},\"ts\":{},\"caller\":{},\"msg\":{msg}",
        text(&level.to_ascii_lowercase()),
        text(ts),
        text(caller)
    );
    for (k, v) in fields {
        line.push_str(&format!(",{}:{v}", text(&k)));
    }
    line.push('}');
    line
}

impl<S, N> FormatEvent<S, N> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut ts = String::new();
        tracing_subscriber::fmt::time::SystemTime.format_time(&mut Writer::new(&mut ts))?;
        let mut fields = Map::new();
        event.record(&mut Fields(&mut fields));
        let meta = event.metadata();
        let line = json_line(meta.level().as_str(), &ts, meta.target(), fields);
        writeln!(writer, "{line}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_have_zaps_shape() {
        let mut fields = Map::new();
        fields.insert("message".into(), "ready to serve client requests".into());
        fields.insert("address".into(), "127.0.0.1:2379".into());
        let line = json_line("INFO", "2026-11-22T12:00:00Z", "actcd::node", fields);
        assert_eq!(
            line,
            r#"{"level":"info","ts":"2026-11-22T12:00:00Z","caller":"actcd::node","msg":"ready to serve client requests","address":"127.0.0.1:2379"}"#
        );
        let parsed: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(parsed["msg"], "ready to serve client requests");
    }
}
