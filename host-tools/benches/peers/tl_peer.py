"""TransformerLens's speed on the shipped model, for `cargo bench -p microlens-host --bench peers`.

Loads the shipped checkpoint (TransformerLens state dict + config JSON, as tests/fixtures/gen_tl.py does)
into a HookedTransformer on the CPU and times, on the sequences the bench wrote (little-endian u32):

- `model(tokens)` and `run_with_cache(tokens)`, batch `--batch`, with torch on 1 and on 2 threads;
- decoding token by token with TransformerLens's KV cache, batch 1, 1 thread (`--decode-sequences`
  sequences only: it is slow).

Prints `tl <key> <tokens per second>` lines (median of `--runs` runs after one warm-up) and writes the
log-probabilities of the first batch (f32) to `--logprobs-out` so the bench checks the function is the
same. Needs torch and transformer-lens (tests/fixtures/requirements.txt); never run in CI.
"""

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file
from transformer_lens import HookedTransformer
from transformer_lens.past_key_value_caching import HookedTransformerKeyValueCache

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests" / "fixtures"))
from gen_tl import tl_config_from_json  # noqa: E402


def median_secs(runs, f):
    f()
    times = []
    for _ in range(max(runs, 1)):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--weights", required=True)
    p.add_argument("--config", required=True)
    p.add_argument("--tokens", required=True)
    p.add_argument("--seq-len", type=int, required=True)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--decode-sequences", type=int, default=8)
    p.add_argument("--logprobs-out", required=True)
    a = p.parse_args()

    model = HookedTransformer(tl_config_from_json(a.config)).eval()
    missing, unexpected = model.load_state_dict(load_file(a.weights), strict=False)
    assert not unexpected and all(k.endswith((".mask", ".IGNORE")) for k in missing), (missing, unexpected)
    tokens = torch.from_numpy(np.fromfile(a.tokens, dtype="<u4").astype(np.int64)).reshape(-1, a.seq_len)
    batches = tokens.split(a.batch)
    n_tokens = tokens.numel()

    with torch.inference_mode():
        logp = torch.log_softmax(model(batches[0]), dim=-1).to(torch.float32).numpy()
        logp.astype("<f4").tofile(a.logprobs_out)
        for threads in (1, 2):
            torch.set_num_threads(threads)
            t = median_secs(a.runs, lambda: [model(b) for b in batches])
            print(f"tl model_{threads} {n_tokens / t:.1f}")
            t = median_secs(a.runs, lambda: [model.run_with_cache(b) for b in batches])
            print(f"tl cache_{threads} {n_tokens / t:.1f}")
        torch.set_num_threads(1)
        some = tokens[: a.decode_sequences]

        one = torch.ones(1, 1, dtype=torch.int64)  # no padding (the model has no tokenizer)

        def decode():
            for seq in some:
                cache = HookedTransformerKeyValueCache.init_cache(model.cfg, model.cfg.device, 1)
                for t in seq:
                    model(t.view(1, 1), past_kv_cache=cache, attention_mask=one)

        t = median_secs(a.runs, decode)
        print(f"tl decode_1 {some.numel() / t:.1f}")
    print(f"tl_versions torch {torch.__version__} threads-env {os.environ.get('OMP_NUM_THREADS', '-')}")


if __name__ == "__main__":
    main()
