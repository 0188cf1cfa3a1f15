#!/usr/bin/env python3
"""Language-model reference goldens from Hugging Face transformers.

usage: lm_goldens.py MODEL_DIR LAYOUT OUT.json [--device cpu|cuda]

MODEL_DIR is a model directory written by
    build/jev synth --config configs/tiny.json --seed 1 --layout LAYOUT --out MODEL_DIR
(LAYOUT = hf or mlx4). The script loads it into transformers'
Qwen3_5ForConditionalGeneration in float32 with eager attention and writes small
JSON (tests/golden/lm-tiny-LAYOUT.json) that tests/test-lm-golden.c compares with:

  inv_freq      torch's f32 text inverse frequencies (bit patterns)
  prompt        300 seeded token ids (the C test reads them from here)
  (a) prefill   the whole prompt in one forward: per-layer hidden-state slices and
                checksums (embeddings, each decoder layer's output, the final norm)
                and logits records at chosen positions
  (b) chunks    the same prompt in chunks of 7, 64, 100, 129 through the cache
  (c) decode    8 greedy decode steps after the one-piece prefill
  (d) forks     a 200-token prefix, then suffixes of 1, 3, 17 and 70 tokens, each on
                its own deep copy of the prefix cache
A logits record: top-10 ids and values, every 997th logit, the sum and the sum of
squares of the full row.

mlx4: every quantized tensor (U32 codes + scales + biases) is dequantized to f32 with
mlx's formula (scale * code + bias per group, in f32), the mlx-vlm renames are
undone, conv1d goes back from [C, K, 1] to [C, 1, K], the patch embedding from
channels-last back to [O, C, T, H, W], and the pre-shifted norms (1 + w) get 1
subtracted in f32. Nothing is downloaded; the run needs no network.

Run on the CPU by default: it is quick for the tiny model and free of TF32. With
--device cuda, TF32 is switched off for matmul and cuDNN.
"""
import argparse
import copy
import hashlib
import json
import os
import platform
import sys

import numpy as np
import torch
import transformers
from transformers import DynamicCache, Qwen3_5Config, Qwen3_5ForConditionalGeneration

FORMAT = "jev-lm-golden-1"
PROMPT_LEN = 300
PROMPT_SEED = 20240601
CHUNKS = [7, 64, 100, 129]
DECODE_STEPS = 8
FORK_PREFIX = 200
FORK_LENS = [1, 3, 17, 70]
FORK_SEED = 777
POSITIONS = [0, 1, 2, 63, 64, 65, 127, 128, 150, 299]
SLICE_DIMS = 16
TOP = 10
STRIDE = 997
REGULAR_VOCAB = 151643  # ids below the Qwen3 tokenizer's added tokens


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def load_safetensors(path):
    """A safetensors file read directly (header JSON + raw little-endian data), so that U32 codes
    need no torch support: floats come back as torch tensors, U32 as numpy arrays."""
    with open(path, "rb") as f:
        data = f.read()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b0, b1 = info["data_offsets"]
        raw = data[base + b0:base + b1]
        shape = info["shape"]
        dt = info["dtype"]
        if dt == "F32":
            t = torch.from_numpy(np.frombuffer(raw, dtype="<f4").copy().reshape(shape))
        elif dt == "F16":
            t = torch.from_numpy(np.frombuffer(raw, dtype="<f2").copy().reshape(shape))
        elif dt == "BF16":
            t = torch.from_numpy(np.frombuffer(raw, dtype="<i2").copy().reshape(shape)).view(torch.bfloat16)
        elif dt == "U32":
            t = np.frombuffer(raw, dtype="<u4").copy().reshape(shape)
        else:
            sys.exit(f"lm_goldens: {path}: tensor {name} has dtype {dt}, not handled")
        out[name] = t
    return out


def read_tensors(model_dir):
    """All tensors of the directory (single file or shards), and the sha256 of each file."""
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    tensors, hashes = {}, {}
    for name in files:
        path = os.path.join(model_dir, name)
        hashes[name] = sha256_file(path)
        tensors.update(load_safetensors(path))
    return tensors, hashes


def dequantize(codes, scales, biases, bits):
    """MLX affine: W[r][k] = scale[r][k // G] * q[r][k] + bias[r][k // G], f32."""
    rows, words = codes.shape
    cols = words * 32 // bits
    group = cols // scales.shape[1]
    raw = np.ascontiguousarray(codes, dtype="<u4").view(np.uint8).reshape(rows, words * 4)
    bitsarr = np.unpackbits(raw, axis=1, bitorder="little").reshape(rows, cols, bits)
    q = (bitsarr.astype(np.uint32) << np.arange(bits, dtype=np.uint32)).sum(axis=2).astype(np.float32)
    s = scales.float().repeat_interleave(group, dim=1)
    b = biases.float().repeat_interleave(group, dim=1)
    return s * torch.from_numpy(q) + b


SHIFTED = ("input_layernorm.weight", "post_attention_layernorm.weight", "self_attn.q_norm.weight",
           "self_attn.k_norm.weight")


def hf_state_dict(tensors, layout, quant):
    """The checkpoint as HF names and layouts, f32."""
    sd = {}
    if layout == "hf":
        for k, v in tensors.items():
            if k.startswith("mtp."):
                continue
            if isinstance(v, np.ndarray):
                sys.exit(f"lm_goldens: {k} is U32 in an hf layout")
            sd[k] = v.float()
        return sd
    for k, v in tensors.items():
        if k.endswith(".scales") or k.endswith(".biases"):
            continue
        name = k
        prefix = k[: -len(".weight")] if k.endswith(".weight") else None
        if prefix is not None and (prefix + ".scales") in tensors and (prefix + ".biases") in tensors:
            bits = quant.get("bits", 4)
            override = quant.get(prefix)
            if isinstance(override, dict):
                bits = override.get("bits", bits)
            v = dequantize(v, tensors[prefix + ".scales"], tensors[prefix + ".biases"], bits)
        else:
            v = v.float()
        for mlx, hf in (("language_model.model.", "model.language_model."), ("language_model.lm_head", "lm_head"),
                        ("vision_tower.", "model.visual.")):
            if name.startswith(mlx):
                name = hf + name[len(mlx):]
                break
        if name.endswith("linear_attn.conv1d.weight"):
            v = v.permute(0, 2, 1).contiguous()  # [C, K, 1] -> [C, 1, K]
        elif name.endswith("patch_embed.proj.weight") and v.dim() == 5:
            v = v.permute(0, 4, 1, 2, 3).contiguous()  # [O, T, H, W, C] -> [O, C, T, H, W]
        elif name.startswith("model.language_model.") and (name.endswith(SHIFTED) or
                                                          name == "model.language_model.norm.weight"):
            v = v - 1.0  # mlx stores the multiplier 1 + w
        sd[name] = v
    return sd


def build_model(model_dir, layout):
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg_dict = json.load(f)
    quant = cfg_dict.pop("quantization", None) or {}
    cfg_dict.pop("quantization_config", None)
    cfg = Qwen3_5Config.from_dict(cfg_dict)
    for c in (cfg, cfg.text_config, cfg.vision_config):
        try:
            c._attn_implementation = "eager"
        except Exception:  # older configs without the setter
            pass
    model = Qwen3_5ForConditionalGeneration(cfg).float().eval()
    tensors, hashes = read_tensors(model_dir)
    sd = hf_state_dict(tensors, layout, quant)
    missing, unexpected = model.load_state_dict(sd, strict=False)
    bad = [k for k in list(missing) + list(unexpected) if not k.startswith("lm_head.")]
    if bad:
        sys.exit(f"lm_goldens: state dict mismatch: {bad[:10]}")
    model.tie_weights()
    lm = model.model.language_model
    if not torch.equal(model.lm_head.weight, lm.embed_tokens.weight):
        sys.exit("lm_goldens: lm_head is not tied to embed_tokens")
    impl = getattr(lm.config, "_attn_implementation", None)
    if impl not in (None, "eager"):
        sys.exit(f"lm_goldens: attention implementation is {impl!r}, expected eager")
    return model, hashes, cfg


def logits_record(row):
    row = row.double()
    vals, ids = torch.topk(row.float(), TOP)
    return {
        "top_ids": [int(i) for i in ids],
        "top_vals": [float(v) for v in vals],
        "slice": [float(v) for v in row[::STRIDE].float()],
        "sum": float(row.sum()),
        "sumsq": float((row * row).sum()),
    }


def hidden_record(vec):
    v = vec.double()
    return {"slice": [float(x) for x in vec[:SLICE_DIMS]], "sum": float(v.sum()), "sumsq": float((v * v).sum())}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir")
    ap.add_argument("layout", choices=["hf", "mlx4"])
    ap.add_argument("out")
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_grad_enabled(False)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    dev = torch.device(args.device)

    model, hashes, cfg = build_model(args.model_dir, args.layout)
    model.to(dev)
    lm = model.model.language_model
    tc = cfg.text_config

    caps = {}

    def grab(name):
        def f(_mod, _inp, out):
            caps[name] = (out[0] if isinstance(out, tuple) else out).detach().float().cpu()
        return f

    hooks = [lm.embed_tokens.register_forward_hook(grab("embed")), lm.norm.register_forward_hook(grab("norm"))]
    for i, layer in enumerate(lm.layers):
        hooks.append(layer.register_forward_hook(grab(f"layer{i}")))

    vocab = min(REGULAR_VOCAB, tc.vocab_size)
    prompt = np.random.RandomState(PROMPT_SEED).randint(0, vocab, size=PROMPT_LEN).tolist()
    rs = np.random.RandomState(FORK_SEED)
    suffixes = [rs.randint(0, vocab, size=n).tolist() for n in FORK_LENS]

    def run(ids, cache):
        x = torch.tensor([ids], dtype=torch.long, device=dev)
        out = model(input_ids=x, past_key_values=cache, use_cache=True)
        return out.logits[0].float().cpu(), out.past_key_values

    # (a) prefill in one piece
    cache = DynamicCache(config=cfg)
    caps.clear()
    logits, cache = run(prompt, cache)
    names = ["embed"] + [f"layer{i}" for i in range(tc.num_hidden_layers)] + ["norm"]
    hidden = {n: {str(p): hidden_record(caps[n][0, p]) for p in POSITIONS} for n in names}
    prefill = {"hidden": hidden, "logits": {str(p): logits_record(logits[p]) for p in POSITIONS}}

    # (c) greedy decode after the one-piece prefill
    dec_tokens, dec_logits = [], []
    nxt = int(torch.argmax(logits[-1]))
    for _ in range(DECODE_STEPS):
        dec_tokens.append(nxt)
        step, cache = run([nxt], cache)
        dec_logits.append(logits_record(step[-1]))
        nxt = int(torch.argmax(step[-1]))
    decode = {"prefix": PROMPT_LEN, "tokens": dec_tokens, "logits": dec_logits}

    # (b) prefill in uneven chunks through the cache
    cache = DynamicCache(config=cfg)
    rows, at = [], 0
    for n in CHUNKS:
        part, cache = run(prompt[at:at + n], cache)
        rows.append(part)
        at += n
    assert at == PROMPT_LEN
    all_rows = torch.cat(rows, dim=0)
    chunk_pos = sorted(set(POSITIONS) | {sum(CHUNKS[:i + 1]) - 1 for i in range(len(CHUNKS))})
    chunks = {"sizes": CHUNKS, "logits": {str(p): logits_record(all_rows[p]) for p in chunk_pos}}

    # (d) forks of one prefix, a deep copy of the cache per suffix
    cache = DynamicCache(config=cfg)
    _, cache = run(prompt[:FORK_PREFIX], cache)
    forks = {"prefix": FORK_PREFIX, "suffixes": suffixes, "logits": []}
    for suf in suffixes:
        c = copy.deepcopy(cache)
        out, _ = run(suf, c)
        n = len(suf)
        pos = sorted(set(p for p in (0, 1, 2, n // 2, n - 2, n - 1) if 0 <= p < n))
        forks["logits"].append({str(p): logits_record(out[p]) for p in pos})

    for h in hooks:
        h.remove()

    inv = lm.rotary_emb.inv_freq.detach().float().cpu()
    fresh, _ = lm.rotary_emb.compute_default_rope_parameters(tc)
    golden = {
        "format": FORMAT,
        "command": " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
        "synth": f"build/jev synth --config configs/tiny.json --seed 1 --layout {args.layout} --out MODEL_DIR",
        "versions": {"transformers": transformers.__version__, "torch": torch.__version__, "numpy": np.__version__,
                     "python": platform.python_version()},
        "device": str(dev),
        "layout": args.layout,
        "safetensors_sha256": hashes,
        "inv_freq": [float(v) for v in inv],
        "inv_freq_bits": [int(b) for b in inv.numpy().view(np.uint32)],
        "inv_freq_fresh_equal": bool(torch.equal(inv, fresh.float().cpu())),
        "prompt": prompt,
        "positions": POSITIONS,
        "slice_dims": SLICE_DIMS,
        "stride": STRIDE,
        "top": TOP,
        "prefill": prefill,
        "chunks": chunks,
        "decode": decode,
        "forks": forks,
    }
    with open(args.out, "w") as f:
        json.dump(golden, f, separators=(",", ":"))
    print(f"lm_goldens: wrote {args.out} ({os.path.getsize(args.out)} bytes)")


if __name__ == "__main__":
    main()
