//! # actcd-auth — users, roles, range permissions, passwords and tokens
//!
//! (Being written: see issue 5.)
