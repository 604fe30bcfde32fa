//! Checkpoints: llm.c model files and this trainer's optimizer-state files.
//!
//! A model checkpoint is llm.c's format: 256 little-endian i32 (magic 20240326, version 3
//! for f32 or 5 for bf16, maxT, V, L, NH, C, Vp, zeros), then the 16 parameter tensors in
//! [`crate::model::ParamKind::ALL`] order. Both versions are written and read; training
//! checkpoints are version 3 (the f32 master weights, which a bit-exact resume needs), and
//! `trainer convert` writes version 5 (bf16, rounded to nearest even: what llm.c's bf16 build
//! loads).
//!
//! An optimizer-state file holds what a bit-exact resume needs beyond the parameters: a
//! header of 128 little-endian u64 ([`STATE_MAGIC`], version 1, parameter count, completed
//! steps, B, T, accumulation steps, shuffle flag, seed, loader epoch / shard / window, train
//! shards and tokens, the fp16 loss scale as f32 bits (0: none) and its clean-step count,
//! zeros), then AdamW's m and v as f32 in parameter order. The data
//! loader's orders are derived from (seed, epoch, shard), so these integers are its whole
//! RNG state.
//!
//! A checkpoint directory holds `model_NNNNNNNN.bin` and `state_NNNNNNNN.bin`, NNNNNNNN
//! being the number of completed steps. Every file is written atomically.

use crate::backend::check_host_memory;
use crate::data::LoaderPosition;
use crate::error::{Error, Result};
use crate::io::{
    open_regular, read_bf16s_into, read_f32s_into, read_i32s, write_atomic, write_f32s, write_i32s,
    write_u16s,
};
use crate::model::{Gpt2Config, Params};
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

/// First header value of an llm.c model checkpoint.
pub const MODEL_MAGIC: i32 = 20_240_326;
/// Checkpoint version with f32 parameters.
pub const VERSION_F32: i32 = 3;
/// Checkpoint version with bf16 parameters.
pub const VERSION_BF16: i32 = 5;
/// First header value of an optimizer-state file.
pub const STATE_MAGIC: u64 = 20_250_601;
/// The optimizer-state format version.
pub const STATE_VERSION: u64 = 1;
const MODEL_HEADER_INTS: usize = 256;
const STATE_HEADER_WORDS: usize = 128;

/// Parameters and dimensions read from a model checkpoint.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelCheckpoint {
    /// The model's dimensions.
    pub config: Gpt2Config,
    /// The parameters, widened to f32.
    pub params: Params<Vec<f32>>,
    /// The element type the file stored them in.
    pub dtype: ModelDtype,
}

fn open(path: &Path) -> Result<(BufReader<File>, u64)> {
    let (file, size) = open_regular(path)?;
    Ok((BufReader::new(file), size))
}

/// The element type of a model checkpoint's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelDtype {
    /// f32, llm.c version 3.
    F32,
    /// bf16 (rounded to nearest even), llm.c version 5.
    Bf16,
}

impl ModelDtype {
    /// The llm.c checkpoint version of this element type.
    pub fn version(self) -> i32 {
        match self {
            Self::F32 => VERSION_F32,
            Self::Bf16 => VERSION_BF16,
        }
    }

    /// The element type of checkpoint `version`, if it is one this crate knows.
    pub fn of_version(version: i32) -> Option<Self> {
        match version {
            VERSION_F32 => Some(Self::F32),
            VERSION_BF16 => Some(Self::Bf16),
            _ => None,
        }
    }

    fn bytes(self) -> u64 {
        match self {
            Self::F32 => 4,
            Self::Bf16 => 2,
        }
    }
}

/// Writes an llm.c checkpoint with parameters of `dtype`, atomically.
pub fn write_model(
    path: &Path,
    config: &Gpt2Config,
    params: &Params<Vec<f32>>,
    dtype: ModelDtype,
) -> Result<()> {
    let mut header = [0i32; MODEL_HEADER_INTS];
    let dims = [
        config.max_seq_len,
        config.vocab_size,
        config.num_layers,
        config.num_heads,
        config.channels,
        config.padded_vocab_size,
    ];
    header[0] = MODEL_MAGIC;
    header[1] = dtype.version();
    for (slot, dim) in header[2..8].iter_mut().zip(dims) {
        *slot = i32::try_from(dim).map_err(|_| {
            Error::invalid(format!("model dimension {dim} does not fit a checkpoint"))
        })?;
    }
    write_atomic(path, |w| {
        write_i32s(w, &header)?;
        params.0.iter().try_for_each(|tensor| match dtype {
            ModelDtype::F32 => write_f32s(w, tensor),
            ModelDtype::Bf16 => {
                let bits: Vec<u16> =
                    tensor.iter().map(|&x| half::bf16::from_f32(x).to_bits()).collect();
                write_u16s(w, &bits)
            }
        })
    })
}

/// Reads an llm.c checkpoint (version 3 or 5), checking header and size.
pub fn read_model(path: &Path) -> Result<ModelCheckpoint> {
    let (mut input, size) = open(path)?;
    let header_bytes = 4 * MODEL_HEADER_INTS as u64;
    if size < header_bytes {
        return Err(Error::bad_file(
            path,
            format!("truncated checkpoint: {size} bytes, less than the {header_bytes}-byte header"),
        ));
    }
    let header = read_i32s(&mut input, MODEL_HEADER_INTS).map_err(|e| Error::io(path, e))?;
    if header[0] != MODEL_MAGIC {
        return Err(Error::bad_file(
            path,
            format!("not an llm.c model checkpoint (magic {}, expected {MODEL_MAGIC})", header[0]),
        ));
    }
    let Some(dtype) = ModelDtype::of_version(header[1]) else {
        return Err(Error::bad_file(
            path,
            format!(
                "unsupported checkpoint version {} (3 = f32 and 5 = bf16 are supported)",
                header[1]
            ),
        ));
    };
    let dim = |i: usize, name: &str| {
        usize::try_from(header[i]).map_err(|_| {
            Error::bad_file(path, format!("corrupt checkpoint header: {name} = {}", header[i]))
        })
    };
    let config = Gpt2Config {
        max_seq_len: dim(2, "maxT")?,
        vocab_size: dim(3, "V")?,
        num_layers: dim(4, "L")?,
        num_heads: dim(5, "NH")?,
        channels: dim(6, "C")?,
        padded_vocab_size: dim(7, "Vp")?,
    };
    config
        .validate()
        .map_err(|e| Error::bad_file(path, format!("corrupt checkpoint header: {e}")))?;
    let expected = header_bytes + dtype.bytes() * config.num_params() as u64;
    if size != expected {
        let what = if size < expected { "truncated" } else { "corrupt" };
        return Err(Error::bad_file(
            path,
            format!(
                "{what} checkpoint (or a corrupt header): a {} model needs {expected} bytes but \
                 the file has {size}",
                config.describe()
            ),
        ));
    }
    check_host_memory("the checkpoint's parameters", config.num_params() * 4)?;
    let params = Params::try_from_fn(|kind| {
        let mut tensor = vec![0.0f32; kind.len(&config)];
        let read = match dtype {
            ModelDtype::F32 => read_f32s_into,
            ModelDtype::Bf16 => read_bf16s_into,
        };
        read(&mut input, &mut tensor).map_err(|e| Error::io(path, e))?;
        Ok::<_, Error>(tensor)
    })?;
    Ok(ModelCheckpoint { config, params, dtype })
}

/// Everything besides the parameters that a bit-exact resume needs.
#[derive(Clone, Debug, PartialEq)]
pub struct OptimizerState {
    /// Completed optimizer steps (the next step to run).
    pub step: u64,
    /// Micro-batch size B of the run.
    pub batch_size: u64,
    /// Sequence length T of the run.
    pub seq_len: u64,
    /// Micro-batches per step.
    pub grad_accum_steps: u64,
    /// Whether the training data was shuffled.
    pub shuffle: bool,
    /// The run's seed (with `data_position`, the loader's RNG state).
    pub seed: u64,
    /// The training loader's position.
    pub data_position: LoaderPosition,
    /// Number of training shards (to detect a resume on other data).
    pub data_shards: u64,
    /// Number of training tokens (to detect a resume on other data).
    pub data_tokens: u64,
    /// The fp16 loss scaler's scale and clean-step count, if the run has one.
    pub loss_scale: Option<(f32, u32)>,
    /// AdamW first moments.
    pub m: Params<Vec<f32>>,
    /// AdamW second moments.
    pub v: Params<Vec<f32>>,
}

/// Writes an optimizer-state file, atomically.
pub fn write_state(path: &Path, config: &Gpt2Config, state: &OptimizerState) -> Result<()> {
    let mut header = [0u64; STATE_HEADER_WORDS];
    let pos = state.data_position;
    let fields = [
        STATE_MAGIC,
        STATE_VERSION,
        config.num_params() as u64,
        state.step,
        state.batch_size,
        state.seq_len,
        state.grad_accum_steps,
        u64::from(state.shuffle),
        state.seed,
        pos.epoch,
        pos.shard,
        pos.window,
        state.data_shards,
        state.data_tokens,
        state.loss_scale.map_or(0, |(scale, _)| u64::from(scale.to_bits())),
        state.loss_scale.map_or(0, |(_, clean)| u64::from(clean)),
    ];
    header[..fields.len()].copy_from_slice(&fields);
    let bytes: Vec<u8> = header.iter().flat_map(|w| w.to_le_bytes()).collect();
    write_atomic(path, |w| {
        std::io::Write::write_all(w, &bytes)?;
        state.m.0.iter().chain(&state.v.0).try_for_each(|tensor| write_f32s(w, tensor))
    })
}

/// Reads an optimizer-state file written for a model of `config`.
pub fn read_state(path: &Path, config: &Gpt2Config) -> Result<OptimizerState> {
    let (mut input, size) = open(path)?;
    let header_bytes = 8 * STATE_HEADER_WORDS as u64;
    if size < header_bytes {
        return Err(Error::bad_file(
            path,
            format!(
                "truncated optimizer state: {size} bytes, less than the {header_bytes}-byte header"
            ),
        ));
    }
    let mut raw = vec![0u8; header_bytes as usize];
    input.read_exact(&mut raw).map_err(|e| Error::io(path, e))?;
    let h: Vec<u64> = raw
        .chunks_exact(8)
        .map(|b| u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
        .collect();
    if h[0] != STATE_MAGIC {
        return Err(Error::bad_file(
            path,
            format!("not an optimizer-state file (magic {}, expected {STATE_MAGIC})", h[0]),
        ));
    }
    if h[1] != STATE_VERSION {
        return Err(Error::bad_file(
            path,
            format!("unsupported optimizer-state version {} (expected {STATE_VERSION})", h[1]),
        ));
    }
    let n = config.num_params() as u64;
    if h[2] != n {
        return Err(Error::bad_file(
            path,
            format!("optimizer state is for {} parameters, the model has {n}", h[2]),
        ));
    }
    let expected = header_bytes + 8 * n;
    if size != expected {
        let what = if size < expected { "truncated" } else { "corrupt" };
        return Err(Error::bad_file(
            path,
            format!("{what} optimizer state: expected {expected} bytes, the file has {size}"),
        ));
    }
    let mut read_moments = || {
        Params::try_from_fn(|kind| {
            let mut tensor = vec![0.0f32; kind.len(config)];
            read_f32s_into(&mut input, &mut tensor).map_err(|e| Error::io(path, e))?;
            Ok::<_, Error>(tensor)
        })
    };
    let corrupt = |what: String| Error::bad_file(path, format!("corrupt optimizer state: {what}"));
    if h[7] > 1 {
        return Err(corrupt(format!("shuffle flag {}, not 0 or 1", h[7])));
    }
    let loss_scale = match (h[14], h[15]) {
        (0, _) => None,
        (bits, clean) if bits <= u64::from(u32::MAX) && clean <= u64::from(u32::MAX) => {
            let scale = f32::from_bits(bits as u32);
            if !(scale.is_finite() && scale > 0.0) {
                return Err(corrupt(format!("fp16 loss scale {scale}, not positive and finite")));
            }
            Some((scale, clean as u32))
        }
        (bits, clean) => {
            return Err(corrupt(format!(
                "fp16 loss-scale words {bits} and {clean} exceed 32 bits"
            )));
        }
    };
    let m = read_moments()?;
    let v = read_moments()?;
    Ok(OptimizerState {
        step: h[3],
        batch_size: h[4],
        seq_len: h[5],
        grad_accum_steps: h[6],
        shuffle: h[7] != 0,
        seed: h[8],
        data_position: LoaderPosition { epoch: h[9], shard: h[10], window: h[11] },
        data_shards: h[12],
        data_tokens: h[13],
        loss_scale,
        m,
        v,
    })
}

/// `dir/model_NNNNNNNN.bin`.
pub fn model_path(dir: &Path, step: u64) -> PathBuf {
    dir.join(format!("model_{step:08}.bin"))
}

/// `dir/state_NNNNNNNN.bin`.
pub fn state_path(dir: &Path, step: u64) -> PathBuf {
    dir.join(format!("state_{step:08}.bin"))
}

fn steps_of(dir: &Path, prefix: &str) -> Result<Vec<u64>> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
    let mut steps = Vec::new();
    for entry in entries {
        let name = entry.map_err(|e| Error::io(dir, e))?.file_name();
        let name = name.to_string_lossy();
        let digits = name.strip_prefix(prefix).and_then(|rest| rest.strip_suffix(".bin"));
        if let Some(step) = digits.filter(|d| d.len() == 8).and_then(|d| d.parse().ok()) {
            steps.push(step);
        }
    }
    steps.sort_unstable();
    Ok(steps)
}

/// The checkpoint files (`model_NNNNNNNN.bin`, `state_NNNNNNNN.bin`) in `dir`; none when
/// `dir` is not a directory.
pub fn checkpoint_files(dir: &Path) -> Result<Vec<PathBuf>> {
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let models = steps_of(dir, "model_")?.into_iter().map(|s| model_path(dir, s));
    let states = steps_of(dir, "state_")?.into_iter().map(|s| state_path(dir, s));
    Ok(models.chain(states).collect())
}

/// The steps in `dir` with both a model and a state file, in increasing order.
pub fn resumable_steps(dir: &Path) -> Result<Vec<u64>> {
    let states = steps_of(dir, "state_")?;
    Ok(steps_of(dir, "model_")?.into_iter().filter(|s| states.contains(s)).collect())
}

/// The highest step in `dir` with both a model and a state file.
pub fn latest_resumable(dir: &Path) -> Result<u64> {
    resumable_steps(dir)?.last().copied().ok_or_else(|| {
        Error::invalid(format!(
            "{} holds no checkpoint to resume from (model_NNNNNNNN.bin with its state_NNNNNNNN.bin)",
            dir.display()
        ))
    })
}

/// The model file to load for `path`: the file itself, or the highest-step model checkpoint
/// of a directory.
pub fn resolve_model_file(path: &Path) -> Result<PathBuf> {
    if !path.is_dir() {
        return Ok(path.to_path_buf());
    }
    match steps_of(path, "model_")?.last() {
        Some(&step) => Ok(model_path(path, step)),
        None => Err(Error::invalid(format!(
            "{} holds no model checkpoint (model_NNNNNNNN.bin)",
            path.display()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ParamKind, gpt2_init};

    fn tiny() -> Gpt2Config {
        Gpt2Config {
            max_seq_len: 8,
            vocab_size: 20,
            padded_vocab_size: 32,
            num_layers: 2,
            num_heads: 2,
            channels: 8,
        }
    }

    #[test]
    fn model_round_trip_is_exact_and_matches_llmc_layout() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.bin");
        let params = gpt2_init(&tiny(), 1);
        write_model(&path, &tiny(), &params, ModelDtype::F32).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let word = |i: usize| i32::from_le_bytes(bytes[4 * i..4 * i + 4].try_into().unwrap());
        assert_eq!((0..8).map(word).collect::<Vec<_>>(), [20240326, 3, 8, 20, 2, 2, 8, 32]);
        // wpe follows wte directly
        let wpe0 = f32::from_le_bytes(bytes[1024 + 4 * 32 * 8..][..4].try_into().unwrap());
        assert_eq!(wpe0, params[ParamKind::Wpe][0]);
        let read = read_model(&path).unwrap();
        assert_eq!(read, ModelCheckpoint { config: tiny(), params, dtype: ModelDtype::F32 });
    }

    #[test]
    fn bf16_checkpoints_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.bin");
        let mut bytes = Vec::new();
        for v in [20240326, 5, 8, 20, 2, 2, 8, 32].into_iter().chain([0; 248]) {
            bytes.extend(i32::to_le_bytes(v));
        }
        let n = tiny().num_params();
        for i in 0..n {
            bytes.extend(half::bf16::from_f32(i as f32 * 0.5).to_bits().to_le_bytes());
        }
        std::fs::write(&path, bytes).unwrap();
        let read = read_model(&path).unwrap();
        assert_eq!(read.params[ParamKind::Wte][3], 1.5);
        assert_eq!(
            read.params[ParamKind::Lnfb].last(),
            Some(&half::bf16::from_f32((n - 1) as f32 * 0.5).to_f32())
        );
    }

    #[test]
    fn bf16_checkpoints_are_written_rounded_to_nearest_even() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.bin");
        let mut params = gpt2_init(&tiny(), 2);
        // 1 + 2^-8 is halfway between two bf16 values: ties go to the even one (1.0);
        // 1 + 3·2^-9 rounds up; -(1 + 2^-7 + 2^-8) ties up to the even -(1 + 2^-6).
        params[ParamKind::Wte][..3].copy_from_slice(&[
            1.0 + 2f32.powi(-8),
            1.0 + 3.0 * 2f32.powi(-9),
            -(1.0 + 2f32.powi(-7) + 2f32.powi(-8)),
        ]);
        write_model(&path, &tiny(), &params, ModelDtype::Bf16).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let word = |i: usize| i32::from_le_bytes(bytes[4 * i..4 * i + 4].try_into().unwrap());
        assert_eq!(word(1), 5);
        assert_eq!(bytes.len(), 1024 + 2 * tiny().num_params());
        let read = read_model(&path).unwrap();
        assert_eq!(read.dtype, ModelDtype::Bf16);
        assert_eq!(
            read.params[ParamKind::Wte][..3],
            [1.0, 1.0 + 2f32.powi(-7), -(1.0 + 2f32.powi(-6))]
        );
        for (written, read) in params.0.iter().zip(&read.params.0) {
            for (&w, &r) in written.iter().zip(read) {
                assert_eq!(r, half::bf16::from_f32(w).to_f32());
            }
        }
    }

    #[test]
    fn malformed_checkpoints_are_rejected_with_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.bin");
        write_model(&path, &tiny(), &gpt2_init(&tiny(), 1), ModelDtype::F32).unwrap();
        let good = std::fs::read(&path).unwrap();
        let err_for = |bytes: &[u8]| {
            std::fs::write(&path, bytes).unwrap();
            read_model(&path).unwrap_err().to_string()
        };
        let with_word = |i: usize, v: i32| {
            let mut b = good.clone();
            b[4 * i..4 * i + 4].copy_from_slice(&v.to_le_bytes());
            b
        };
        assert!(err_for(&good[..100]).contains("less than the 1024-byte header"));
        assert!(err_for(&with_word(0, 20240520)).contains("magic 20240520, expected 20240326"));
        assert!(err_for(&with_word(1, 4)).contains("unsupported checkpoint version 4"));
        assert!(err_for(&with_word(6, -8)).contains("corrupt checkpoint header: C = -8"));
        assert!(err_for(&with_word(5, 3)).contains("multiple of the number of heads"));
        let err = err_for(&good[..good.len() - 4]);
        assert!(err.contains("truncated checkpoint") && err.contains("L2 NH2 C8"), "{err}");
        let mut long = good.clone();
        long.push(0);
        assert!(err_for(&long).contains("corrupt checkpoint"));
        let missing = read_model(&dir.path().join("none.bin")).unwrap_err().to_string();
        assert!(missing.contains("none.bin") && missing.contains("No such file"), "{missing}");
    }

    fn state() -> OptimizerState {
        let config = tiny();
        OptimizerState {
            step: 12,
            batch_size: 4,
            seq_len: 8,
            grad_accum_steps: 2,
            shuffle: true,
            seed: u64::MAX - 1,
            data_position: LoaderPosition { epoch: 3, shard: 1, window: 7 },
            data_shards: 2,
            data_tokens: 123_456,
            loss_scale: Some((32768.0, 17)),
            m: gpt2_init(&config, 5),
            v: gpt2_init(&config, 6),
        }
    }

    #[test]
    fn state_round_trip_and_validation() {
        let dir = tempfile::tempdir().unwrap();
        let path = state_path(dir.path(), 12);
        write_state(&path, &tiny(), &state()).unwrap();
        assert_eq!(read_state(&path, &tiny()).unwrap(), state());
        let mut other = tiny();
        other.num_layers = 3;
        let err = read_state(&path, &other).unwrap_err().to_string();
        assert!(err.contains("parameters, the model has"), "{err}");
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
        assert!(
            read_state(&path, &tiny())
                .unwrap_err()
                .to_string()
                .contains("truncated optimizer state")
        );
        std::fs::write(&path, &bytes[8..]).unwrap();
        assert!(
            read_state(&path, &tiny())
                .unwrap_err()
                .to_string()
                .contains("not an optimizer-state file")
        );
        // Header words that no run writes: a loss scale that is not positive and finite (an
        // infinite one would skip every fp16 step), a shuffle flag other than 0 or 1.
        let patched = |word: usize, value: u64| {
            let mut patched = bytes.clone();
            patched[8 * word..8 * word + 8].copy_from_slice(&value.to_le_bytes());
            std::fs::write(&path, &patched).unwrap();
            read_state(&path, &tiny()).unwrap_err().to_string()
        };
        for scale in [f32::INFINITY, f32::NAN, -1.0] {
            let err = patched(14, u64::from(scale.to_bits()));
            assert!(err.contains("fp16 loss scale") && err.contains("not positive"), "{err}");
        }
        assert!(patched(14, 1 << 40).contains("exceed 32 bits"));
        assert!(patched(7, 2).contains("shuffle flag 2"));
    }

    #[test]
    fn latest_resumable_needs_both_files() {
        let dir = tempfile::tempdir().unwrap();
        assert!(latest_resumable(dir.path()).is_err());
        for (name, step) in [("model", 5), ("state", 5), ("model", 10), ("state", 3), ("model", 20)]
        {
            std::fs::write(dir.path().join(format!("{name}_{step:08}.bin")), b"").unwrap();
        }
        std::fs::write(dir.path().join("model_final.bin"), b"").unwrap();
        assert_eq!(latest_resumable(dir.path()).unwrap(), 5);
        assert_eq!(resolve_model_file(dir.path()).unwrap(), model_path(dir.path(), 20));
    }
}
