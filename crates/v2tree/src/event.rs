//! What the store hands out: [`Event`]s carrying [`NodeExtern`]s, and their
//! JSON exactly as etcd's v2 API writes it.

use serde::{Deserialize, Serialize};

use crate::json::{format_rfc3339_nano, push_go_string};

/// Action of a read.
pub const ACTION_GET: &str = "get";
/// Action of a create (POST, or PUT with `prevExist=false`).
pub const ACTION_CREATE: &str = "create";
/// Action of a plain PUT.
pub const ACTION_SET: &str = "set";
/// Action of a PUT with `prevExist=true`.
pub const ACTION_UPDATE: &str = "update";
/// Action of a DELETE.
pub const ACTION_DELETE: &str = "delete";
/// Action of a PUT with `prevValue`/`prevIndex`.
pub const ACTION_COMPARE_AND_SWAP: &str = "compareAndSwap";
/// Action of a DELETE with `prevValue`/`prevIndex`.
pub const ACTION_COMPARE_AND_DELETE: &str = "compareAndDelete";
/// Action of a TTL expiry.
pub const ACTION_EXPIRE: &str = "expire";
/// Action of the placeholder event [`crate::Store::apply`] returns for a
/// SYNC request (never shown to clients; etcd answers SYNC with nothing).
pub const ACTION_SYNC: &str = "sync";

/// A node as the v2 API shows it (etcd's `NodeExtern`).
///
/// `key` is the user's key path (`/foo/bar`); the root directory has an
/// empty key, which the JSON leaves out, as etcd does after trimming its
/// hidden `/1` prefix.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct NodeExtern {
    /// The key path; empty for the root.
    pub key: String,
    /// The value; `None` for directories (and for event nodes of deletes and
    /// expiries). `Some("")` is written as `"value":""`.
    pub value: Option<String>,
    /// Whether the node is a directory.
    pub dir: bool,
    /// Absolute expiry in Unix nanoseconds, if the node has a TTL.
    pub expiration: Option<i64>,
    /// Whole seconds left (rounded up) at the time the node was shown; 0 is
    /// left out of the JSON.
    pub ttl: i64,
    /// Children (listings only); left out of the JSON when empty.
    pub nodes: Vec<NodeExtern>,
    /// The index of the last change.
    pub modified_index: u64,
    /// The index the node was created at.
    pub created_index: u64,
}

impl NodeExtern {
    pub(crate) fn bare(key: &str, modified_index: u64, created_index: u64) -> Self {
        NodeExtern {
            key: extern_key(key),
            modified_index,
            created_index,
            ..NodeExtern::default()
        }
    }

    /// Appends this node's JSON: fields in etcd's order `key`, `value`,
    /// `dir`, `expiration`, `ttl`, `nodes`, `modifiedIndex`, `createdIndex`,
    /// each left out when empty, false or zero (`value` only when absent).
    pub fn write_json(&self, out: &mut String) {
        out.push('{');
        let mut first = true;
        let mut sep = |out: &mut String| {
            if first {
                first = false;
            } else {
                out.push(',');
            }
        };
        if !self.key.is_empty() {
            sep(out);
            out.push_str("\"key\":");
            push_go_string(out, &self.key);
        }
        if let Some(v) = &self.value {
            sep(out);
            out.push_str("\"value\":");
            push_go_string(out, v);
        }
        if self.dir {
            sep(out);
            out.push_str("\"dir\":true");
        }
        if let Some(exp) = self.expiration {
            sep(out);
            out.push_str("\"expiration\":\"");
            out.push_str(&format_rfc3339_nano(exp));
            out.push('"');
        }
        if self.ttl != 0 {
            sep(out);
            out.push_str("\"ttl\":");
            out.push_str(&self.ttl.to_string());
        }
        if !self.nodes.is_empty() {
            sep(out);
            out.push_str("\"nodes\":[");
            for (i, n) in self.nodes.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                n.write_json(out);
            }
            out.push(']');
        }
        if self.modified_index != 0 {
            sep(out);
            out.push_str("\"modifiedIndex\":");
            out.push_str(&self.modified_index.to_string());
        }
        if self.created_index != 0 {
            sep(out);
            out.push_str("\"createdIndex\":");
            out.push_str(&self.created_index.to_string());
        }
        out.push('}');
    }

    /// This node's JSON alone.
    #[must_use]
    pub fn to_json(&self) -> String {
        let mut out = String::new();
        self.write_json(&mut out);
        out
    }
}

/// The key as shown to users: the root (`/`) is shown as no key at all.
pub(crate) fn extern_key(path: &str) -> String {
    if path == "/" {
        String::new()
    } else {
        path.to_owned()
    }
}

/// The outcome of a read or a change (etcd's `Event`).
///
/// HTTP: a request answered with an event gets `X-Etcd-Index: {etcd_index}`
/// and status 201 when [`Event::is_created`], else 200; the body is
/// [`Event::to_json`] (or [`Event::to_json_no_value`] when the request had
/// `noValueOnSuccess=true`) followed by `\n`, which the writer adds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// `get`, `set`, `create`, `update`, `delete`, `compareAndSwap`,
    /// `compareAndDelete` or `expire`.
    pub action: String,
    /// The node after the change (for deletes and expiries: the key and its
    /// new modified index only).
    pub node: NodeExtern,
    /// The node before the change, where there was one.
    pub prev_node: Option<NodeExtern>,
    /// The store index the response reports (`X-Etcd-Index`): the index
    /// after the change, or the current index for reads and for events
    /// answered from the history to a watch.
    pub etcd_index: u64,
    /// A TTL refresh: kept in the history but never sent to watchers and
    /// never written to JSON.
    #[serde(default)]
    pub refresh: bool,
}

impl Event {
    pub(crate) fn new(action: &str, key: &str, modified_index: u64, created_index: u64) -> Self {
        Event {
            action: action.to_owned(),
            node: NodeExtern::bare(key, modified_index, created_index),
            prev_node: None,
            etcd_index: 0,
            refresh: false,
        }
    }

    /// The index the event happened at (its node's modified index).
    #[must_use]
    pub fn index(&self) -> u64 {
        self.node.modified_index
    }

    /// Whether the change created the key: a `create`, or a `set` with no
    /// previous node. etcd answers those with 201 Created.
    #[must_use]
    pub fn is_created(&self) -> bool {
        self.action == ACTION_CREATE || (self.action == ACTION_SET && self.prev_node.is_none())
    }

    /// The body etcd writes (without the trailing newline):
    /// `{"action":..,"node":{..},"prevNode":{..}}`.
    #[must_use]
    pub fn to_json(&self) -> String {
        self.json(false)
    }

    /// The body for `noValueOnSuccess=true`: for `set`, `compareAndSwap`,
    /// `create` and `update` only `{"action":".."}`; other actions as
    /// [`Event::to_json`].
    #[must_use]
    pub fn to_json_no_value(&self) -> String {
        self.json(true)
    }

    /// [`Event::to_json`] or [`Event::to_json_no_value`] as the flag says.
    #[must_use]
    pub fn to_http_json(&self, no_value_on_success: bool) -> String {
        self.json(no_value_on_success)
    }

    fn json(&self, no_value_on_success: bool) -> String {
        let strip = no_value_on_success
            && matches!(
                self.action.as_str(),
                ACTION_SET | ACTION_COMPARE_AND_SWAP | ACTION_CREATE | ACTION_UPDATE
            );
        let mut out = String::with_capacity(128);
        out.push_str("{\"action\":");
        push_go_string(&mut out, &self.action);
        if !strip {
            out.push_str(",\"node\":");
            self.node.write_json(&mut out);
            if let Some(prev) = &self.prev_node {
                out.push_str(",\"prevNode\":");
                prev.write_json(&mut out);
            }
        }
        out.push('}');
        out
    }
}
