//! Encoder forward and backward against cpu-ref, bit for bit: the forward rounds one f32 sum
//! per element, exactly as the reference, and the backward adds the same f32 values in the
//! same order (each element from its previous value, then its rows in increasing (b, t)
//! order), which is its determinism promise.

use cpu_ref::precision::Element;
use gpu_host::kernels::elementwise::FloatElement;
use gpu_host::kernels::encoder::{TokenShape, Tokens, encoder_backward, encoder_forward};
use gpu_host::{Device, DeviceBuffer, DeviceElement, GpuError, LaunchConfig};
use half::{bf16, f16};
use integration_tests::{TestRng, assert_bits_eq, kernel_tests, poisoned, small_sizes};
use kernel_abi::encoder::{BLOCK_THREADS, EncoderForwardParams, EncoderKernels, HOT_BUCKET_ROWS};

/// How the token ids of a case are drawn.
#[derive(Clone, Copy, Debug)]
enum Ids {
    /// Uniform over the vocabulary, the largest id included.
    Uniform,
    /// One id at every position of the batch.
    OneToken,
    /// One id at every other position, uniform ids elsewhere.
    HalfOneToken,
}

/// One encoder problem.
#[derive(Clone, Copy, Debug)]
struct Case {
    b: usize,
    t: usize,
    c: usize,
    vocab: usize,
    /// Rows of wte / dwte (the padded vocabulary, >= vocab).
    vp: usize,
    /// Rows of wpe / dwpe (>= t).
    max_t: usize,
    ids: Ids,
    /// Elements before every float view (1 breaks 16-byte alignment: the scalar path); they
    /// hold random values or poison that must stay as they are.
    offset: usize,
}

impl Case {
    const fn small(b: usize, t: usize, c: usize, ids: Ids, offset: usize) -> Self {
        Case { b, t, c, vocab: 13, vp: 16, max_t: t + 2, ids, offset }
    }

    fn shape(&self) -> TokenShape {
        TokenShape { b: self.b, t: self.t, vocab: self.vocab }
    }

    fn label(&self, what: &str, ty: &str) -> String {
        format!("{what}_{ty} {self:?}")
    }
}

/// Simulator cases: rows not a multiple of the 8 warps of a block, c in every residue class
/// mod 8 on aligned views (0: 16-byte path, others: scalar), more lane units than a warp has
/// lanes (c = 264 and GPT-2's 768 vector, c = 70 scalar), unaligned views of a 16-byte-friendly c, and
/// repeated tokens (vocab 13 for up to 44 positions, one token everywhere, one token at half
/// the positions); bucket and batch sizes leave tails of the 4-row unrolled sum. Buckets of
/// at least `HOT_BUCKET_ROWS` = 32 rows take the hot work items: 35 rows (one round and a
/// tail), 50 beside cold buckets and the positions' items on the 16-byte path (c = 264, not a
/// multiple of 32: a partial last chunk), 135 at c = 70 (four rounds and a tail of 7), and
/// unaligned.
fn sim_cases() -> Vec<Case> {
    let mut cases: Vec<Case> = (40..48).map(|c| Case::small(3, 7, c, Ids::Uniform, 0)).collect();
    cases.extend([
        Case { b: 2, t: 33, c: 264, vocab: 50, vp: 56, max_t: 40, ids: Ids::Uniform, offset: 0 },
        Case {
            b: 2,
            t: 64,
            c: 768,
            vocab: 1000,
            vp: 1024,
            max_t: 80,
            ids: Ids::Uniform,
            offset: 0,
        },
        Case::small(4, 11, 70, Ids::Uniform, 0),
        Case::small(3, 5, 48, Ids::Uniform, 1),
        Case::small(5, 7, 16, Ids::OneToken, 0),
        Case::small(5, 7, 19, Ids::OneToken, 1),
        Case::small(3, 11, 24, Ids::HalfOneToken, 0),
        Case {
            b: 2,
            t: 50,
            c: 264,
            vocab: 50,
            vp: 56,
            max_t: 50,
            ids: Ids::HalfOneToken,
            offset: 0,
        },
        Case::small(3, 45, 70, Ids::OneToken, 0),
        Case::small(2, 40, 40, Ids::HalfOneToken, 1),
    ]);
    cases
}

/// GPU cases: the simulator's, then GPT-2 124M (B=16, T=1024, C=768, V=50257, Vp=50304),
/// with uniform ids and with one token at half the positions.
fn cases(dev: &impl Device) -> Vec<Case> {
    let mut cases = sim_cases();
    if !small_sizes(dev) {
        let gpt2 = |ids| Case {
            b: 16,
            t: 1024,
            c: 768,
            vocab: 50257,
            vp: 50304,
            max_t: 1024,
            ids,
            offset: 0,
        };
        cases.extend([gpt2(Ids::Uniform), gpt2(Ids::HalfOneToken)]);
    }
    cases
}

fn token_ids(rng: &mut TestRng, case: &Case) -> Vec<u32> {
    let n = case.b * case.t;
    let last = case.vocab as u32 - 1;
    let draw = |rng: &mut TestRng, n| -> Vec<u32> {
        rng.uniform(n, 0.0, case.vocab as f32).iter().map(|&x| (x as u32).min(last)).collect()
    };
    let mut ids = draw(rng, n);
    ids[n / 2] = last;
    let one = draw(rng, 1)[0];
    match case.ids {
        Ids::Uniform => {}
        Ids::OneToken => ids.fill(one),
        Ids::HalfOneToken => ids.iter_mut().step_by(2).for_each(|id| *id = one),
    }
    ids
}

fn poison<T: DeviceElement>() -> T {
    let mut v = T::zeroed();
    bytemuck::bytes_of_mut(&mut v).fill(0xff);
    v
}

/// Values of both signs over 20 binades, so that most f32 sums round and a different
/// summation order shows in the bits (and f16 stays finite).
fn random<T: Element>(rng: &mut TestRng, n: usize) -> Vec<T> {
    let exps = rng.uniform(n, -10.0, 10.0);
    let mants = rng.uniform(n, -2.0, 2.0);
    exps.iter().zip(&mants).map(|(e, m)| T::from_f32(m * e.exp2())).collect()
}

fn check_forward<T: FloatElement + Element>(dev: &impl Device) {
    let mut rng = TestRng::new();
    for case in cases(dev) {
        let Case { b, t, c, offset: o, .. } = case;
        let ids = token_ids(&mut rng, &case);
        let wte = random::<T>(&mut rng, o + case.vp * c);
        let wpe = random::<T>(&mut rng, o + case.max_t * c);
        let tokens = Tokens::upload(dev, &ids, case.shape()).unwrap();
        let (dwte, dwpe) = (dev.upload(&wte).unwrap(), dev.upload(&wpe).unwrap());
        let mut out = poisoned::<_, T>(dev, o + b * t * c).unwrap();
        encoder_forward(
            dev,
            &tokens,
            dwte.view().slice(o..wte.len()).unwrap(),
            dwpe.view().slice(o..wpe.len()).unwrap(),
            out.view_mut().slice_mut(o..o + b * t * c).unwrap(),
            c,
        )
        .unwrap();
        let got = dev.download(out.view()).unwrap();

        let mut want = vec![poison::<T>(); o + b * t * c];
        cpu_ref::encoder_forward(&mut want[o..], &ids, &wte[o..], &wpe[o..], b, t, c);
        assert_bits_eq(
            &case.label("encoder_forward", <T as Element>::NAME),
            rng.seed(),
            &got,
            &want,
        );
    }
}

/// The forward's warp-stride loop on a grid of 2 blocks (16 warps) for 3 × 37 rows of 264
/// channels: the launcher caps the grid at `MAX_BLOCKS` blocks of 8 warps, which only 524 k
/// rows reach, so here the kernel is launched directly with a small grid.
fn check_forward_warp_stride<T: FloatElement + Element>(dev: &impl Device) {
    let mut rng = TestRng::new();
    let case =
        Case { b: 3, t: 37, c: 264, vocab: 50, vp: 56, max_t: 40, ids: Ids::Uniform, offset: 0 };
    let Case { b, t, c, .. } = case;
    let ids = token_ids(&mut rng, &case);
    let wte = random::<T>(&mut rng, case.vp * c);
    let wpe = random::<T>(&mut rng, case.max_t * c);
    let tokens = Tokens::upload(dev, &ids, case.shape()).unwrap();
    let (dwte, dwpe) = (dev.upload(&wte).unwrap(), dev.upload(&wpe).unwrap());
    let mut out = poisoned::<_, T>(dev, b * t * c).unwrap();
    let params = EncoderForwardParams {
        out: out.view_mut().ptr(),
        tokens: tokens.ids().ptr(),
        wte: dwte.view().ptr(),
        wpe: dwpe.view().ptr(),
        rows: (b * t) as u32,
        t: t as u32,
        c: c as u32,
    };
    let config = LaunchConfig::linear(2, BLOCK_THREADS);
    // SAFETY: `out` holds b·t·c elements, the ids are below `vocab` ≤ vp rows of `wte`, `wpe`
    // holds max_t ≥ t rows: what the kernel reads and writes for these parameters.
    unsafe { dev.launch(<T as DeviceElement>::Abi::FORWARD, config, params) }.unwrap();
    let got = dev.download(out.view()).unwrap();
    let mut want = vec![poison::<T>(); b * t * c];
    cpu_ref::encoder_forward(&mut want, &ids, &wte, &wpe, b, t, c);
    let what = case.label("encoder_forward warp-stride", <T as Element>::NAME);
    assert_bits_eq(&what, rng.seed(), &got, &want);
}

/// Runs the backward from `dwte0` / `dwpe0` (windows at `case.offset`) and returns both
/// whole buffers afterwards.
fn run_backward<D: Device, T: FloatElement>(
    dev: &D,
    tokens: &mut Tokens<D>,
    dout: &D::Buffer<T>,
    (dwte0, dwpe0): (&[f32], &[f32]),
    case: &Case,
) -> (Vec<f32>, Vec<f32>) {
    let o = case.offset;
    let (mut dwte, mut dwpe) = (dev.upload(dwte0).unwrap(), dev.upload(dwpe0).unwrap());
    let (dwte_len, dwpe_len) = (dwte.len(), dwpe.len());
    encoder_backward(
        dev,
        tokens,
        dout.view().slice(o..dout.len()).unwrap(),
        dwte.view_mut().slice_mut(o..dwte_len).unwrap(),
        dwpe.view_mut().slice_mut(o..dwpe_len).unwrap(),
        case.c,
    )
    .unwrap();
    (dev.download(dwte.view()).unwrap(), dev.download(dwpe.view()).unwrap())
}

/// How many ids occur at least `HOT_BUCKET_ROWS` times: the buckets of the hot work items.
fn frequent_ids(ids: &[u32]) -> usize {
    let mut counts = std::collections::BTreeMap::new();
    ids.iter().for_each(|&id| *counts.entry(id).or_insert(0u32) += 1);
    counts.values().filter(|&&n| n >= HOT_BUCKET_ROWS).count()
}

fn check_backward<T: FloatElement + Element>(dev: &impl Device) {
    let mut rng = TestRng::new();
    for case in cases(dev) {
        let Case { b, t, c, offset: o, .. } = case;
        let ids = token_ids(&mut rng, &case);
        let dout = random::<T>(&mut rng, o + b * t * c);
        let dwte0: Vec<f32> = random(&mut rng, o + case.vp * c);
        let dwpe0: Vec<f32> = random(&mut rng, o + case.max_t * c);
        let mut tokens = Tokens::upload(dev, &ids, case.shape()).unwrap();
        assert_eq!(tokens.frequent(), None, "grouped by the first backward: {case:?}");
        let ddout = dev.upload(&dout).unwrap();
        let first = run_backward(dev, &mut tokens, &ddout, (&dwte0, &dwpe0), &case);
        assert_eq!(tokens.frequent(), Some(frequent_ids(&ids)), "{case:?}");
        let second = run_backward(dev, &mut tokens, &ddout, (&dwte0, &dwpe0), &case);

        let (mut dwte, mut dwpe) = (dwte0.clone(), dwpe0.clone());
        cpu_ref::encoder_backward(&mut dwte[o..], &mut dwpe[o..], &dout[o..], &ids, b, t, c);
        let label = |what| case.label(what, <T as Element>::NAME);
        assert_bits_eq(&label("dwte"), rng.seed(), &first.0, &dwte);
        assert_bits_eq(&label("dwpe"), rng.seed(), &first.1, &dwpe);
        assert_bits_eq(&label("dwte (second run)"), rng.seed(), &second.0, &first.0);
        assert_bits_eq(&label("dwpe (second run)"), rng.seed(), &second.1, &first.1);
    }
}

/// `Tokens::replace` swaps in a new batch (with a different number of distinct ids, and
/// none of the first batch's frequent one) that the next launches use: the backward groups it
/// afresh, though it grouped the first batch already; a rejected batch leaves the previous
/// one in place.
fn check_tokens_replace(dev: &impl Device) {
    let mut rng = TestRng::new();
    let case = Case::small(4, 16, 16, Ids::Uniform, 0);
    let (b, t, c) = (case.b, case.t, case.c);
    let first = token_ids(&mut rng, &Case { ids: Ids::HalfOneToken, ..case });
    let second = token_ids(&mut rng, &case);
    let dout = random::<f32>(&mut rng, b * t * c);
    let ddout = dev.upload(&dout).unwrap();
    let dwte0: Vec<f32> = random(&mut rng, case.vp * c);
    let dwpe0: Vec<f32> = random(&mut rng, case.max_t * c);
    let seed = rng.seed();
    let check = |tokens: &mut Tokens<_>, ids: &[u32], what: &str| {
        let got = run_backward(dev, tokens, &ddout, (&dwte0, &dwpe0), &case);
        let (mut dwte, mut dwpe) = (dwte0.clone(), dwpe0.clone());
        cpu_ref::encoder_backward(&mut dwte, &mut dwpe, &dout, ids, b, t, c);
        assert_bits_eq(&format!("dwte {what}"), seed, &got.0, &dwte);
        assert_bits_eq(&format!("dwpe {what}"), seed, &got.1, &dwpe);
        let distinct = ids.iter().collect::<std::collections::BTreeSet<_>>().len();
        assert_eq!(tokens.distinct(), distinct, "{what}");
        assert_eq!(tokens.frequent(), Some(frequent_ids(ids)), "{what}");
    };

    let mut tokens = Tokens::upload(dev, &first, case.shape()).unwrap();
    check(&mut tokens, &first, "of the first batch");
    assert_eq!(tokens.frequent(), Some(1), "one id at 32 of the first batch's 64 positions");
    tokens.replace(dev, &second).unwrap();
    assert_eq!(tokens.frequent(), None, "a new batch is grouped by its first backward");
    let mut bad = first.clone();
    bad[5] = case.vocab as u32;
    let err = "id 13 at position 5 (b 0, t 5)";
    assert_rejects(tokens.replace(dev, &bad), "Tokens::replace", "tokens", err);
    assert_eq!(dev.download(tokens.ids()).unwrap(), second);
    check(&mut tokens, &second, "after replace");
}

/// Asserts `result` is an `InvalidArgument` of `op` naming `arg`, whose message contains
/// `text`.
fn assert_rejects<T>(result: Result<T, GpuError>, op: &str, arg: &str, text: &str) {
    match result {
        Err(GpuError::InvalidArgument { op: o, arg: a, reason }) => assert!(
            o == op && a == arg && reason.contains(text),
            "{o}: `{a}`: {reason} (expected {op}: `{arg}`: ...{text}...)"
        ),
        Err(e) => panic!("expected {op}: invalid `{arg}`, got {e}"),
        Ok(_) => panic!("expected {op}: invalid `{arg}`, got Ok"),
    }
}

/// Every bad argument is an error naming it, before anything is launched.
fn check_bad_arguments(dev: &impl Device) {
    let (b, t, c, vocab) = (2, 4, 8, 10);
    let shape = TokenShape { b, t, vocab };
    let mut ids = vec![3u32; b * t];
    ids[6] = 10;
    let op = "Tokens::upload";
    assert_rejects(
        Tokens::upload(dev, &ids, shape),
        op,
        "tokens",
        "id 10 at position 6 (b 1, t 2)",
    );
    assert_rejects(Tokens::upload(dev, &ids[..7], shape), op, "tokens", "expected 8");
    let huge = TokenShape { b: 1 << 16, t: 1 << 16, vocab };
    assert_rejects(Tokens::upload(dev, &[], huge), op, "b", "exceeds u32");

    let mut tokens = Tokens::upload(dev, &[1, 2, 3, 4, 5, 6, 7, 9], shape).unwrap();
    let wte = dev.upload(&vec![0.5f32; vocab * c]).unwrap();
    let short_wte = dev.upload(&vec![0.5f32; (vocab - 1) * c]).unwrap();
    let wpe = dev.upload(&vec![0.25f32; t * c]).unwrap();
    let short_wpe = dev.upload(&vec![0.25f32; (t - 1) * c]).unwrap();
    let mut out = dev.alloc::<f32>(b * t * c).unwrap();
    let mut long_out = dev.alloc::<f32>(b * t * c + 1).unwrap();
    let fwd = "encoder_forward";
    let (wte, wpe) = (wte.view(), wpe.view());
    let r = encoder_forward(dev, &tokens, short_wte.view(), wpe, out.view_mut(), c);
    assert_rejects(r, fwd, "wte", "fewer than the vocabulary size = 10");
    let r = encoder_forward(dev, &tokens, wte, short_wpe.view(), out.view_mut(), c);
    assert_rejects(r, fwd, "wpe", "sequence too long");
    let r = encoder_forward(dev, &tokens, wte, wpe, long_out.view_mut(), c);
    assert_rejects(r, fwd, "out", "expected 64");
    let r = encoder_forward(dev, &tokens, wte, wpe, out.view_mut(), 7);
    assert_rejects(r, fwd, "wte", "not a whole number of rows of c = 7");
    let r = encoder_forward(dev, &tokens, wte, wpe, out.view_mut(), 0);
    assert_rejects(r, fwd, "c", "is not in");

    let bwd = "encoder_backward";
    let dout = out.view();
    let mut dwte = dev.alloc::<f32>(vocab * c).unwrap();
    let mut dwpe = dev.alloc::<f32>(t * c).unwrap();
    let mut short_dwte = dev.alloc::<f32>((vocab - 1) * c).unwrap();
    let mut short_dwpe = dev.alloc::<f32>((t - 1) * c).unwrap();
    let r = encoder_backward(dev, &mut tokens, dout, short_dwte.view_mut(), dwpe.view_mut(), c);
    assert_rejects(r, bwd, "dwte", "fewer than the vocabulary size");
    let r = encoder_backward(dev, &mut tokens, dout, dwte.view_mut(), short_dwpe.view_mut(), c);
    assert_rejects(r, bwd, "dwpe", "sequence too long");
    let r =
        encoder_backward(dev, &mut tokens, long_out.view(), dwte.view_mut(), dwpe.view_mut(), c);
    assert_rejects(r, bwd, "dout", "expected 64");
}

kernel_tests! {
    encoder_forward_f32 => check_forward::<f32>;
    encoder_forward_bf16 => check_forward::<bf16>;
    encoder_forward_f16 => check_forward::<f16>;
    encoder_backward_f32 => check_backward::<f32>;
    encoder_backward_bf16 => check_backward::<bf16>;
    encoder_backward_f16 => check_backward::<f16>;
    encoder_tokens_replace => check_tokens_replace;
    encoder_bad_arguments => check_bad_arguments;
    encoder_forward_warp_stride_f32 => check_forward_warp_stride::<f32>;
    encoder_forward_warp_stride_bf16 => check_forward_warp_stride::<bf16>;
}
