//! bcrypt, as etcd stores passwords. Both calls are slow on purpose: callers run them on a
//! blocking pool, never on an actor thread.

use actcd_types::EtcdError;

/// etcd's `--bcrypt-cost` default (Go's `bcrypt.DefaultCost`).
pub const DEFAULT_COST: u32 = 10;

/// The costs bcrypt accepts (Go's `MinCost`..=`MaxCost`).
pub fn check_cost(cost: u32) -> Result<(), String> {
    if (4..=31).contains(&cost) {
        Ok(())
    } else {
        Err(format!("bcrypt cost must be between 4 and 31, got {cost}"))
    }
}

/// A bcrypt hash of `password` (the `$2b$…` text). Passwords are bytes, as etcd takes them
/// (Go never checks a protobuf `string` for UTF-8).
pub fn hash_password(password: impl AsRef<[u8]>, cost: u32) -> Result<String, EtcdError> {
    bcrypt::hash(password.as_ref(), cost).map_err(EtcdError::internal)
}

/// Whether `password` matches the stored `hash`; a malformed hash matches nothing.
pub fn verify_password(password: impl AsRef<[u8]>, hash: &[u8]) -> bool {
    std::str::from_utf8(hash)
        .ok()
        .and_then(|h| bcrypt::verify(password.as_ref(), h).ok())
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_verify_and_costs_are_bounded() {
        let h = hash_password("secret", 4).unwrap();
        assert!(verify_password("secret", h.as_bytes()));
        assert!(!verify_password("Secret", h.as_bytes()));
        assert!(!verify_password("secret", b"not a hash"));
        assert!(!verify_password("", b""));
        let h = hash_password(b"p\xff", 4).unwrap();
        assert!(verify_password(b"p\xff", h.as_bytes()), "not UTF-8");
        assert!(
            !verify_password("p\u{FFFD}", h.as_bytes()),
            "its look-alike"
        );
        assert!(check_cost(10).is_ok());
        assert!(check_cost(3).is_err());
        assert!(check_cost(32).is_err());
    }
}
