//! # actcd-gojson — etcd 3.5's JSON gateway, as grpc-gateway v1.16 runs it, without the server
//!
//! JSON bodies decoded as etcd 3.5's gateway decodes them, with the same refusals in the same
//! words, and the rest of grpc-gateway's side of a call ([`gateway`]). The front's JSON gateway
//! (`actcd-front`'s `http/gateway.rs`) is its only user: it keeps the routes, the calls into its
//! services and the streams, and takes everything about the wire from here. A unary call's body
//! is `Decoder::new(body).next_value()` then [`decode_message`] against the request's
//! `prost_reflect` descriptor; a bidirectional call's body is read value after value the same
//! way. No I/O, no actor, no etcd type: bytes and a descriptor in, a `DynamicMessage` or Go's
//! error text out. etcd's messages reach it only as the descriptor pool its caller passes
//! ([`gateway::Messages::decode`]; the tests use `actcd-proto`'s).
//!
//! ## Layout
//! - `lib.rs` (this file): the decoder, below; its tests at the end.
//! - `gateway.rs`: the gateway's side of a call. [`gateway::Messages`] finds a message by name
//!   (a bare name in the package the caller names) and maps it both ways: a request from JSON
//!   as above (`from_json`, `from_value`, and `stream_requests` for a bidirectional call's
//!   body: a first request that can't be decoded fails the call, a later one ends the
//!   requests), an answer to proto3 JSON as `JSONPb{OrigName: true}` writes it (`to_json`:
//!   original field names, 64-bit integers as strings, bytes in base64, enums by name, default
//!   values left out, text that is not UTF-8 with Go's U+FFFD per bad byte). Also
//!   grpc-gateway's HTTP status per gRPC code ([`gateway::http_status`]), its error bodies
//!   ([`gateway::error_answer`], [`gateway::stream_error`]), and which header a call's
//!   credentials come from ([`gateway::AuthHeader`]: `Grpc-Metadata-Token` before
//!   `Authorization`, as etcd reads its metadata). Tests in `gateway_tests.rs`.
//!
//! etcd's gateway (grpc-gateway v1.16, marshaler `JSONPb{OrigName: true}`) reads a body with
//! Go's `encoding/json` `Decoder` and fills the request with golang/protobuf 1.5's `jsonpb`,
//! which hands each field's raw JSON to `json.Unmarshal` into a Go value of the field's type.
//! This crate follows those three layers, so each message is the one Go would write:
//!
//! - the **scanner** (Go's `scanner.go` state machine, with its explicit stack and its depth limit
//!   of 10000): `invalid character 'x' looking for beginning of value`, `… after object key`,
//!   `… in string literal`, `… exceeded max depth`; a value cut short is `unexpected EOF` from
//!   the decoder, `unexpected end of JSON input` from `json.Unmarshal`. A body holds a stream of
//!   values: the decoder reads one and leaves the rest (a unary call ignores what follows; the
//!   bidirectional streams read on).
//! - **`json.Unmarshal` into a typed value**: a kind that doesn't fit is
//!   `json: cannot unmarshal <kind> into Go value of type <T>` (`number 1.5` for a number
//!   that doesn't fit an integer type, with its text); bytes are standard padded base64
//!   (`illegal base64 data at input byte N`) or an array of byte values; `null` leaves the
//!   zero value; invalid UTF-8 in a string becomes U+FFFD.
//! - **jsonpb**: fields in declaration order, each found by its proto name or (winning) its JSON
//!   name, `null` skipped, unknown fields ignored (grpc-gateway allows them); integers may be
//!   quoted (the quotes are stripped, the rest parsed again); an enum is a name
//!   (`unknown value "\"NOPE\"" for enum etcdserverpb.RangeRequest.SortTarget`) or a number;
//!   a top-level `null` is an empty request; of duplicate keys the last counts.
//!
//! Message nesting deeper than [`MAX_MESSAGE_DEPTH`] (only txns nest) is refused here where Go
//! would go on (prost refuses such a request anyway when it decodes it).
//!
//! ## What it refuses, and its bounds
//! Every input is a body from the network, so the decoder must answer every byte string with a
//! value or an error: no panic, work linear in the body per nesting level, memory proportional
//! to the body. JSON nesting past Go's 10000 is refused by the scanner (its stack is a `Vec`,
//! no recursion), message nesting past [`MAX_MESSAGE_DEPTH`] by [`decode_message`] (the only
//! recursion here), and what the scanner refuses never reaches the typed layer. On the way
//! out, `to_json` answers `Internal` for a message its descriptor can't read even with the
//! U+FFFD repair, and a descriptor pool that didn't decode makes every call `Internal`
//! (`descriptors unavailable`) rather than a panic.
//!
//! ## How it is checked
//! The unit tests below hold the messages etcd 3.5.1's gateway gave for the same bodies;
//! `gateway_tests.rs` holds the JSON, statuses and error bodies etcd's gateway writes, with
//! etcd's own messages (`actcd-proto`); the integration tests' `gateway` module runs them
//! through the front. The fuzz target `gojson` (`fuzz/fuzz_targets/gojson.rs`, run by
//! `fuzz/run.sh` in CI) feeds arbitrary bodies through the decoder and into etcd's request messages (Put, Range, Txn,
//! Watch, Authenticate, …) as the gateway does, from the seeds in `fuzz/seeds/gojson/`
//! (bodies etcd's gateway users send).

pub mod gateway;

use base64::Engine;
use prost_reflect::{DynamicMessage, FieldDescriptor, Kind, MessageDescriptor, Value};

/// Go's `maxNestingDepth`.
const MAX_DEPTH: usize = 10000;

/// How deep request messages may nest here (prost's own decoding limit is 100).
pub const MAX_MESSAGE_DEPTH: usize = 100;

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

/// Go's `quoteChar`: how a syntax error names the byte it stopped at.
fn quote_char(c: u8) -> String {
    match c {
        b'\'' => r"'\''".to_string(),
        b'"' => "'\"'".to_string(),
        // Go converts the byte to the rune of the same number before quoting it.
        c => {
            let q = go_quote(char::from(c).to_string().as_bytes());
            format!("'{}'", &q[1..q.len() - 1])
        }
    }
}

/// Go's `strconv.Quote` of some bytes (the `%q` verb).
pub fn go_quote(b: &[u8]) -> String {
    let mut out = String::from("\"");
    let mut rest = b;
    while !rest.is_empty() {
        let (c, len) = match std::str::from_utf8(rest) {
            Ok(s) => (s.chars().next(), s.chars().next().map_or(1, char::len_utf8)),
            Err(e) if e.valid_up_to() > 0 => {
                let s = std::str::from_utf8(&rest[..e.valid_up_to()]).unwrap_or_default();
                (s.chars().next(), s.chars().next().map_or(1, char::len_utf8))
            }
            Err(_) => (None, 1),
        };
        match c {
            None => out.push_str(&format!("\\x{:02x}", rest[0])),
            Some('"') => out.push_str("\\\""),
            Some('\\') => out.push_str("\\\\"),
            Some('\u{7}') => out.push_str("\\a"),
            Some('\u{8}') => out.push_str("\\b"),
            Some('\u{c}') => out.push_str("\\f"),
            Some('\n') => out.push_str("\\n"),
            Some('\r') => out.push_str("\\r"),
            Some('\t') => out.push_str("\\t"),
            Some('\u{b}') => out.push_str("\\v"),
            Some(c) if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            Some(c) if !go_is_print(c) => {
                if (c as u32) < 0x10000 {
                    out.push_str(&format!("\\u{:04x}", c as u32))
                } else {
                    out.push_str(&format!("\\U{:08x}", c as u32))
                }
            }
            Some(c) => out.push(c),
        }
        rest = &rest[len..];
    }
    out.push('"');
    out
}

/// Go's `unicode.IsPrint`, near enough: not a control, format, private-use or separator
/// character (other than the ASCII space). Unassigned code points count as printable here.
fn go_is_print(c: char) -> bool {
    let u = c as u32;
    let format = matches!(u,
        0xad | 0x600..=0x605 | 0x61c | 0x6dd | 0x70f | 0x890..=0x891 | 0x8e2 | 0x180e
        | 0x200b..=0x200f | 0x202a..=0x202e | 0x2060..=0x2064 | 0x2066..=0x206f | 0xfeff
        | 0xfff9..=0xfffb | 0x110bd | 0x110cd | 0x13430..=0x1343f | 0x1bca0..=0x1bca3
        | 0x1d173..=0x1d17a | 0xe0001 | 0xe0020..=0xe007f);
    let private = matches!(u, 0xe000..=0xf8ff | 0xf0000..=0xffffd | 0x100000..=0x10fffd);
    c == ' ' || !(c.is_control() || c.is_whitespace() || format || private)
}

/// One step's outcome, as Go's scanner reports it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Step {
    Continue,
    /// The top-level value ended before this byte (which is not part of it).
    End,
    /// The top-level value ended with this byte (`}`, `]`).
    EndWithThis,
    Error,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Parse {
    ObjectKey,
    ObjectValue,
    ArrayValue,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    BeginValue,
    BeginValueOrEmpty,
    BeginStringOrEmpty,
    BeginString,
    EndValue,
    EndTop,
    InString,
    InStringEsc,
    InStringEscU(u8),
    Neg,
    One,
    Zero,
    Dot,
    Dot0,
    E,
    ESign,
    E0,
    /// Inside a literal: the bytes still expected and the literal's name.
    Literal(&'static [u8], &'static str),
    Error,
}

/// Go's JSON scanner: one byte at a time, an explicit stack of open containers.
struct Scanner {
    state: State,
    stack: Vec<Parse>,
    err: Option<String>,
}

impl Scanner {
    fn new() -> Self {
        Scanner {
            state: State::BeginValue,
            stack: Vec::new(),
            err: None,
        }
    }

    fn error(&mut self, c: u8, context: &str) -> Step {
        self.state = State::Error;
        self.err = Some(format!("invalid character {} {context}", quote_char(c)));
        Step::Error
    }

    fn push(&mut self, c: u8, p: Parse, next: State) -> Step {
        self.stack.push(p);
        if self.stack.len() > MAX_DEPTH {
            return self.error(c, "exceeded max depth");
        }
        self.state = next;
        Step::Continue
    }

    fn step(&mut self, c: u8) -> Step {
        match self.state {
            State::BeginValueOrEmpty => {
                if is_space(c) {
                    return Step::Continue;
                }
                if c == b']' {
                    return self.end_value(c);
                }
                self.begin_value(c)
            }
            State::BeginValue => self.begin_value(c),
            State::BeginStringOrEmpty => {
                if is_space(c) {
                    return Step::Continue;
                }
                if c == b'}' {
                    if let Some(last) = self.stack.last_mut() {
                        *last = Parse::ObjectValue;
                    }
                    return self.end_value(c);
                }
                self.begin_string(c)
            }
            State::BeginString => self.begin_string(c),
            State::EndValue => self.end_value(c),
            State::EndTop => {
                if !is_space(c) {
                    self.error(c, "after top-level value");
                }
                Step::End
            }
            State::InString => {
                match c {
                    b'"' => self.state = State::EndValue,
                    b'\\' => self.state = State::InStringEsc,
                    c if c < 0x20 => return self.error(c, "in string literal"),
                    _ => {}
                }
                Step::Continue
            }
            State::InStringEsc => match c {
                b'b' | b'f' | b'n' | b'r' | b't' | b'\\' | b'/' | b'"' => {
                    self.state = State::InString;
                    Step::Continue
                }
                b'u' => {
                    self.state = State::InStringEscU(0);
                    Step::Continue
                }
                c => self.error(c, "in string escape code"),
            },
            State::InStringEscU(n) => {
                if !c.is_ascii_hexdigit() {
                    return self.error(c, "in \\u hexadecimal character escape");
                }
                self.state = if n == 3 {
                    State::InString
                } else {
                    State::InStringEscU(n + 1)
                };
                Step::Continue
            }
            State::Neg => match c {
                b'0' => {
                    self.state = State::Zero;
                    Step::Continue
                }
                b'1'..=b'9' => {
                    self.state = State::One;
                    Step::Continue
                }
                c => self.error(c, "in numeric literal"),
            },
            State::One => {
                if c.is_ascii_digit() {
                    return Step::Continue;
                }
                self.zero(c)
            }
            State::Zero => self.zero(c),
            State::Dot => {
                if c.is_ascii_digit() {
                    self.state = State::Dot0;
                    return Step::Continue;
                }
                self.error(c, "after decimal point in numeric literal")
            }
            State::Dot0 => {
                if c.is_ascii_digit() {
                    return Step::Continue;
                }
                if c == b'e' || c == b'E' {
                    self.state = State::E;
                    return Step::Continue;
                }
                self.end_value(c)
            }
            State::E => {
                if c == b'+' || c == b'-' {
                    self.state = State::ESign;
                    return Step::Continue;
                }
                self.e_sign(c)
            }
            State::ESign => self.e_sign(c),
            State::E0 => {
                if c.is_ascii_digit() {
                    return Step::Continue;
                }
                self.end_value(c)
            }
            State::Literal(rest, name) => {
                if c != rest[0] {
                    let context = format!("in literal {name} (expecting {})", quote_char(rest[0]));
                    return self.error(c, &context);
                }
                self.state = if rest.len() == 1 {
                    State::EndValue
                } else {
                    State::Literal(&rest[1..], name)
                };
                Step::Continue
            }
            State::Error => Step::Error,
        }
    }

    fn begin_value(&mut self, c: u8) -> Step {
        if is_space(c) {
            return Step::Continue;
        }
        match c {
            b'{' => self.push(c, Parse::ObjectKey, State::BeginStringOrEmpty),
            b'[' => self.push(c, Parse::ArrayValue, State::BeginValueOrEmpty),
            b'"' => {
                self.state = State::InString;
                Step::Continue
            }
            b'-' => {
                self.state = State::Neg;
                Step::Continue
            }
            b'0' => {
                self.state = State::Zero;
                Step::Continue
            }
            b'1'..=b'9' => {
                self.state = State::One;
                Step::Continue
            }
            b't' => {
                self.state = State::Literal(b"rue", "true");
                Step::Continue
            }
            b'f' => {
                self.state = State::Literal(b"alse", "false");
                Step::Continue
            }
            b'n' => {
                self.state = State::Literal(b"ull", "null");
                Step::Continue
            }
            c => self.error(c, "looking for beginning of value"),
        }
    }

    fn begin_string(&mut self, c: u8) -> Step {
        if is_space(c) {
            return Step::Continue;
        }
        if c == b'"' {
            self.state = State::InString;
            return Step::Continue;
        }
        self.error(c, "looking for beginning of object key string")
    }

    fn zero(&mut self, c: u8) -> Step {
        match c {
            b'.' => {
                self.state = State::Dot;
                Step::Continue
            }
            b'e' | b'E' => {
                self.state = State::E;
                Step::Continue
            }
            c => self.end_value(c),
        }
    }

    fn e_sign(&mut self, c: u8) -> Step {
        if c.is_ascii_digit() {
            self.state = State::E0;
            return Step::Continue;
        }
        self.error(c, "in exponent of numeric literal")
    }

    fn end_value(&mut self, c: u8) -> Step {
        let Some(&top) = self.stack.last() else {
            // The top-level value ended before `c`.
            self.state = State::EndTop;
            return self.step(c);
        };
        if is_space(c) {
            self.state = State::EndValue;
            return Step::Continue;
        }
        match top {
            Parse::ObjectKey => {
                if c == b':' {
                    if let Some(last) = self.stack.last_mut() {
                        *last = Parse::ObjectValue;
                    }
                    self.state = State::BeginValue;
                    return Step::Continue;
                }
                self.error(c, "after object key")
            }
            Parse::ObjectValue => match c {
                b',' => {
                    if let Some(last) = self.stack.last_mut() {
                        *last = Parse::ObjectKey;
                    }
                    self.state = State::BeginString;
                    Step::Continue
                }
                b'}' => self.pop(),
                c => self.error(c, "after object key:value pair"),
            },
            Parse::ArrayValue => match c {
                b',' => {
                    self.state = State::BeginValue;
                    Step::Continue
                }
                b']' => self.pop(),
                c => self.error(c, "after array element"),
            },
        }
    }

    fn pop(&mut self) -> Step {
        self.stack.pop();
        self.state = State::EndValue;
        if self.stack.is_empty() {
            self.state = State::EndTop;
            return Step::EndWithThis;
        }
        Step::Continue
    }

    /// Whether what was scanned so far is a whole value if the input ends here (Go's `eof`).
    fn complete_at_eof(&mut self) -> bool {
        if self.err.is_some() {
            return false;
        }
        if self.state == State::EndTop {
            return true;
        }
        self.step(b' ');
        self.state == State::EndTop && self.err.is_none()
    }
}

/// Go's `json.Decoder` over a whole body: its values one after another.
pub struct Decoder<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Decoder<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Decoder { buf, pos: 0 }
    }

    /// The next value's text (leading space skipped), `None` at the end of the body (Go's
    /// `io.EOF`), or the decoder's error.
    pub fn next_value(&mut self) -> Result<Option<&'a [u8]>, String> {
        let mut scan = Scanner::new();
        let mut start = None;
        let mut i = self.pos;
        while i < self.buf.len() {
            let c = self.buf[i];
            if start.is_none() && !is_space(c) {
                start = Some(i);
            }
            match scan.step(c) {
                Step::Continue => {}
                Step::End => {
                    self.pos = i;
                    return Ok(start.map(|s| &self.buf[s..i]));
                }
                Step::EndWithThis => {
                    self.pos = i + 1;
                    return Ok(start.map(|s| &self.buf[s..=i]));
                }
                Step::Error => {
                    // Go's decoder keeps its error: nothing more is read.
                    self.pos = self.buf.len();
                    return Err(scan.err.unwrap_or_default());
                }
            }
            i += 1;
        }
        self.pos = self.buf.len();
        let Some(s) = start else {
            return Ok(None);
        };
        if scan.complete_at_eof() {
            Ok(Some(&self.buf[s..]))
        } else {
            Err("unexpected EOF".to_string())
        }
    }
}

/// `json.Unmarshal`'s validity check of a whole input.
fn check_valid(data: &[u8]) -> Result<(), String> {
    let mut scan = Scanner::new();
    for &c in data {
        if scan.step(c) == Step::Error {
            return Err(scan.err.unwrap_or_default());
        }
    }
    if let Some(e) = scan.err.take() {
        return Err(e);
    }
    if scan.complete_at_eof() {
        return Ok(());
    }
    Err(scan
        .err
        .unwrap_or_else(|| "unexpected end of JSON input".to_string()))
}

/// The end of the value starting at `data[0]` (valid JSON): its length.
fn value_len(data: &[u8]) -> usize {
    let mut scan = Scanner::new();
    for (i, &c) in data.iter().enumerate() {
        match scan.step(c) {
            Step::End => return i,
            Step::EndWithThis => return i + 1,
            Step::Error => return i,
            Step::Continue => {}
        }
    }
    data.len()
}

fn skip_space(data: &[u8], mut i: usize) -> usize {
    while i < data.len() && is_space(data[i]) {
        i += 1;
    }
    i
}

/// The elements of a valid JSON array, each's text.
fn array_items(data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut i = skip_space(data, 1);
    while i < data.len() && data[i] != b']' {
        let n = value_len(&data[i..]);
        out.push(&data[i..i + n]);
        i = skip_space(data, i + n);
        if i < data.len() && data[i] == b',' {
            i = skip_space(data, i + 1);
        }
    }
    out
}

/// The members of a valid JSON object: each key (decoded) and value text.
fn object_members(data: &[u8]) -> Vec<(String, &[u8])> {
    let mut out = Vec::new();
    let mut i = skip_space(data, 1);
    while i < data.len() && data[i] == b'"' {
        let n = value_len(&data[i..]);
        let key = unquote(&data[i..i + n]);
        i = skip_space(data, i + n) + 1; // the ':'
        i = skip_space(data, i);
        let n = value_len(&data[i..]);
        out.push((key, &data[i..i + n]));
        i = skip_space(data, i + n);
        if i < data.len() && data[i] == b',' {
            i = skip_space(data, i + 1);
        }
    }
    out
}

/// Go's `unquote` of a valid JSON string literal: escapes decoded, a lone surrogate or a byte
/// that is not UTF-8 becomes U+FFFD.
fn unquote(lit: &[u8]) -> String {
    let s = &lit[1..lit.len().saturating_sub(1).max(1)];
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    let hex4 = |at: usize| -> Option<u32> {
        let h = s.get(at..at + 4)?;
        u32::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok()
    };
    while i < s.len() {
        match s[i] {
            b'\\' => {
                let Some(&e) = s.get(i + 1) else { break };
                i += 2;
                let c = match e {
                    b'b' => '\u{8}',
                    b'f' => '\u{c}',
                    b'n' => '\n',
                    b'r' => '\r',
                    b't' => '\t',
                    b'u' => {
                        let Some(u) = hex4(i) else { break };
                        i += 4;
                        if (0xd800..0xdc00).contains(&u)
                            && s.get(i..i + 2) == Some(b"\\u")
                            && let Some(lo) = hex4(i + 2)
                            && (0xdc00..0xe000).contains(&lo)
                        {
                            i += 6;
                            let c = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00);
                            char::from_u32(c).unwrap_or('\u{fffd}')
                        } else {
                            char::from_u32(u).unwrap_or('\u{fffd}')
                        }
                    }
                    e => char::from(e),
                };
                out.push(c);
            }
            _ => {
                let rest = &s[i..];
                let valid = match std::str::from_utf8(rest) {
                    Ok(v) => v,
                    Err(e) => std::str::from_utf8(&rest[..e.valid_up_to()]).unwrap_or_default(),
                };
                // Up to the next escape, or all the valid text.
                let upto = valid.find('\\').unwrap_or(valid.len());
                if upto == 0 {
                    out.push('\u{fffd}');
                    i += 1;
                } else {
                    out.push_str(&valid[..upto]);
                    i += upto;
                }
            }
        }
    }
    out
}

/// What a JSON value's first byte makes it, in `UnmarshalTypeError`'s words.
fn kind_of(data: &[u8]) -> &'static str {
    match data.first() {
        Some(b'{') => "object",
        Some(b'[') => "array",
        Some(b'"') => "string",
        Some(b't' | b'f') => "bool",
        Some(b'n') => "null",
        _ => "number",
    }
}

fn type_error(what: &str, go_type: &str) -> String {
    format!("json: cannot unmarshal {what} into Go value of type {go_type}")
}

/// The Go type a field's scalar is unmarshaled into.
#[derive(Clone, Copy)]
enum GoType {
    Bool,
    Int(u32),
    Uint(u32),
    Float(u32),
    String,
    Bytes,
    Enum,
    Byte,
}

impl GoType {
    fn name(self) -> &'static str {
        match self {
            GoType::Bool => "bool",
            GoType::Int(32) => "int32",
            GoType::Int(_) => "int64",
            GoType::Uint(32) => "uint32",
            GoType::Uint(_) => "uint64",
            GoType::Float(32) => "float32",
            GoType::Float(_) => "float64",
            GoType::String => "string",
            GoType::Bytes => "[]uint8",
            GoType::Enum => "protoreflect.EnumNumber",
            GoType::Byte => "uint8",
        }
    }
}

/// `json.Unmarshal(data, &v)` for a `v` of type `t`: the value, or Go's first error.
fn unmarshal_scalar(data: &[u8], t: GoType) -> Result<Value, String> {
    check_valid(data)?;
    let start = skip_space(data, 0);
    let data = &data[start..start + value_len(&data[start..])];
    literal(data, t)
}

/// One valid JSON value (no surrounding space) into `t`, as Go's `literalStore` and `array` do.
fn literal(data: &[u8], t: GoType) -> Result<Value, String> {
    let zero = || match t {
        GoType::Bool => Value::Bool(false),
        GoType::Int(32) | GoType::Enum => Value::I32(0),
        GoType::Int(_) => Value::I64(0),
        GoType::Uint(32) | GoType::Byte => Value::U32(0),
        GoType::Uint(_) => Value::U64(0),
        GoType::Float(32) => Value::F32(0.0),
        GoType::Float(_) => Value::F64(0.0),
        GoType::String => Value::String(String::new()),
        GoType::Bytes => Value::Bytes(Default::default()),
    };
    match kind_of(data) {
        "null" => Ok(zero()),
        "object" => Err(type_error("object", t.name())),
        "array" => {
            let GoType::Bytes = t else {
                return Err(type_error("array", t.name()));
            };
            // A `[]uint8` from an array of numbers; the first bad element's error wins, as Go
            // saves the first and goes on.
            let mut out = Vec::new();
            let mut first_err = None;
            for item in array_items(data) {
                match literal(item, GoType::Byte) {
                    Ok(Value::U32(b)) => out.push(b as u8),
                    Ok(_) => out.push(0),
                    Err(e) => {
                        out.push(0);
                        first_err.get_or_insert(e);
                    }
                }
            }
            match first_err {
                Some(e) => Err(e),
                None => Ok(Value::Bytes(out.into())),
            }
        }
        "bool" => match t {
            GoType::Bool => Ok(Value::Bool(data[0] == b't')),
            t => Err(type_error("bool", t.name())),
        },
        "string" => match t {
            GoType::String => Ok(Value::String(unquote(data))),
            GoType::Bytes => {
                let s = unquote(data);
                if let Some(at) = go_base64_error(s.as_bytes()) {
                    return Err(format!("illegal base64 data at input byte {at}"));
                }
                let clean: Vec<u8> = s.bytes().filter(|b| !is_newline(*b)).collect();
                go_base64()
                    .decode(clean)
                    .map(|b| Value::Bytes(b.into()))
                    .map_err(|_| "illegal base64 data at input byte 0".to_string())
            }
            t => Err(type_error("string", t.name())),
        },
        _ => {
            let s = std::str::from_utf8(data).unwrap_or_default();
            let bad = || type_error(&format!("number {s}"), t.name());
            match t {
                GoType::Int(32) | GoType::Enum => s
                    .parse::<i64>()
                    .ok()
                    .and_then(|n| i32::try_from(n).ok())
                    .map(Value::I32)
                    .ok_or_else(bad),
                GoType::Int(_) => s.parse::<i64>().map(Value::I64).map_err(|_| bad()),
                GoType::Uint(32) => s
                    .parse::<u64>()
                    .ok()
                    .and_then(|n| u32::try_from(n).ok())
                    .map(Value::U32)
                    .ok_or_else(bad),
                GoType::Byte => s
                    .parse::<u64>()
                    .ok()
                    .and_then(|n| u8::try_from(n).ok())
                    .map(|n| Value::U32(n.into()))
                    .ok_or_else(bad),
                GoType::Uint(_) => s.parse::<u64>().map(Value::U64).map_err(|_| bad()),
                GoType::Float(bits) => {
                    let f: f64 = s.parse().map_err(|_| bad())?;
                    let limit = if bits == 32 {
                        f64::from(f32::MAX)
                    } else {
                        f64::MAX
                    };
                    if !f.is_finite() || f.abs() > limit {
                        return Err(bad());
                    }
                    Ok(if bits == 32 {
                        Value::F32(f as f32)
                    } else {
                        Value::F64(f)
                    })
                }
                t => Err(type_error("number", t.name())),
            }
        }
    }
}

/// jsonpb's `trimQuote`: surrounding quotes dropped, nothing unescaped.
fn trim_quote(data: &[u8]) -> &[u8] {
    if data.len() >= 2 && data[0] == b'"' && data[data.len() - 1] == b'"' {
        &data[1..data.len() - 1]
    } else {
        data
    }
}

/// A request message from the text of one JSON value, as jsonpb's `UnmarshalNext` fills it
/// (a top-level `null` is an empty message).
pub fn decode_message(desc: &MessageDescriptor, data: &[u8]) -> Result<DynamicMessage, String> {
    message(desc, data, 0)
}

fn message(desc: &MessageDescriptor, data: &[u8], depth: usize) -> Result<DynamicMessage, String> {
    let mut msg = DynamicMessage::new(desc.clone());
    if data == b"null" {
        return Ok(msg);
    }
    if depth > MAX_MESSAGE_DEPTH {
        return Err("request nests too deeply".to_string());
    }
    let members = match kind_of(data) {
        "object" => object_members(data),
        "null" => Vec::new(),
        kind => {
            return Err(type_error(kind, "map[string]json.RawMessage"));
        }
    };
    // A Go map: of duplicate keys the last counts.
    let find = |name: &str| members.iter().rev().find(|(k, _)| k == name).map(|m| m.1);
    for field in declared_fields(desc) {
        let raw = find(field.json_name()).or_else(|| find(field.name()));
        let Some(raw) = raw.filter(|r| *r != b"null") else {
            continue;
        };
        let v = field_value(&field, raw, depth)?;
        msg.try_set_field(&field, v).map_err(|e| e.to_string())?;
    }
    Ok(msg)
}

/// A message's fields in the order its `.proto` declares them (jsonpb's order, which decides
/// which of two bad fields is reported).
fn declared_fields(desc: &MessageDescriptor) -> Vec<FieldDescriptor> {
    desc.descriptor_proto()
        .field
        .iter()
        .filter_map(|f| desc.get_field_by_name(f.name()))
        .collect()
}

fn field_value(field: &FieldDescriptor, raw: &[u8], depth: usize) -> Result<Value, String> {
    if field.is_map() {
        // No etcd request has a map field.
        return Err(format!("map field {} is not supported", field.name()));
    }
    if field.is_list() {
        let items = match kind_of(raw) {
            "array" => array_items(raw),
            "null" => Vec::new(),
            kind => return Err(type_error(kind, "[]json.RawMessage")),
        };
        return items
            .into_iter()
            .map(|item| singular(field, item, depth))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::List);
    }
    singular(field, raw, depth)
}

fn singular(field: &FieldDescriptor, raw: &[u8], depth: usize) -> Result<Value, String> {
    let non_finite = || match raw {
        b"\"NaN\"" => Some(f64::NAN),
        b"\"Infinity\"" => Some(f64::INFINITY),
        b"\"-Infinity\"" => Some(f64::NEG_INFINITY),
        _ => None,
    };
    match field.kind() {
        Kind::Bool => unmarshal_scalar(raw, GoType::Bool),
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => {
            unmarshal_scalar(trim_quote(raw), GoType::Int(32))
        }
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => {
            unmarshal_scalar(trim_quote(raw), GoType::Int(64))
        }
        Kind::Uint32 | Kind::Fixed32 => unmarshal_scalar(trim_quote(raw), GoType::Uint(32)),
        Kind::Uint64 | Kind::Fixed64 => unmarshal_scalar(trim_quote(raw), GoType::Uint(64)),
        Kind::Float => match non_finite() {
            Some(f) => Ok(Value::F32(f as f32)),
            None => unmarshal_scalar(trim_quote(raw), GoType::Float(32)),
        },
        Kind::Double => match non_finite() {
            Some(f) => Ok(Value::F64(f)),
            None => unmarshal_scalar(trim_quote(raw), GoType::Float(64)),
        },
        Kind::String => unmarshal_scalar(raw, GoType::String),
        Kind::Bytes => unmarshal_scalar(raw, GoType::Bytes),
        Kind::Enum(e) => {
            if raw.len() >= 2 && raw[0] == b'"' && raw[raw.len() - 1] == b'"' {
                let name = std::str::from_utf8(trim_quote(raw)).unwrap_or_default();
                return match e.get_value_by_name(name) {
                    Some(v) => Ok(Value::EnumNumber(v.number())),
                    None => Err(format!(
                        "unknown value {} for enum {}",
                        go_quote(raw),
                        e.full_name()
                    )),
                };
            }
            match unmarshal_scalar(raw, GoType::Enum)? {
                Value::I32(n) => Ok(Value::EnumNumber(n)),
                _ => Ok(Value::EnumNumber(0)),
            }
        }
        Kind::Message(m) => message(&m, raw, depth + 1).map(Value::Message),
    }
}

/// Go's `base64.StdEncoding` once the input is known good: padded, trailing bits not checked.
fn go_base64() -> base64::engine::GeneralPurpose {
    base64::engine::GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        base64::engine::GeneralPurposeConfig::new().with_decode_allow_trailing_bits(true),
    )
}

fn base64_value(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'+' || b == b'/'
}

fn is_newline(b: u8) -> bool {
    b == b'\n' || b == b'\r'
}

/// Where Go's `base64.StdEncoding.DecodeString` reports corrupt input, if it does.
fn go_base64_error(src: &[u8]) -> Option<usize> {
    let mut si = 0;
    loop {
        // One quantum of up to four symbols.
        let mut j = 0;
        while j < 4 {
            if si == src.len() {
                return match j {
                    0 => None,
                    _ => Some(si - j),
                };
            }
            let c = src[si];
            si += 1;
            if base64_value(c) {
                j += 1;
                continue;
            }
            if is_newline(c) {
                continue;
            }
            if c != b'=' || j < 2 {
                return Some(si - 1);
            }
            if j == 2 {
                // A second `=` must follow (line breaks skipped).
                while si < src.len() && is_newline(src[si]) {
                    si += 1;
                }
                if si == src.len() {
                    return Some(src.len());
                }
                if src[si] != b'=' {
                    return Some(si - 1);
                }
                si += 1;
            }
            while si < src.len() && is_newline(src[si]) {
                si += 1;
            }
            return (si < src.len()).then_some(si);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Offsets etcd 3.5.1's gateway reported for these keys.
    #[test]
    fn base64_errors_are_where_go_finds_them() {
        for (input, want) in [
            ("!!!!", Some(0)),
            ("YQ=", Some(3)),
            ("YQ", Some(0)),
            ("YQ===", Some(4)),
            ("Y Q==", Some(1)),
            ("YQ==", None),
            ("Zm9v", None),
            ("Zm9vYg==", None),
            ("Zm9v\nYmFy", None),
            ("", None),
            ("Zm9vY", Some(4)),
            ("Z===", Some(1)),
            ("Zm=a", Some(2)),
        ] {
            assert_eq!(go_base64_error(input.as_bytes()), want, "{input:?}");
        }
    }

    #[test]
    fn the_decoder_reads_values_one_after_another_and_stops_at_an_error() {
        let mut d = Decoder::new(b" {\"a\":1}\n[1, 2] 5 true \"x\" {\"b\"");
        assert_eq!(d.next_value(), Ok(Some(&b"{\"a\":1}"[..])));
        assert_eq!(d.next_value(), Ok(Some(&b"[1, 2]"[..])));
        assert_eq!(d.next_value(), Ok(Some(&b"5"[..])));
        assert_eq!(d.next_value(), Ok(Some(&b"true"[..])));
        assert_eq!(d.next_value(), Ok(Some(&b"\"x\""[..])));
        assert_eq!(d.next_value(), Err("unexpected EOF".to_string()));
        assert_eq!(Decoder::new(b"  \n").next_value(), Ok(None));
    }

    /// Go's own wording (Go 1.16's `encoding/json`, as etcd 3.5.1 was built with).
    #[test]
    fn syntax_errors_are_worded_as_gos() {
        for (input, want) in [
            ("{\"key\"", "unexpected EOF"),
            ("x", "invalid character 'x' looking for beginning of value"),
            (
                "{x",
                "invalid character 'x' looking for beginning of object key string",
            ),
            ("{\"a\" 1}", "invalid character '1' after object key"),
            (
                "{\"a\":1 2}",
                "invalid character '2' after object key:value pair",
            ),
            ("[1 2]", "invalid character '2' after array element"),
            (
                "{\"a\":01}",
                "invalid character '1' after object key:value pair",
            ),
            ("{\"a\":-x}", "invalid character 'x' in numeric literal"),
            (
                "{\"a\":1.}",
                "invalid character '}' after decimal point in numeric literal",
            ),
            (
                "{\"a\":1e}",
                "invalid character '}' in exponent of numeric literal",
            ),
            (
                "{\"a\":tru}",
                "invalid character '}' in literal true (expecting 'e')",
            ),
            (
                "{\"a\":nul}",
                "invalid character '}' in literal null (expecting 'l')",
            ),
            (
                "{\"a\":\"\\x\"}",
                "invalid character 'x' in string escape code",
            ),
            (
                "{\"a\":\"\\u12x4\"}",
                "invalid character 'x' in \\u hexadecimal character escape",
            ),
            (
                "{\"a\":\"\n\"}",
                "invalid character '\\n' in string literal",
            ),
            (
                "{\"a\":'x'}",
                "invalid character '\\'' looking for beginning of value",
            ),
            (
                "\u{ff}",
                "invalid character 'Ã' looking for beginning of value",
            ),
            (
                "{,}",
                "invalid character ',' looking for beginning of object key string",
            ),
        ] {
            assert_eq!(
                Decoder::new(input.as_bytes()).next_value(),
                Err(want.to_string()),
                "{input:?}"
            );
        }
        let deep = "[".repeat(10001);
        assert_eq!(
            Decoder::new(deep.as_bytes()).next_value(),
            Err("invalid character '[' exceeded max depth".to_string())
        );
        assert_eq!(check_valid(b""), Err("unexpected end of JSON input".into()));
        assert_eq!(
            check_valid(b"12x"),
            Err("invalid character 'x' after top-level value".into())
        );
        assert_eq!(check_valid(b" 12 "), Ok(()));
    }

    #[test]
    fn strings_unquote_as_go_unquotes_them() {
        assert_eq!(
            unquote(br#""a\u00e9\n\ud83d\ude00\ud800x""#),
            "a\u{e9}\n\u{1f600}\u{fffd}x"
        );
        assert_eq!(unquote(b"\"a\xffb\""), "a\u{fffd}b");
        assert_eq!(go_quote(b"\"N\xffO\"\n"), r#""\"N\xffO\"\n""#);
        // etcd 3.5.1 quoted these in an unknown-enum message so.
        assert_eq!(
            go_quote("\"\u{ad}\u{200b}\"".as_bytes()),
            r#""\"\u00ad\u200b\"""#
        );
        assert_eq!(
            go_quote("\u{a0}\u{f0000}é".as_bytes()),
            r#""\u00a0\U000f0000é""#
        );
    }

    fn pool() -> prost_reflect::DescriptorPool {
        prost_reflect::DescriptorPool::decode(actcd_proto::FILE_DESCRIPTOR_SET).unwrap()
    }

    /// Messages from etcd 3.5.1's gateway for these `/v3/kv/range` bodies.
    #[test]
    fn fields_are_refused_as_jsonpb_refuses_them() {
        let range = pool()
            .get_message_by_name("etcdserverpb.RangeRequest")
            .unwrap();
        for (body, want) in [
            (
                r#"{"key":1}"#,
                "json: cannot unmarshal number into Go value of type []uint8",
            ),
            (
                r#"{"limit":"x"}"#,
                "invalid character 'x' looking for beginning of value",
            ),
            (
                r#"{"limit":1.5}"#,
                "json: cannot unmarshal number 1.5 into Go value of type int64",
            ),
            (r#"{"limit":""}"#, "unexpected end of JSON input"),
            (
                r#"{"limit":true}"#,
                "json: cannot unmarshal bool into Go value of type int64",
            ),
            (
                r#"{"serializable":1}"#,
                "json: cannot unmarshal number into Go value of type bool",
            ),
            (
                r#"{"key":[300]}"#,
                "json: cannot unmarshal number 300 into Go value of type uint8",
            ),
            (
                r#"{"sort_target":"NOPE"}"#,
                r#"unknown value "\"NOPE\"" for enum etcdserverpb.RangeRequest.SortTarget"#,
            ),
            (
                r#"{"sort_order":true}"#,
                "json: cannot unmarshal bool into Go value of type protoreflect.EnumNumber",
            ),
            (
                "[]",
                "json: cannot unmarshal array into Go value of type map[string]json.RawMessage",
            ),
            // Declaration order decides: `key` (1) before `limit` (3).
            (
                r#"{"limit":"x","key":1}"#,
                "json: cannot unmarshal number into Go value of type []uint8",
            ),
        ] {
            assert_eq!(
                decode_message(&range, body.as_bytes()).map(|_| ()),
                Err(want.to_string()),
                "{body}"
            );
        }
        let ok = decode_message(
            &range,
            br#"{"key":[97,98],"limit":"7","sortOrder":1,"revision":null,"bogus":{"x":[]},"count_only":false,"countOnly":true}"#,
        )
        .unwrap();
        let get = |name: &str| ok.get_field_by_name(name).unwrap().into_owned();
        assert_eq!(get("key"), Value::Bytes(b"ab".to_vec().into()));
        assert_eq!(get("limit"), Value::I64(7));
        assert_eq!(get("sort_order"), Value::EnumNumber(1));
        assert_eq!(get("count_only"), Value::Bool(true));
        let txn = pool()
            .get_message_by_name("etcdserverpb.TxnRequest")
            .unwrap();
        assert_eq!(
            decode_message(
                &txn,
                br#"{"compare":[{"key":"YQ==","target":"VALUE","result":"EQUAL"},{"key":"YQ","target":"VALUE"}]}"#
            )
            .map(|_| ()),
            Err("illegal base64 data at input byte 0".to_string())
        );
    }
}
