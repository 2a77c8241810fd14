//! The process metrics of Go's client_golang process collector (`process_*`), and etcd's
//! `os_fd_limit` and `os_fd_used`, read from Linux's `/proc` as Go's procfs reads it.

use crate::text::single;

/// What `/proc/self` says about this process, as the Go client's process collector reads it.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ProcessStats {
    pub cpu_seconds: f64,
    pub open_fds: f64,
    pub max_fds: f64,
    pub virtual_bytes: f64,
    pub virtual_max_bytes: f64,
    pub resident_bytes: f64,
    pub start_time_seconds: f64,
}

/// Linux's `USER_HZ`, which the Go client's procfs takes as fixed too.
const USER_HZ: f64 = 100.0;

impl ProcessStats {
    /// Reads `/proc/self`; fields it can't read stay 0.
    pub fn read() -> Self {
        let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        let mut s = Self::parse(
            &read("/proc/self/stat"),
            &read("/proc/self/status"),
            &read("/proc/self/limits"),
            &read("/proc/stat"),
        );
        s.open_fds = std::fs::read_dir("/proc/self/fd").map_or(0.0, |d| d.count() as f64);
        s
    }

    /// The numbers out of the texts of `/proc/self/stat`, `/proc/self/status`,
    /// `/proc/self/limits` and `/proc/stat`.
    pub fn parse(stat: &str, status: &str, limits: &str, system: &str) -> Self {
        let mut s = Self::default();
        // Fields after the command name (which may hold spaces), from field 3 (state) on.
        let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
        let f: Vec<&str> = after.split_whitespace().collect();
        let num = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
        s.cpu_seconds = (num(11) + num(12)) / USER_HZ;
        let boot = system
            .lines()
            .find_map(|l| l.strip_prefix("btime "))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(0.0);
        s.start_time_seconds = boot + num(19) / USER_HZ;
        let kb = |key: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse::<f64>().ok())
                .map_or(0.0, |v| v * 1024.0)
        };
        s.virtual_bytes = kb("VmSize:");
        s.resident_bytes = kb("VmRSS:");
        let soft = |key: &str| {
            limits
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.split_whitespace().next())
                .map_or(0.0, |v| {
                    if v == "unlimited" {
                        u64::MAX as f64
                    } else {
                        v.parse::<f64>().unwrap_or(0.0)
                    }
                })
        };
        s.max_fds = soft("Max open files");
        s.virtual_max_bytes = soft("Max address space");
        s
    }

    /// The Go collector's families, in its order, then etcd's pair from the same numbers.
    pub fn render(&self, out: &mut String) {
        single(
            out,
            "process_cpu_seconds_total",
            "counter",
            "Total user and system CPU time spent in seconds.",
            self.cpu_seconds,
        );
        single(
            out,
            "process_max_fds",
            "gauge",
            "Maximum number of open file descriptors.",
            self.max_fds,
        );
        single(
            out,
            "process_open_fds",
            "gauge",
            "Number of open file descriptors.",
            self.open_fds,
        );
        single(
            out,
            "process_resident_memory_bytes",
            "gauge",
            "Resident memory size in bytes.",
            self.resident_bytes,
        );
        single(
            out,
            "process_start_time_seconds",
            "gauge",
            "Start time of the process since unix epoch in seconds.",
            self.start_time_seconds,
        );
        single(
            out,
            "process_virtual_memory_bytes",
            "gauge",
            "Virtual memory size in bytes.",
            self.virtual_bytes,
        );
        single(
            out,
            "process_virtual_memory_max_bytes",
            "gauge",
            "Maximum amount of virtual memory available in bytes.",
            self.virtual_max_bytes,
        );
        // etcd's own pair, from the same numbers.
        single(
            out,
            "os_fd_limit",
            "gauge",
            "The file descriptor limit.",
            self.max_fds,
        );
        single(
            out,
            "os_fd_used",
            "gauge",
            "The number of used file descriptors.",
            self.open_fds,
        );
    }
}

#[cfg(test)]
#[path = "process_tests.rs"]
mod tests;
