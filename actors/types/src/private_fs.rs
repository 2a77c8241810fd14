//! Directories and files only the member's own user may read: etcd's `PrivateDirMode` (0700)
//! and `PrivateFileMode` (0600), CVE-2020-15113. The data directory holds every value, the
//! bcrypt hashes and the tokens of live logins.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Mode of the directories a member creates.
pub const PRIVATE_DIR_MODE: u32 = 0o700;
/// Mode of the files a member creates.
pub const PRIVATE_FILE_MODE: u32 = 0o600;

/// etcd's `TouchDirAll`: creates `dir` and its missing parents with mode 0700. A `dir` that
/// already exists keeps its permission; if that is not 0700, the answer is etcd's warning text
/// (etcd 3.4.13 and later warn rather than refuse), for the caller to log.
pub fn touch_private_dir(dir: &Path) -> io::Result<Option<String>> {
    DirBuilder::new()
        .recursive(true)
        .mode(PRIVATE_DIR_MODE)
        .create(dir)?;
    let mode = std::fs::metadata(dir)?.permissions().mode() & 0o777;
    Ok((mode != PRIVATE_DIR_MODE).then(|| {
        format!(
            "directory {:?} exist, but the permission is {:?}. The recommended permission is {:?} to prevent possible unprivileged access to the data",
            dir.display().to_string(),
            go_mode(true, mode),
            go_mode(false, PRIVATE_DIR_MODE),
        )
    }))
}

/// Opens `path` for writing, created with mode 0600 if it does not exist (`truncate` empties
/// an existing one).
pub fn create_private_file(path: &Path, truncate: bool) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(truncate)
        .mode(PRIVATE_FILE_MODE)
        .open(path)
}

/// Go's `FileMode.String()` for a permission: `drwxr-xr-x`, `-rwx------`.
fn go_mode(dir: bool, mode: u32) -> String {
    let mut s = String::from(if dir { "d" } else { "-" });
    for shift in [6, 3, 0] {
        let bits = (mode >> shift) & 7;
        s.push(if bits & 4 != 0 { 'r' } else { '-' });
        s.push(if bits & 2 != 0 { 'w' } else { '-' });
        s.push(if bits & 1 != 0 { 'x' } else { '-' });
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_directories_and_files_are_private_and_wider_ones_are_reported() {
        let root = tempfile::tempdir().unwrap();
        let deep = root.path().join("a/b/c");
        assert_eq!(touch_private_dir(&deep).unwrap(), None);
        for d in [root.path().join("a"), root.path().join("a/b"), deep.clone()] {
            let mode = std::fs::metadata(&d).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o700, "{}", d.display());
        }
        let file = deep.join("f");
        drop(create_private_file(&file, true).unwrap());
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);

        let wide = root.path().join("wide");
        std::fs::create_dir(&wide).unwrap();
        std::fs::set_permissions(&wide, std::fs::Permissions::from_mode(0o755)).unwrap();
        let warning = touch_private_dir(&wide).unwrap().expect("a warning");
        assert_eq!(
            warning,
            format!(
                "directory {:?} exist, but the permission is \"drwxr-xr-x\". The recommended permission is \"-rwx------\" to prevent possible unprivileged access to the data",
                wide.display().to_string()
            )
        );
        // Kept as it was, as etcd keeps it.
        let mode = std::fs::metadata(&wide).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o755);
    }
}
