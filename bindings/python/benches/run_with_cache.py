"""`run_with_cache` of the shipped model (`firmware-example/model/induction-2l`) on 64 sequences x 64
tokens with every hook: the `microlens` package beside TransformerLens's own `run_with_cache` on the
CPU, 1 and 2 threads, in one run; then what writing the cache alone costs (its arrays allocated and
filled without a forward pass: a floor for any implementation that returns fresh arrays); then the peak RSS of a `names_filter` of one hook against all hooks.

TransformerLens is 2.x's `HookedTransformer` of the shipped checkpoint, or, where only 4.x is installed,
a `TransformerBridge` in compatibility mode booted from a random HF GPT-2 of the same width, depth,
heads, context and vocabulary (GPT-2 has MLPs, d_mlp = 4 d_model: more work than the attention-only
model microlens runs). Each figure is the median of `--runs` timed runs after one warm-up, each
measurement in a fresh process (`RAYON_NUM_THREADS`, `torch.set_num_threads`). Prints a markdown
table. `cargo xtask bench-peers --python P` runs it with the package staged; never in CI.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
CHECKPOINT = ROOT / "firmware-example" / "model" / "induction-2l.safetensors"
CONFIG = ROOT / "firmware-example" / "model" / "induction-2l.json"
BATCH, SEQ = 64, 64


def tokens():
    import numpy as np

    cfg = json.loads(CONFIG.read_text())
    half = np.random.default_rng(0).integers(0, cfg["d_vocab"], size=(BATCH, SEQ // 2))
    return np.concatenate([half, half], axis=1)


def median(runs, f):
    f()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def microlens_model():
    import microlens

    return microlens.convert(CHECKPOINT)


def tl_model():
    """TransformerLens's model of the shipped checkpoint (2.x), or a bridge of the same shape (4.x)."""
    cfg = json.loads(CONFIG.read_text())
    try:
        from transformer_lens import HookedTransformer, HookedTransformerConfig

        keys = HookedTransformerConfig.__dataclass_fields__
        tl_cfg = HookedTransformerConfig(**{k: v for k, v in cfg.items() if k in keys and k not in
                                            ("dtype", "device", "n_params")})
        from safetensors.torch import load_file

        model = HookedTransformer(tl_cfg).eval()
        model.load_state_dict(load_file(str(CHECKPOINT)), strict=False)
        return model, "2.x HookedTransformer, the shipped model"
    except ImportError:
        from transformers import GPT2Config, GPT2LMHeadModel
        from transformer_lens.model_bridge import TransformerBridge

        gpt2 = GPT2LMHeadModel(GPT2Config(n_layer=cfg["n_layers"], n_embd=cfg["d_model"],
                                          n_head=cfg["n_heads"], n_positions=cfg["n_ctx"],
                                          vocab_size=cfg["d_vocab"])).eval()
        path = tempfile.mkdtemp()
        gpt2.save_pretrained(path)
        bridge = TransformerBridge.boot_transformers(path, device="cpu")
        bridge.enable_compatibility_mode()
        return bridge, "4.x TransformerBridge, an HF GPT-2 of the same size"


def tl_names():
    """The names TransformerLens's `run_with_cache` returns for its model (no `hook_result`: its
    `use_attn_result` is off by default)."""
    import torch

    model, _ = tl_model()
    with torch.inference_mode():
        _, cache = model.run_with_cache(torch.from_numpy(tokens()[:1]))
    print(json.dumps(sorted(cache.keys())))


def measure(who, threads, runs, names=None):
    t = tokens()
    if who == "microlens":
        model = microlens_model()
        if names is not None:
            # TransformerLens's names that this model has (a 4.x bridge's GPT-2 also has MLPs).
            known = set(model.run_with_cache(t[:1])[1].keys())
            names = [n for n in names if n in known]
        secs = median(runs, lambda: model.run_with_cache(t, names_filter=names))
        what = "microlens"
    else:
        import torch

        torch.set_num_threads(threads)
        model, what = tl_model()
        tt = torch.from_numpy(t)
        with torch.inference_mode():
            secs = median(runs, lambda: model.run_with_cache(tt))
    print(json.dumps({"what": what, "tokens_per_s": BATCH * SEQ / secs}))


def floor(runs, names=None):
    """Writing the cache alone: every array `run_with_cache` returns for `names` (same shapes and
    dtypes) allocated fresh and filled, as a forward pass of no cost would leave them."""
    import numpy as np

    model = microlens_model()
    if names is not None:
        known = set(model.run_with_cache(tokens()[:1])[1].keys())
        names = [n for n in names if n in known]
    _, cache = model.run_with_cache(tokens(), names_filter=names)
    shapes = [(a.shape, a.dtype) for a in cache.values()]
    mb = sum(a.nbytes for a in cache.values()) / 1e6
    del cache

    def write():
        arrays = [np.empty(shape, dtype) for shape, dtype in shapes]
        for a in arrays:
            a.fill(1)
        return arrays

    secs = median(runs, write)
    print(json.dumps({"what": "floor", "tokens_per_s": BATCH * SEQ / secs, "ms": 1e3 * secs, "mb": mb}))


def rss(names):
    model = microlens_model()
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    _, cache = model.run_with_cache(tokens(), names_filter=None if names == "all" else names)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"kib": peak, "added_kib": peak - base, "arrays": len(cache)}))


def child(args, threads):
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    out = subprocess.run([sys.executable, __file__, *args], env=env, capture_output=True, text=True)
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "failed"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--measure", choices=["microlens", "tl", "floor"])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rss")
    p.add_argument("--names", help="a JSON list: the names_filter of microlens's measurement")
    p.add_argument("--tl-names", action="store_true")
    a = p.parse_args()
    names = json.loads(a.names) if a.names else None
    if a.tl_names:
        return tl_names()
    if a.measure == "floor":
        return floor(a.runs, names)
    if a.measure:
        return measure(a.measure, a.threads, a.runs, names)
    if a.rss:
        return rss(a.rss)
    flags = open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else ""
    isa = "AVX-512" if " avx512f" in flags else "AVX2" if " avx2" in flags else "no AVX2"
    # Measuring as on a CPU without AVX-512: `MICROLENS_SIMD=avx2` caps microlens's kernels and
    # `ATEN_CPU_CAPABILITY=avx2` torch's.
    caps = [f"{k}={os.environ[k]}" for k in ("MICROLENS_SIMD", "ATEN_CPU_CAPABILITY") if k in os.environ]
    if caps:
        isa += " (capped: " + ", ".join(caps) + ")"
    print(f"run_with_cache, {BATCH} x {SEQ} tokens, every hook; CPU with {isa}, {os.cpu_count()} cores\n")
    # TransformerLens's own names (microlens adds `hook_result` and `logits` to every hook): both
    # sides then return the same activations.
    same = child(["--tl-names"], 1)
    names = json.dumps(same) if isinstance(same, list) else None
    runs = ["--runs", str(a.runs)]
    print("| threads | microlens, every hook | microlens, TransformerLens's names it has | TransformerLens "
          "| ratio (same names) | TransformerLens |")
    print("|---|---|---|---|---|---|")
    for threads in (1, 2):
        every = child(["--measure", "microlens", *runs], threads)
        ours = child(["--measure", "microlens", *runs, "--names", names], threads) if names else None
        theirs = child(["--measure", "tl", *runs, "--threads", str(threads)], threads)
        if "error" in theirs:
            print(f"| {threads} | {every['tokens_per_s']:,.0f} | | skipped: {theirs['error']} | | |")
            continue
        ratio = ours["tokens_per_s"] / theirs["tokens_per_s"]
        print(f"| {threads} | {every['tokens_per_s']:,.0f} | {ours['tokens_per_s']:,.0f} | "
              f"{theirs['tokens_per_s']:,.0f} | {ratio:.2f}x | {theirs['what']} |")
    for label, extra in (("every hook", []), ("TransformerLens's names", ["--names", names] if names else None)):
        if extra is None:
            continue
        wall = child(["--measure", "floor", *runs, *extra], 1)
        print(f"\nwriting the cache alone, {label} ({wall['mb']:.1f} MB in arrays allocated fresh and "
              f"filled, no forward pass; 1 thread): {wall['ms']:.1f} ms a call, {wall['tokens_per_s']:,.0f} tokens/s")
    one, every = child(["--rss", "blocks.1.attn.hook_pattern"], 2), child(["--rss", "all"], 2)
    print(f"\npeak RSS (microlens, 2 threads): names_filter of one hook {one['kib'] / 1024:.0f} MiB "
          f"(+{one['added_kib'] / 1024:.0f} MiB for the run), every hook ({every['arrays']} arrays) "
          f"{every['kib'] / 1024:.0f} MiB (+{every['added_kib'] / 1024:.0f} MiB)")


if __name__ == "__main__":
    main()
