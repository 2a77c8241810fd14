//! etcd v2 auth (doc to come).

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
pub use http::{Api, HttpAnswer, Plan, Render, plan, unauthorized_answer, unauthorized_json};
pub use model::{AuthState, GUEST_ROLE, ROOT_ROLE, ROOT_USER, Role, User, rfc3339_ms};
pub use ops::{Answer, AuthOp, PermDelta};
