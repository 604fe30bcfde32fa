//! The batch loader: llm.c's `DataLoader` for one process.
//!
//! The shards matching a glob are read in sorted order. A shard of n tokens holds
//! `(n - 1) / (B·T)` windows; window w is tokens `w·B·T .. w·B·T + B·T + 1`, giving the inputs
//! (the first B·T) and the targets (the last B·T). Without shuffling, batches are the windows
//! in order, shard after shard, and the data wraps around after the last shard. With
//! shuffling, each epoch visits the shards in a seeded random order and each shard's windows
//! in a seeded random order; the orders are recomputed from (seed, epoch, shard), so a
//! [`LoaderPosition`] is the whole state of the loader.

use super::Shard;
use crate::error::{Error, Result};
use crate::rng;
use rand::RngExt;
use std::path::PathBuf;

/// The next batch a loader will return: window `window` (in visiting order) of the `shard`-th
/// shard (in visiting order) of epoch `epoch`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoaderPosition {
    /// Completed passes over the data.
    pub epoch: u64,
    /// Index into this epoch's shard order.
    pub shard: u64,
    /// Index into the current shard's window order.
    pub window: u64,
}

/// Reads batches of B×T inputs and targets from token shards.
#[derive(Debug)]
pub struct DataLoader {
    shards: Vec<Shard>,
    b: usize,
    t: usize,
    vocab_size: usize,
    shuffle_seed: Option<u64>,
    pos: LoaderPosition,
    shard_order: Vec<usize>,
    window_order: Vec<u64>,
    buf: Vec<u16>,
}

/// The files matching `pattern`, sorted; `flag` names the option in error messages.
pub fn glob_files(pattern: &str, flag: &str) -> Result<Vec<PathBuf>> {
    let paths = glob::glob(pattern)
        .map_err(|e| Error::invalid(format!("{flag} '{pattern}' is not a valid glob: {e}")))?;
    let mut files = Vec::new();
    for entry in paths {
        let path = entry.map_err(|e| Error::io(e.path(), std::io::Error::other(e.to_string())))?;
        if path.is_file() {
            files.push(path);
        }
    }
    if files.is_empty() {
        return Err(Error::invalid(format!("{flag} '{pattern}' matches no files")));
    }
    files.sort();
    Ok(files)
}

fn permutation(len: usize, mut stream: rand_pcg::Pcg64) -> Vec<u64> {
    let mut order: Vec<u64> = (0..len as u64).collect();
    for i in (1..len).rev() {
        let j = stream.random_range(0..=i);
        order.swap(i, j);
    }
    order
}

impl DataLoader {
    /// Opens every shard matching `pattern` (named `flag` in errors) for batches of `b × t`
    /// tokens whose ids must be below `vocab_size`; `shuffle_seed` turns shuffling on.
    pub fn open(
        pattern: &str,
        flag: &str,
        b: usize,
        t: usize,
        vocab_size: usize,
        shuffle_seed: Option<u64>,
    ) -> Result<Self> {
        let shards = glob_files(pattern, flag)?
            .iter()
            .map(|path| Shard::open(path))
            .collect::<Result<Vec<_>>>()?;
        let need = b * t + 1;
        if let Some(short) = shards.iter().find(|s| s.num_tokens() < need) {
            return Err(Error::bad_file(
                short.path(),
                format!(
                    "data shorter than one batch: {} tokens, but a batch of B={b} × T={t} needs {need}",
                    short.num_tokens()
                ),
            ));
        }
        let mut loader = Self {
            shards,
            b,
            t,
            vocab_size,
            shuffle_seed,
            pos: LoaderPosition::default(),
            shard_order: Vec::new(),
            window_order: Vec::new(),
            buf: vec![0; need],
        };
        loader.seek(LoaderPosition::default())?;
        Ok(loader)
    }

    fn windows(&self, shard: usize) -> u64 {
        ((self.shards[shard].num_tokens() - 1) / (self.b * self.t)) as u64
    }

    fn current_shard(&self) -> usize {
        self.shard_order[self.pos.shard as usize]
    }

    fn order_shards(&mut self) {
        self.shard_order = match self.shuffle_seed {
            Some(seed) => {
                let stream = rng::stream(seed, &[rng::family::SHARD_ORDER, self.pos.epoch]);
                permutation(self.shards.len(), stream).into_iter().map(|i| i as usize).collect()
            }
            None => (0..self.shards.len()).collect(),
        };
    }

    fn order_windows(&mut self) {
        let shard = self.current_shard();
        self.window_order = match self.shuffle_seed {
            Some(seed) => {
                let stream =
                    rng::stream(seed, &[rng::family::WINDOW_ORDER, self.pos.epoch, shard as u64]);
                permutation(self.windows(shard) as usize, stream)
            }
            None => Vec::new(),
        };
    }

    /// Where the loader stands.
    pub fn position(&self) -> LoaderPosition {
        self.pos
    }

    /// Moves to `pos` (a position of a loader over the same shards and batch shape).
    pub fn seek(&mut self, pos: LoaderPosition) -> Result<()> {
        let valid = (pos.shard as usize) < self.shards.len();
        self.pos = pos;
        if !valid {
            return Err(Error::invalid(format!(
                "data position (epoch {}, shard {}, window {}) is outside the {} shard(s) of the \
                 data",
                pos.epoch,
                pos.shard,
                pos.window,
                self.shards.len()
            )));
        }
        self.order_shards();
        let windows = self.windows(self.current_shard());
        if pos.window > windows {
            return Err(Error::invalid(format!(
                "data position (epoch {}, shard {}, window {}) is outside shard {} ({windows} \
                 batches)",
                pos.epoch,
                pos.shard,
                pos.window,
                self.shards[self.current_shard()].path().display()
            )));
        }
        self.order_windows();
        Ok(())
    }

    /// Moves back to the first batch.
    pub fn reset(&mut self) -> Result<()> {
        self.seek(LoaderPosition::default())
    }

    /// Fills `inputs` and `targets` (B·T each) with the next batch.
    pub fn next_batch(&mut self, inputs: &mut [u32], targets: &mut [u32]) -> Result<()> {
        let bt = self.b * self.t;
        assert!(inputs.len() == bt && targets.len() == bt, "batch buffers must hold B·T tokens");
        while self.pos.window >= self.windows(self.current_shard()) {
            self.pos.window = 0;
            self.pos.shard += 1;
            if self.pos.shard as usize == self.shards.len() {
                self.pos.shard = 0;
                self.pos.epoch += 1;
                self.order_shards();
            }
            self.order_windows();
        }
        let window = match self.window_order.get(self.pos.window as usize) {
            Some(&w) => w,
            None => self.pos.window,
        };
        let start = window as usize * bt;
        let shard = self.current_shard();
        self.shards[shard].read(start, &mut self.buf)?;
        if let Some(i) = self.buf.iter().position(|&tok| usize::from(tok) >= self.vocab_size) {
            return Err(Error::bad_file(
                self.shards[shard].path(),
                format!(
                    "token id {} at position {} is not below the model's vocabulary size {}",
                    self.buf[i],
                    start + i,
                    self.vocab_size
                ),
            ));
        }
        for (dst, src) in inputs.iter_mut().zip(&self.buf[..bt]) {
            *dst = u32::from(*src);
        }
        for (dst, src) in targets.iter_mut().zip(&self.buf[1..]) {
            *dst = u32::from(*src);
        }
        self.pos.window += 1;
        Ok(())
    }

    /// Number of shards.
    pub fn num_shards(&self) -> usize {
        self.shards.len()
    }

    /// Total tokens over all shards.
    pub fn num_tokens(&self) -> u64 {
        self.shards.iter().map(|s| s.num_tokens() as u64).sum()
    }

    /// Batches in one pass over the data.
    pub fn batches_per_epoch(&self) -> u64 {
        (0..self.shards.len()).map(|s| self.windows(s)).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::write_shard;

    /// Two shards whose token i is `base + i` (so a token says where it came from).
    fn shards(dir: &std::path::Path, sizes: &[usize]) -> String {
        for (s, &n) in sizes.iter().enumerate() {
            let tokens: Vec<u16> = (0..n).map(|i| (1000 * s + i) as u16).collect();
            write_shard(&dir.join(format!("d_{s:06}.bin")), &tokens).unwrap();
        }
        dir.join("d_*.bin").to_string_lossy().into_owned()
    }

    fn batches(loader: &mut DataLoader, n: usize) -> Vec<Vec<u32>> {
        let bt = loader.b * loader.t;
        (0..n)
            .map(|_| {
                let (mut x, mut y) = (vec![0; bt], vec![0; bt]);
                loader.next_batch(&mut x, &mut y).unwrap();
                assert!(x.iter().zip(&y).all(|(x, y)| y - x == 1), "targets are inputs shifted");
                x
            })
            .collect()
    }

    #[test]
    fn sequential_windows_advance_by_bt_and_wrap_over_shards() {
        let dir = tempfile::tempdir().unwrap();
        // B·T = 6: shard 0 (20 tokens) has 3 windows, shard 1 (13 tokens) has 2.
        let pattern = shards(dir.path(), &[20, 13]);
        let mut loader = DataLoader::open(&pattern, "--data", 2, 3, 5000, None).unwrap();
        assert_eq!(
            (loader.num_shards(), loader.num_tokens(), loader.batches_per_epoch()),
            (2, 33, 5)
        );
        let starts: Vec<u32> = batches(&mut loader, 6).iter().map(|x| x[0]).collect();
        assert_eq!(starts, [0, 6, 12, 1000, 1006, 0]);
        assert_eq!(loader.position(), LoaderPosition { epoch: 1, shard: 0, window: 1 });
    }

    #[test]
    fn shuffled_order_is_a_seeded_permutation_and_seek_resumes_it() {
        let dir = tempfile::tempdir().unwrap();
        let pattern = shards(dir.path(), &[61, 31, 43]);
        let open = |seed| DataLoader::open(&pattern, "--data", 1, 5, 5000, seed).unwrap();
        let mut loader = open(Some(9));
        let epoch = batches(&mut loader, 26);
        let mut starts: Vec<u32> = epoch.iter().map(|x| x[0]).collect();
        starts.sort();
        let mut sequential: Vec<u32> = batches(&mut open(None), 26).iter().map(|x| x[0]).collect();
        sequential.sort();
        assert_eq!(starts, sequential, "one epoch visits every window once");
        assert_ne!(epoch, batches(&mut open(Some(10)), 26), "the seed changes the order");
        assert_eq!(epoch, batches(&mut open(Some(9)), 26), "the order is reproducible");

        let mut first = open(Some(9));
        let head = batches(&mut first, 30);
        let mut resumed = open(Some(9));
        batches(&mut resumed, 11);
        let pos = resumed.position();
        let mut fresh = open(Some(9));
        fresh.seek(pos).unwrap();
        assert_eq!(batches(&mut fresh, 19), head[11..], "seek reproduces the remaining batches");
    }

    #[test]
    fn bad_data_is_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let pattern = shards(dir.path(), &[20]);
        let err = DataLoader::open(&pattern, "--data", 4, 5, 5000, None).unwrap_err().to_string();
        assert!(err.contains("shorter than one batch") && err.contains("needs 21"), "{err}");
        let mut loader = DataLoader::open(&pattern, "--data", 1, 4, 10, None).unwrap();
        let (mut x, mut y) = (vec![0; 4], vec![0; 4]);
        loader.next_batch(&mut x, &mut y).unwrap();
        let mut loader = DataLoader::open(&pattern, "--data", 1, 12, 10, None).unwrap();
        let (mut x, mut y) = (vec![0; 12], vec![0; 12]);
        let err = loader.next_batch(&mut x, &mut y).unwrap_err().to_string();
        assert!(
            err.contains("token id 10 at position 10") && err.contains("vocabulary size 10"),
            "{err}"
        );
        let missing = dir.path().join("none_*.bin").to_string_lossy().into_owned();
        let err = DataLoader::open(&missing, "--val-data", 1, 4, 10, None).unwrap_err().to_string();
        assert!(err.contains("--val-data") && err.contains("matches no files"), "{err}");
    }
}
