//! The checker's errors, with etcd's texts.

/// Why a member refuses to start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CorruptError {
    /// etcd's initial check failure; `details` names each peer that disagrees.
    #[error("{member:x} found data inconsistency with peers ({details})")]
    Inconsistent { member: u64, details: String },
    #[error("{member:x} failed to fetch hash ({reason})")]
    LocalHash { member: u64, reason: String },
    #[error("the corruption checker stopped")]
    Stopped,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_member_as_etcd_does() {
        let e = CorruptError::Inconsistent {
            member: 0x8e9e05c52164694d,
            details: "peer 2 hash 1 != local hash 2".into(),
        };
        assert_eq!(
            e.to_string(),
            "8e9e05c52164694d found data inconsistency with peers (peer 2 hash 1 != local hash 2)"
        );
    }
}
