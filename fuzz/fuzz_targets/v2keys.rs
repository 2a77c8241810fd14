//! Fuzz target `v2keys`: a `/v2/keys` request as `actcd_v2tree::parse_key_request` reads it
//! (the front's `v2/keys.rs` calls it with the decoded path and the form values). The input is
//! lines: the HTTP method, the key path, then `name=value` form values in order. The same
//! bytes also go through the decoding before it (`actcd_v2tree`'s form functions): the path
//! cleaned as Go's `ServeMux` cleans it and percent-decoded, the whole input read as a form
//! body with the second line as the query. That must not panic, and cleaning a path must
//! reach a fixed point.
#![no_main]

use actcd_v2tree::parse_key_request;
use actcd_v2tree::{mux_clean_path, parse_form, percent_decode};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut lines = text.split('\n');
    let method = lines.next().unwrap_or("");
    let path = lines.next().unwrap_or("");
    let cleaned = mux_clean_path(&percent_decode(path));
    assert!(cleaned.starts_with('/'), "a cleaned path is absolute");
    assert_eq!(mux_clean_path(&cleaned), cleaned, "cleaning is idempotent");
    let _ = parse_form(method, None, data, path);
    let params: Vec<(String, String)> = lines
        .map(|l| match l.split_once('=') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None => (l.to_string(), String::new()),
        })
        .collect();
    // Any time: the expiration wraps as Go's does, never overflows.
    let now = i64::from_le_bytes(
        data.get(..8)
            .and_then(|b| b.try_into().ok())
            .unwrap_or_default(),
    );
    if let Ok(req) = parse_key_request(method, path, &params, now) {
        let _ = (req.is_watch(), req.is_local_read(), req.needs_proposal());
        assert!(
            req.request.path.starts_with('/'),
            "a parsed key is absolute"
        );
    }
});
