//! [`OpLog`]: the auth store's writes, recorded instead of written.
//!
//! The backend actor is the environment's only writer, and the consistent index must commit
//! with the writes of the entries it covers. So the auth actor writes nothing itself: applying
//! an auth request writes into an `OpLog`, whose ops the applier hands to the MVCC store with
//! its next batch (`ApplyBatch.ops`), into the same backend commit as that batch's consistent
//! index. The store keeps its whole state in memory and never reads its tables back after
//! start-up (or a reload), so a log that cannot be read is enough: no write buffer has to
//! outlive the batch, and nothing waits for the backend's `Committed`.

use actcd_types::storage::{Op, ReadTxn, ScanFn, StorageError, StorageResult, Table, WriteTxn};

/// A write transaction that records its writes, in order, and reads nothing.
#[derive(Debug, Default)]
pub struct OpLog {
    ops: Vec<Op>,
}

impl OpLog {
    pub fn into_ops(self) -> Vec<Op> {
        self.ops
    }
}

fn no_reads() -> StorageError {
    StorageError("auth: the op log reads nothing back".into())
}

impl ReadTxn for OpLog {
    fn get(&self, _: Table, _: &[u8]) -> StorageResult<Option<Vec<u8>>> {
        Err(no_reads())
    }

    fn scan(&self, _: Table, _: &[u8], _: Option<&[u8]>, _: &mut ScanFn<'_>) -> StorageResult<()> {
        Err(no_reads())
    }
}

impl WriteTxn for OpLog {
    fn put(&mut self, table: Table, key: &[u8], value: &[u8]) -> StorageResult<()> {
        self.ops.push(Op::Put {
            table,
            key: key.to_vec(),
            value: value.into(),
        });
        Ok(())
    }

    fn delete(&mut self, table: Table, key: &[u8]) -> StorageResult<()> {
        self.ops.push(Op::Delete {
            table,
            key: key.to_vec(),
        });
        Ok(())
    }

    fn commit(self: Box<Self>) -> StorageResult<()> {
        Ok(())
    }
}
