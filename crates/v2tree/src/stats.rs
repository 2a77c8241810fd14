//! Operation counters, as etcd's `/v2/stats/store` reports them.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

/// The counters. Reads count through `&self` (they are atomics); the rest
/// change only under `&mut Store`.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub gets_success: AtomicU64,
    pub gets_fail: AtomicU64,
    pub c: Counters,
}

/// The counters etcd keeps, in the order of its JSON.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[allow(clippy::struct_field_names)]
pub struct Counters {
    /// `getsSuccess`.
    pub gets_success: u64,
    /// `getsFail`.
    pub gets_fail: u64,
    /// `setsSuccess`.
    pub sets_success: u64,
    /// `setsFail`.
    pub sets_fail: u64,
    /// `deleteSuccess`.
    pub delete_success: u64,
    /// `deleteFail`.
    pub delete_fail: u64,
    /// `updateSuccess`.
    pub update_success: u64,
    /// `updateFail`.
    pub update_fail: u64,
    /// `createSuccess`.
    pub create_success: u64,
    /// `createFail`.
    pub create_fail: u64,
    /// `compareAndSwapSuccess`.
    pub compare_and_swap_success: u64,
    /// `compareAndSwapFail`.
    pub compare_and_swap_fail: u64,
    /// `compareAndDeleteSuccess`.
    pub compare_and_delete_success: u64,
    /// `compareAndDeleteFail`.
    pub compare_and_delete_fail: u64,
    /// `expireCount`.
    pub expire_count: u64,
    /// `watchers` (registered watchers right now).
    pub watchers: u64,
}

impl Counters {
    /// etcd's `/v2/stats/store` body (no trailing newline; etcd writes none).
    #[must_use]
    pub fn to_json(&self) -> String {
        format!(
            "{{\"getsSuccess\":{},\"getsFail\":{},\"setsSuccess\":{},\"setsFail\":{},\
             \"deleteSuccess\":{},\"deleteFail\":{},\"updateSuccess\":{},\"updateFail\":{},\
             \"createSuccess\":{},\"createFail\":{},\"compareAndSwapSuccess\":{},\
             \"compareAndSwapFail\":{},\"compareAndDeleteSuccess\":{},\
             \"compareAndDeleteFail\":{},\"expireCount\":{},\"watchers\":{}}}",
            self.gets_success,
            self.gets_fail,
            self.sets_success,
            self.sets_fail,
            self.delete_success,
            self.delete_fail,
            self.update_success,
            self.update_fail,
            self.create_success,
            self.create_fail,
            self.compare_and_swap_success,
            self.compare_and_swap_fail,
            self.compare_and_delete_success,
            self.compare_and_delete_fail,
            self.expire_count,
            self.watchers
        )
    }
}

impl Stats {
    pub fn get_ok(&self) {
        self.gets_success.fetch_add(1, Ordering::Relaxed);
    }

    pub fn get_fail(&self) {
        self.gets_fail.fetch_add(1, Ordering::Relaxed);
    }

    pub fn snapshot(&self, watchers: u64) -> Counters {
        Counters {
            gets_success: self.gets_success.load(Ordering::Relaxed),
            gets_fail: self.gets_fail.load(Ordering::Relaxed),
            watchers,
            ..self.c
        }
    }

    pub fn from_counters(c: Counters) -> Self {
        Stats {
            gets_success: AtomicU64::new(c.gets_success),
            gets_fail: AtomicU64::new(c.gets_fail),
            c,
        }
    }
}
