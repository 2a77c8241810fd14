//! Tests of `process.rs`, the Go process collector's numbers (its `tests` module, included by
//! `#[path]`).

use super::*;

#[test]
fn proc_files_give_the_go_clients_process_metrics() {
    let stat = "4242 (act cd) S 1 4242 4242 0 -1 4194560 900 0 0 0 150 50 0 0 20 0 9 0 \
                    12345 745517056 7764 18446744073709551615";
    let status = "Name:\tactcd\nVmSize:\t  728044 kB\nVmRSS:\t   31056 kB\n";
    let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max open files            20000                20000                files\n\
                      Max address space         unlimited            unlimited            bytes\n";
    let system = "cpu  1 2 3\nbtime 1795630000\n";
    let s = ProcessStats::parse(stat, status, limits, system);
    assert_eq!(s.cpu_seconds, 2.0);
    assert_eq!(s.start_time_seconds, 1795630000.0 + 123.45);
    assert_eq!(s.virtual_bytes, 728044.0 * 1024.0);
    assert_eq!(s.resident_bytes, 31056.0 * 1024.0);
    assert_eq!(s.max_fds, 20000.0);
    assert_eq!(s.virtual_max_bytes, u64::MAX as f64);
}
