//! etcd's v2 auth (users, roles, key permissions) and the `/v2/security` API of
//! the v2 auth RFC, as plain deterministic state: no actors, no I/O, no clock.
//!
//! # What this crate owns
//!
//! * [`AuthState`]: the enabled flag, users and roles, and the rules for
//!   changing them ([`AuthState::apply`] of an [`AuthOp`]). Every member applies
//!   the same ops in log order with the op's `now_ms` and ends in the same state.
//! * Key checks for `/v2/keys` ([`AuthState::can_access`]) and who may
//!   administer ([`AuthState::is_root_caller`]).
//! * HTTP planning ([`plan`]) for etcd 3.4's `/v2/auth/...` (status, headers and
//!   bodies byte-identical to etcd 3.4.23, recorded with curl; see
//!   `tests/transcripts/`) and for the RFC's `/v2/security/...`.
//! * Helpers: [`parse_basic`], [`hash_password`] / [`verify_password`] (bcrypt,
//!   blocking), [`authenticate`], [`unauthorized_answer`] (the `/v2/keys` 401).
//!
//! # How the front and the actor use it
//!
//! 1. Caller: `authenticate(&state, authorization_header)` (bcrypt: on a
//!    blocking pool) → [`Caller`]. For `/v2/keys`, refuse with
//!    [`unauthorized_answer`] unless `state.can_access(&caller, key, write,
//!    recursive)` (`write` = method other than GET/HEAD).
//! 2. `/v2/auth` and `/v2/security`: `plan(&state, api, method, sub_path, body,
//!    &caller)`. [`Plan::Answer`]: write it. [`Plan::Propose`]: if `hash_first`
//!    is `Some(pw)`, `op = op.with_hash(hash_password(&pw, ETCD_BCRYPT_COST)?)`
//!    (on error reply `render.render(Err(e))`); propose `op.encode()`; the
//!    actor decodes ([`AuthOp::decode`]) and applies it with the entry's time;
//!    reply `render.render(result)`.
//! 3. [`HttpAnswer`] holds the headers etcd's handlers set themselves; the front
//!    adds `Date`, `Content-Length`, its CORS headers, and `X-Etcd-Cluster-Id`
//!    when [`HttpAnswer::cluster_id`] is true (etcd omits it on 405s, "Invalid
//!    path", mux 404s and the admin 401).
//!
//! # Invariants
//!
//! * The `root` role is built in: never stored in `roles`, always found by
//!   [`AuthState::role`], listed by [`AuthState::role_names`], grants every key,
//!   and cannot be created, updated or deleted ("Cannot modify role root: is
//!   root role.", 403).
//! * The `root` user, whenever it exists, holds the `root` role (added on
//!   create; a `/v2/auth` revoke is echoed as etcd echoes it but the role stays,
//!   as etcd re-attaches it on every read).
//! * `enabled` implies the `root` user exists: enabling needs it ("No root user
//!   available, please create one", 409) and deleting it while enabled is refused
//!   (403). Enabling creates `guest` with read and write `/*` if absent, and
//!   never overwrites an existing `guest`.
//! * A failed `apply` leaves the state untouched. Hashes only, never passwords.
//! * Users may name roles that do not exist (etcd allows it on `/v2/auth`;
//!   deleting a role leaves it in users' lists); such roles grant nothing.
//! * Nothing reachable from input panics: the glob matcher is an NFA (no
//!   recursion), JSON parse failures become 400s, bad snapshots an error.
//!
//! # Layout (one file per concern)
//!
//! * `error.rs`: [`AuthError`], etcd's message texts and HTTP statuses.
//! * `model.rs`: [`AuthState`], [`User`], [`Role`], built-ins, snapshots, [`rfc3339_ms`].
//! * `ops.rs`: [`AuthOp`], [`Answer`], [`AuthState::apply`].
//! * `glob.rs`: the RFC's key patterns ([`glob::glob_match`],
//!   [`glob::glob_covers_subtree`]) and etcd's rules for comparison.
//! * `access.rs`: [`Caller`], `can_access`, `is_root_caller`, Basic auth, bcrypt.
//! * `http.rs`: [`plan`], [`Plan`], [`Render`], [`HttpAnswer`], both APIs' JSON.
//! * `json.rs`: a JSON string writer with Go's escaping (`<` → `\u003c` ...).
//!
//! # Persistence
//!
//! [`AuthState::save`] writes `{"version":1,"state":{"enabled":..,"users":{NAME:
//! {"name","password_hash","roles":[..],"last_modified"}},"roles":{NAME:{"name",
//! "read":[..],"write":[..],"last_modified"}}}}` (serde JSON of the structs;
//! `read_unset` / `write_unset` / `roles_uncanonical` appear only when true).
//! [`AuthState::recover`] checks the version and the invariants above. Ops travel
//! as serde JSON of [`AuthOp`] (externally tagged, e.g. `{"DeleteUser":{"name":"a"}}`).
//!
//! # The `/v2/security` API (RFC)
//!
//! Root callers only (403 `ErrForbidden` otherwise, including bad credentials),
//! except while auth is disabled, when it is open like etcd's `/v2/auth`. Errors
//! are the RFC's `{"name":"ErrXxx","description":"<etcd's message>"}` with
//! etcd's status for the same refusal. Endpoints: `GET|HEAD /users` →
//! `{"users":[names]}` + list `ETag`; `GET|HEAD /users/N` → `{"user","roles",
//! "lastModified"}` + `ETag: "users/N:<lastModified>"`; `PUT /users/N`
//! (`{"user"?,"password","roles"?}`) → 201 empty + ETag, 409 if it exists, 409 for
//! an unknown role; `DELETE /users/N`; `PUT /users/N/grant` (`grantRoles` or
//! `grant`), `/revoke` (`revokeRoles` or `revoke`), `/password` → 200 user JSON +
//! ETag; `GET|HEAD /roles` → names (with `root`); `GET|HEAD /roles/N` →
//! `{"role","permissions":{"kv":{"read","write"}},"members","lastModified"}`;
//! `PUT /roles/N` → 201 role JSON; `PUT /roles/N/update` (`grant` / `revoke`
//! permission deltas) → 200 role JSON; `DELETE /roles/N`. Other paths: 404
//! `ErrNotFound`; other methods: 405 with `Allow`.
//!
//! # Where the RFC and shipped etcd disagree, and what we do
//!
//! 1. **Patterns.** RFC: `*` is a greedy wildcard anywhere, `\` escapes, the
//!    whole key must match. etcd 3.4 (`simpleMatch`): only a final `*` is
//!    special (prefix match); a `*` elsewhere and `\` are literal bytes. We follow
//!    the RFC; for every pattern without `\` whose only `*` is the last byte the
//!    two agree (tested exhaustively on a small alphabet), so etcd-style patterns
//!    keep their meaning. `/foo/*/bar` and `\*` differ.
//! 2. **Recursive access.** etcd: only a pattern ending in `*` whose prefix
//!    starts the key. We: the pattern must match the key followed by *any*
//!    suffix (the whole subtree); identical to etcd for trailing-star patterns.
//!    Anonymous (guest) checks ignore `recursive`, as in etcd.
//! 3. **Root user.** RFC: a default `root` with password `root`. etcd: no
//!    default; enabling without a root user fails (409). We: etcd.
//! 4. **Enabling.** RFC: TBD (maybe a restart). etcd: `PUT|DELETE
//!    /v2/auth/enable`. We: etcd; `/v2/security` has no enable endpoint.
//! 5. **Anonymous callers.** RFC silent. etcd: the `guest` role (created
//!    `/*` read+write on enable); bad credentials never fall back to it. We: etcd.
//! 6. **Refusals.** RFC: 403 Forbidden. etcd: 401 — `{"message":"Insufficient
//!    credentials"}` on `/v2/auth`, `{"errorCode":110,...}` plus `X-Etcd-Index: 0`
//!    on `/v2/keys` — and no `WWW-Authenticate` header (checked with curl). We:
//!    etcd on `/v2/auth` and `/v2/keys`, 403 on `/v2/security`.
//! 7. **Error bodies.** RFC `{"name","description"}`, etcd `{"message"}`: each
//!    API keeps its own.
//! 8. **Listings.** RFC: names only, with an ETag. etcd: `{"users":[{"user",
//!    "roles":[full roles]}]}` (`null` when empty), `{"roles":[full roles]}`. Each
//!    API keeps its own.
//! 9. **Role JSON.** The RFC's GET example (`read.prefixesAllowed`) contradicts
//!    its own full structure (`permissions.kv`); we use `permissions.kv` and add
//!    `members` and `lastModified`.
//! 10. **Creating users.** RFC: PUT creates, 409 if it exists. etcd: PUT without
//!     roles creates (201) or, if the user exists, updates the password (200);
//!     PUT with roles creates and answers 200; an empty password is 400. Each API
//!     keeps its own.
//! 11. **Unknown roles.** RFC: granting one is 409. etcd: accepted silently (a
//!     later GET of the user is 404 "Role X does not exist."). We: refused on
//!     `/v2/security` ([`AuthError::GrantUnknownRole`]), accepted on `/v2/auth`.
//! 12. **Revoking root from root.** etcd: 200, and the role comes back. We: the
//!     same on `/v2/auth`; 409 "cannot revoke root role from root user" on
//!     `/v2/security`.
//! 13. **lastModified / ETag.** RFC only (its example timestamp
//!     `2015-02-05Z18:00:00` is malformed); we use RFC 3339 UTC with
//!     milliseconds from the op's `now_ms`; list ETags are an FNV-1a hash of the
//!     names. The built-in root role's time is the epoch.
//! 14. **The RFC's workflow** grants `/rocket/`, meaning a prefix; under its own
//!     glob rules that names one key, so the workflow test grants `/rocket/*`.
//! 15. **Not implemented** (RFC TBD): the `manage` permission, settings
//!     resources, DENY rules, other auth schemes.
//! 16. **Empty patterns.** Neither defines them; etcd stores one and then
//!     panics on the next key check. We refuse it when granted (400
//!     [`AuthError::EmptyPattern`]).
//!
//! # Where we knowingly differ from etcd 3.4 on `/v2/auth`
//!
//! * A role created with a stray (empty) `grant`/`revoke` object: the create
//!   reply echoes it as etcd does, but later reads do not show it (etcd stores it).
//! * A user's roles are a sorted set: etcd keeps a new user's list in request
//!   order (and appends `root` last on reads) until its first update. The one
//!   visible effect etcd's comparison has (a no-op update of such a user succeeds
//!   once) is reproduced via [`User::roles_uncanonical`].
//! * JSON field names match exactly (Go's decoder is case-insensitive); Go's
//!   mux 301 redirects for unclean paths are the front's business; client
//!   certificate (CN) auth maps to [`Caller::User`] in the front.
//! * `X-Etcd-Cluster-Id`, CORS headers, `Date`, `Content-Length` come from the front.

pub mod access;
pub mod error;
pub mod glob;
pub mod http;
mod json;
pub mod model;
pub mod ops;

pub use access::{
    Caller, ETCD_BCRYPT_COST, MIN_BCRYPT_COST, authenticate, hash_password, parse_basic,
    verify_password,
};
pub use error::AuthError;
pub use http::{
    Api, HttpAnswer, Plan, Proposal, Render, plan, unauthorized_answer, unauthorized_json,
};
pub use model::{AuthState, GUEST_ROLE, ROOT_ROLE, ROOT_USER, Role, User, rfc3339_ms};
pub use ops::{Answer, AuthOp, PermDelta};
