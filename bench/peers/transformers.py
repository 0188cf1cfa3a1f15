#!/usr/bin/env python3
"""
bench/peers/transformers.py - the stock Hugging Face transformers peer of `jev bench`.

What it is: the benchmark's three decision paths (spec/benchmark.md: shared prefix + forked
suffixes in batches, independent full forwards, greedy generate_json) run in plain
transformers (Qwen3_5ForConditionalGeneration, sdpa attention, the pure-torch DeltaNet path)
on the same weights, token ids and pixel values that jev used (the dump of
`jev bench --dump-inputs`, docs/bench-inputs.md), writing the raw record "jev-bench/2"
(docs/bench-schema.md) so that `jev report jev.json peer.json` puts both side by side.
docs/bench-peers.md says what is measured and how to run it.

What it is not: a second engine or a tuned baseline. Nothing here is faster than what a user
of transformers would write: one model, its own cache classes, its own generate().
`--kernels fla` is the same peer with what such a user would pip-install beside it,
flash-linear-attention, which transformers binds for the DeltaNet delta rule
(bench/peers/fla_kernels.py; the record's peer name says so).

Usage (where python3 has torch and transformers):
    transformers.py MODEL_DIR INPUTS_DIR OUT.json [--device cuda|cpu] [--dtype float32|bfloat16]
                    [--threads N] [--counts 1 4 16 64] [--repeats 3] [--batch N|all]
                    [--compare-with JEV.json [--max-delta X]] [--no-phases] [--no-hash]
                    [--kernels torch|fla [--fla-carry DIR]]
    transformers.py --kernels fla --probe-kernels [--fla-carry DIR]             (GPU: fla vs torch)
    transformers.py --compare-with JEV.json --record PEER.json [--max-delta X]   (no torch)
    transformers.py --check-layouts HF_DIR MLX_DIR                              (torch only)
    transformers.py --selftest                                                  (no torch)

Constraints: torch and transformers are imported only by the run itself; the record, the
validator, the manifest checks and the comparison live in jevbench.py (standard library).
Every input problem is a PeerError naming the file and the field; the record is validated
before it is written, and written atomically. This file has the name of the package it
drives, so its own folder is moved to the end of sys.path before anything is imported.
"""

import argparse
import contextlib
import copy
import datetime
import gc
import json
import mmap
import os
import platform
import socket
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ beside the sources (the repository does not ignore it)
_HERE = os.path.dirname(os.path.abspath(__file__))
# with this folder first on sys.path, `import transformers` would import this very file
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE] + [_HERE]

from jevbench import (PATHS, PEER_NAME, PeerError, _no_duplicates, build_record, check_generated,  # noqa: E402
                      compare_records, decision_entry, expected_quant, is_shifted_norm, load_manifest, make_sample,
                      mlx_to_hf_name, quant_shape, sha256_file, softmax_double, st_files, st_header,
                      unpack_codes_py, validate_record, write_json_atomic)


# ---- the run (torch from here on) ----

def _cpu_model():
    try:
        with open("/proc/cpuinfo", "r", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _git_commit(folder):
    try:
        out = subprocess.run(["git", "-C", folder, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        return out.stdout.strip() or None if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def _gpu_driver():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.SubprocessError, IndexError):
        return None


class Meter:
    """Forward counts and phase times from module hooks. Counting happens where the forwards
    run (the vision tower, the language model, the LM head), so nothing is inferred from
    output lengths. With phases on, every hook synchronizes the device first: the time of a
    module is then its own device work, at the cost of a few microseconds per call."""

    def __init__(self, torch, model, device, phases):
        self.torch, self.phases = torch, phases
        self.sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
        self.events = []  # (kind, ms) in call order
        self._start = {}
        mods = {"vision": model.model.visual, "lm": model.model.language_model, "head": model.lm_head}
        for kind, mod in mods.items():
            mod.register_forward_pre_hook(self._pre(kind))
            mod.register_forward_hook(self._post(kind))

    def _pre(self, kind):
        def hook(module, args):
            if self.phases:
                self.sync()
            self._start[kind] = time.perf_counter()
        return hook

    def _post(self, kind):
        def hook(module, args, output):
            if self.phases:
                self.sync()
            self.events.append((kind, (time.perf_counter() - self._start[kind]) * 1000.0))
        return hook

    def reset(self):
        self.events = []

    def times(self, kind):
        return [ms for k, ms in self.events if k == kind]


def load_safetensors_tensors(torch, model_dir):
    """{name: (tensor in its stored dtype, safetensors dtype name)} over the weight files (U32 as int32,
    the same bits). The files are read whole into memory (a few hundred MB for 4-bit)."""
    dt = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "U32": torch.int32,
          "I32": torch.int32, "I64": torch.int64, "U8": torch.uint8, "I8": torch.int8, "F64": torch.float64}
    out = {}
    for fname in st_files(model_dir):
        path = os.path.join(model_dir, fname)
        hdr, start = st_header(path)
        with open(path, "rb") as f:
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)  # writable copy: torch.frombuffer needs it
        for name, e in hdr.items():
            if name in out:
                raise PeerError(f"{path}: tensor '{name}' is in two weight files")
            numel = 1
            for d in e["shape"]:
                numel *= d
            b = e["data_offsets"][0]
            t = torch.frombuffer(mm, dtype=dt[e["dtype"]], count=numel, offset=start + b) if numel else \
                torch.empty(0, dtype=dt[e["dtype"]])
            out[name] = (t.reshape(e["shape"]).clone(), e["dtype"])
        del mm
    return out


def codes_torch(torch, words, bits, in_dim):
    """[rows, packed] int32 words -> [rows, in_dim] int64 codes (the bit stream of
    unpack_codes_py, vectorized)."""
    w = words.to(torch.int64) & 0xFFFFFFFF
    rows, packed = w.shape
    mask = (1 << bits) - 1
    if 32 % bits == 0:
        shifts = torch.arange(0, 32, bits, dtype=torch.int64, device=w.device)
        q = (w.unsqueeze(-1) >> shifts) & mask
        return q.reshape(rows, packed * (32 // bits))[:, :in_dim]
    k = torch.arange(in_dim, dtype=torch.int64, device=w.device) * bits
    word, shift = k // 32, k % 32
    w2 = torch.cat([w, torch.zeros(rows, 1, dtype=torch.int64, device=w.device)], dim=1)
    return ((w2[:, word] | (w2[:, word + 1] << 32)) >> shift) & mask


def dequantize(torch, words, scales, biases, bits, group, in_dim, chunk=8192):
    """W = scale * q + bias per group, in f32 (spec/qwen35.md §10.2), chunked over rows so the
    int64 code tensor stays small."""
    rows = words.shape[0]
    out = torch.empty(rows, in_dim, dtype=torch.float32)
    for r0 in range(0, rows, chunk):
        r1 = min(rows, r0 + chunk)
        q = codes_torch(torch, words[r0:r1], bits, in_dim).to(torch.float32)
        s = scales[r0:r1].to(torch.float32).repeat_interleave(group, dim=1)
        b = biases[r0:r1].to(torch.float32).repeat_interleave(group, dim=1)
        out[r0:r1] = s * q + b
    return out


def mlx_state_dict(torch, model_dir, raw_config, target):
    """The MLX 4-bit directory as an f32 state dict in HF names and layouts, for the keys and
    shapes of `target` (the freshly built model's state dict). Every target key must be
    filled and every stored tensor used; the result is refused otherwise."""
    tensors = load_safetensors_tensors(torch, model_dir)
    qcfg = raw_config.get("quantization", raw_config.get("quantization_config"))
    sd, notes, quantized = {}, [], {}
    for name, (t, dtype) in tensors.items():
        if name.endswith(".scales") or name.endswith(".biases"):
            base = name.rsplit(".", 1)[0]
            if base + ".weight" in tensors and tensors[base + ".weight"][1] == "U32":
                continue  # consumed with its weight
        hf = mlx_to_hf_name(name)
        if hf is None:
            notes.append(name)
            continue
        if hf not in target:
            raise PeerError(f"{model_dir}: tensor '{name}' (HF '{hf}') has no place in Qwen3_5ForConditionalGeneration")
        want = tuple(target[hf].shape)
        base = name.rsplit(".", 1)[0]
        if dtype == "U32" and base + ".scales" in tensors and base + ".biases" in tensors:
            if len(want) != 2:
                raise PeerError(f"tensor '{name}': quantized, but HF '{hf}' is not a matrix {want}")
            sc, bi = tensors[base + ".scales"][0], tensors[base + ".biases"][0]
            if t.shape[0] != want[0] or sc.shape != bi.shape or sc.shape[0] != want[0]:
                raise PeerError(f"tensor '{name}': packed {list(t.shape)}, scales {list(sc.shape)}, "
                                f"biases {list(bi.shape)} do not fit HF {list(want)}")
            bits, group = quant_shape(t.shape[1], sc.shape[1], want[1], name)
            exp = expected_quant(qcfg, base, name)
            if exp is None or tuple(exp) != (bits, group):
                raise PeerError(f"tensor '{name}': quantized with {bits} bits, group size {group} (from its shapes), "
                                f"but config.json says {exp}")
            w = dequantize(torch, t, sc, bi, bits, group, want[1])
            # guard the vectorized decoder with the reference on the first and last rows
            for r in (0, t.shape[0] - 1):
                ref = unpack_codes_py(t[r].tolist(), bits, want[1])
                got = codes_torch(torch, t[r:r + 1], bits, want[1])[0].tolist()
                if ref != got:
                    raise PeerError(f"tensor '{name}': row {r}: vectorized {bits}-bit decode disagrees with the reference")
            quantized[hf] = (bits, group)
        else:
            w = t.to(torch.float32)
            if hf.endswith(".linear_attn.conv1d.weight"):
                w = w.permute(0, 2, 1)  # MLX [C, K, 1] -> HF [C, 1, K]
            elif hf == "model.visual.patch_embed.proj.weight":
                w = w.permute(0, 4, 1, 2, 3)  # MLX channels-last [D, t, y, x, c] -> HF [D, c, t, y, x]
            if is_shifted_norm(hf):
                w = w - 1.0  # MLX stores 1 + w; HF's RMSNorm forms (1 + w) itself
            w = w.contiguous()
        if tuple(w.shape) != want:
            raise PeerError(f"tensor '{name}': shape {list(w.shape)} after conversion, HF '{hf}' wants {list(want)}")
        sd[hf] = w
    tied = "lm_head.weight" in target and "lm_head.weight" not in sd
    if tied:
        sd["lm_head.weight"] = sd.get("model.language_model.embed_tokens.weight")
    missing = [k for k in target if k not in sd or sd[k] is None]
    if missing:
        raise PeerError(f"{model_dir}: no tensor for {len(missing)} HF weights, e.g. {missing[:3]}")
    return sd, tied, notes, quantized


def requantize(torch, w, bits, group):
    """jev synth's quantizer (common/synth/synth-plan.c jev_synth_quantize) in torch, f32 as there:
    per group scale = bf16((max - min) / (2^b - 1)), bias = bf16(min), code = round-half-even
    ((w - bias) / scale) clamped; returns the dequantized f32 values the loader must produce."""
    qmax = float((1 << bits) - 1)
    g = w.reshape(w.shape[0], -1, group)
    mn, mx = g.min(dim=2, keepdim=True).values, g.max(dim=2, keepdim=True).values
    sc = ((mx - mn) / qmax).to(torch.bfloat16).to(torch.float32)
    bi = mn.to(torch.bfloat16).to(torch.float32)
    safe = torch.where(sc > 0, sc, torch.ones_like(sc))
    q = torch.where(sc > 0, torch.round((g - bi) / safe).clamp(0, qmax), torch.zeros_like(g))
    return (sc * q + bi).reshape(w.shape)


def check_layouts(hf_dir, mlx_dir):
    """The MLX conversion path against the HF layout of the same `jev synth` seed: every
    float tensor must come out bit-equal to the HF one (renames, conv and patch-embed
    layouts, the norm shift undone), every quantized one equal to jev's quantizer applied to
    the HF values (the bit stream, scales and biases). Needs torch, not transformers."""
    import torch
    hf = {n: t for n, (t, _) in load_safetensors_tensors(torch, hf_dir).items() if not n.startswith("mtp.")}
    if "lm_head.weight" not in hf:
        hf["lm_head.weight"] = hf["model.language_model.embed_tokens.weight"]
    with open(os.path.join(mlx_dir, "config.json"), "r", encoding="utf-8") as f:
        raw = json.load(f)
    sd, tied, notes, quantized = mlx_state_dict(torch, mlx_dir, raw, hf)
    bad = []
    for name, ref in hf.items():
        want = ref.to(torch.float32)
        q = quantized.get("model.language_model.embed_tokens.weight" if name == "lm_head.weight" and tied else name)
        if q:
            want = requantize(torch, want, *q)
        if not torch.equal(sd[name], want):
            diff = (sd[name] - want).abs().max().item()
            bad.append(f"{name} (max |diff| {diff:.3g})")
    print(f"check-layouts: {len(hf)} tensors, {len(quantized)} quantized, lm head from embedding: {tied}, "
          f"ignored: {len(notes)}")
    for b in bad:
        print(f"MISMATCH {b}")
    print("check-layouts: " + ("ok" if not bad else f"{len(bad)} mismatch(es)"))
    return 0 if not bad else 1


def load_model(torch, tf, model_dir, layout, device, dtype):
    """The model in eval mode on device/dtype, and facts for the record. Both layouts are
    built on the CPU in f32 (as from_pretrained builds), so the rotary tables that the model
    computes at construction are the same whichever layout or device; then the model moves
    to the device and, for bf16, only its parameters are cast (the f32 rotary tables stay)."""
    with open(os.path.join(model_dir, "config.json"), "r", encoding="utf-8") as f:
        raw = json.load(f)
    facts = {"layout": layout}
    cls = tf.Qwen3_5ForConditionalGeneration
    if layout == "hf":
        model, info = cls.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="sdpa",
                                          output_loading_info=True)
        bad = [k for k in info.get("missing_keys", []) if k != "lm_head.weight"] + list(info.get("mismatched_keys", []))
        if bad:
            raise PeerError(f"{model_dir}: from_pretrained left {len(bad)} weights unloaded, e.g. {bad[:3]}")
        facts["unexpected_keys"] = len(info.get("unexpected_keys", []))  # mtp.*: ignored by HF
    else:
        d = {k: v for k, v in raw.items() if k not in ("quantization", "quantization_config")}
        cfg = tf.Qwen3_5Config.from_dict(d)
        try:
            cfg._attn_implementation = "sdpa"
        except (AttributeError, ValueError):
            pass  # the default is sdpa where torch has it; the record says what was used
        # The files' config says "dtype": "bfloat16" (as the official one does), and a model
        # built from a config takes that dtype: force f32 on the config and its parts, or the
        # dequantized weights would be rounded to bf16 on load_state_dict.
        for c in (cfg, getattr(cfg, "text_config", None), getattr(cfg, "vision_config", None)):
            if c is not None:
                c.dtype = torch.float32
        model = cls(cfg).to(torch.float32)  # random init, overwritten below
        not_f32 = [n for n, p in model.named_parameters() if p.dtype != torch.float32]
        if not_f32:
            raise PeerError(f"{model_dir}: the model was built with non-f32 parameters, e.g. {not_f32[:3]}")
        target = model.state_dict()
        sd, tied, notes, quantized = mlx_state_dict(torch, model_dir, raw, target)
        # without an lm_head in the files the head is the embedding (mlx-vlm drops a tied head);
        # mlx_state_dict filled it with the embedding, so the head is right whether the
        # built model shares the tensor or holds a copy
        cfg_tied = raw.get("tie_word_embeddings", raw.get("text_config", {}).get("tie_word_embeddings", False))
        if tied and not cfg_tied:
            raise PeerError(f"{model_dir}: config.json says the LM head is not tied, but the files have no lm_head")
        shared = model.lm_head.weight is model.model.language_model.embed_tokens.weight
        if shared and not tied and not torch.equal(sd["lm_head.weight"], sd["model.language_model.embed_tokens.weight"]):
            raise PeerError("the model ties the LM head to the embedding, but the MLX files hold a different lm_head")
        model.load_state_dict(sd, strict=True)
        del sd
        facts.update({"lm_head_from_embedding": tied, "lm_head_shared": shared, "ignored_tensors": len(notes),
                      "quantized_tensors": len(quantized)})
    model = model.to(device=device)
    if dtype != torch.float32:
        for p in model.parameters():
            p.data = p.data.to(dtype)
    model.eval()
    facts["attn_implementation"] = getattr(model.config, "_attn_implementation", None)
    facts["weights_bytes"] = sum(p.numel() * p.element_size() for p in model.parameters())
    return model, raw, facts


def use_fla(args):
    """With --kernels fla: the carried fla on sys.path (before transformers is imported), then
    imported as transformers will import it. None without."""
    if args.kernels != "fla":
        return None
    import fla_kernels
    carry = fla_kernels.activate(args.fla_carry or fla_kernels.CARRY_DEFAULT)
    import torch
    if not torch.cuda.is_available():
        raise PeerError("--kernels fla: torch sees no CUDA device")
    pre = fla_kernels.preflight(torch)
    log(f"flash-linear-attention {carry['version']} ({carry['tag']}, {carry['commit'][:12]}) from {carry['carry']}, "
        f"triton {pre['triton']}")
    return {"mod": fla_kernels, "carry": carry, "pre": pre}


def probe_kernels(args):
    fla = use_fla(args)
    import torch
    return fla["mod"].probe(torch, fla["pre"])


def run_peer(args):
    fla = use_fla(args)
    import torch
    import transformers as tf
    if not hasattr(tf, "Qwen3_5ForConditionalGeneration"):
        raise PeerError(f"the transformers package found ({getattr(tf, '__file__', '?')}) has no Qwen3.5 model: "
                        "install transformers >= 5 where this runs")

    device = args.device
    if device == "cuda" and not torch.cuda.is_available():
        raise PeerError("--device cuda: torch sees no CUDA device")
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[args.dtype]
    if args.threads:
        torch.set_num_threads(args.threads)
    # f32 means f32: no TF32 in matmuls or convolutions (the patch embedding is a Conv3d)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    if sys.byteorder != "little":
        raise PeerError("the pixel dump is little-endian; this host is not")

    with open(os.path.join(args.model_dir, "config.json"), "r", encoding="utf-8") as f:
        raw_cfg = json.load(f)
    text_cfg = raw_cfg.get("text_config", raw_cfg)
    vis_cfg = raw_cfg.get("vision_config", {})
    merge = vis_cfg.get("spatial_merge_size", 2)
    patch_dim = vis_cfg.get("in_channels", 3) * vis_cfg.get("temporal_patch_size", 2) * vis_cfg.get("patch_size", 16) ** 2
    man = load_manifest(args.inputs_dir, merge, text_cfg.get("vocab_size"), patch_dim)
    image_id = man["special_ids"]["image_token_id"]
    if raw_cfg.get("image_token_id") != image_id:
        raise PeerError(f"manifest special_ids.image_token_id {image_id} != config.json image_token_id "
                        f"{raw_cfg.get('image_token_id')}: transformers would not find the image tokens")
    runs = {r["decisions"]: r for r in man["runs"]}
    counts = args.counts or sorted(runs)
    for n in counts:
        if n not in runs:
            raise PeerError(f"--counts {n}: the dump has runs for {sorted(runs)} only")
    counts = sorted(set(counts))
    batch = args.batch if args.batch is not None else man["settings"]["batch"]

    # same weights as jev: hash what we load (outside every timing)
    weights = []
    for w in man["model"]["weights"]:
        p = os.path.join(args.model_dir, w["file"])
        if not os.path.exists(p):
            raise PeerError(f"{p}: the weight file jev loaded is not in MODEL_DIR")
        digest = None if args.no_hash else sha256_file(p)
        if digest and w.get("sha256") and digest != w["sha256"]:
            raise PeerError(f"{p}: sha256 {digest} differs from the dump's {w['sha256']}: not the weights jev ran")
        weights.append({"file": w["file"], "bytes": os.path.getsize(p), "sha256": digest or w.get("sha256")})
    pfile = os.path.join(args.inputs_dir, man["pixel_values"]["file"])
    if man["pixel_values"].get("sha256") and not args.no_hash:
        if sha256_file(pfile) != man["pixel_values"]["sha256"]:
            raise PeerError(f"{pfile}: sha256 differs from the manifest")
    with open(pfile, "rb") as f:
        pix_bytes = bytearray(f.read())
    pixels = torch.frombuffer(pix_bytes, dtype=torch.float32).reshape(man["pixel_values"]["shape"])
    grid = man["pixel_values"]["grid_thw"]
    eos = man["eos_token_ids"]

    t0 = time.time()
    model, raw, facts = load_model(torch, tf, args.model_dir, man["model"]["layout"], device, dtype)
    log(f"model loaded in {time.time() - t0:.1f} s ({facts})")
    torch_codes = {}
    if fla:  # no silent fallback: every DeltaNet layer must call fla's delta rule
        facts["kernels"], torch_codes = fla["mod"].check_binding(model, fla["pre"])
        facts["kernels"]["fla"] = fla["carry"]
        log(f"kernels: {facts['kernels']}")
    model.generation_config = tf.GenerationConfig(do_sample=False, num_beams=1, eos_token_id=list(eos),
                                                  pad_token_id=eos[0])
    tokenizer = None
    tok_path = args.tokenizer or os.path.join(args.model_dir, "tokenizer.json")
    if os.path.exists(tok_path):
        try:
            from tokenizers import Tokenizer
            tokenizer = Tokenizer.from_file(tok_path)
        except ImportError:
            log("tokenizers is not installed: generate_json outputs stay undecoded (recorded invalid, ids kept)")
    else:
        log(f"{tok_path}: no tokenizer: generate_json outputs stay undecoded (recorded invalid, ids kept)")
    meter = Meter(torch, model, device, not args.no_phases)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    vocab = model.config.get_text_config().vocab_size

    def label_probs(row, labels):
        """Softmax over the candidate labels' logits in double (row: [vocab] logits)."""
        x = row.index_select(0, torch.tensor(labels, device=row.device)).float().cpu().tolist()
        return softmax_double([float(v) for v in x])

    def to_dev(ids):
        return torch.tensor([ids], dtype=torch.long, device=device)

    def image_inputs(ids):
        return dict(pixel_values=pixels.to(device=device, dtype=dtype),
                    image_grid_thw=torch.tensor([grid], dtype=torch.long, device=device),
                    mm_token_type_ids=(ids == image_id).to(torch.int32))

    def path_independent(run, idx):
        out, norm_ms = [], 0.0
        for i in idx:
            ids = to_dev(run["independent"]["prompt_ids"][i])
            o = model(input_ids=ids, use_cache=False, logits_to_keep=1, **image_inputs(ids))
            t = time.perf_counter()
            out.append(label_probs(o.logits[0, -1], run["label_ids"][i]))
            norm_ms += (time.perf_counter() - t) * 1000.0
        return out, {"norm_ms": norm_ms}

    def path_shared(run, idx):
        ids = to_dev(run["shared"]["prefix_ids"])
        pre = model.model(input_ids=ids, use_cache=True, **image_inputs(ids))
        cache = pre.past_key_values
        want = run["shared"]["rope_delta"]
        got = int(model.model.rope_deltas.reshape(-1)[0].item())
        if want is not None and got != want:
            raise PeerError(f"{run['decisions']} decisions: transformers' M-RoPE delta {got} != jev's {want}: "
                            "the image positions differ")
        out, norm_ms, fork_ms = [], 0.0, 0.0
        step = len(idx) if batch == "all" else batch
        for s in range(0, len(idx), step):
            part = idx[s:s + step]
            t = time.perf_counter()
            fork = copy.deepcopy(cache)  # every layer's K/V, conv window and recurrent state
            fork.reorder_cache(torch.zeros(len(part), dtype=torch.long, device=device))  # ... b ways
            sync()
            fork_ms += (time.perf_counter() - t) * 1000.0
            sufs = [run["shared"]["suffix_ids"][i] for i in part]
            width = max(len(x) for x in sufs)
            # right padding: causal attention, causal conv and the causal delta rule never let a
            # pad reach an earlier position, and only each row's last real token is read
            rows = [x + [eos[0]] * (width - len(x)) for x in sufs]
            last = [len(x) - 1 for x in sufs]
            keep = sorted(set(last))
            o = model(input_ids=torch.tensor(rows, dtype=torch.long, device=device), past_key_values=fork,
                      use_cache=True, logits_to_keep=torch.tensor(keep, dtype=torch.long, device=device))
            t = time.perf_counter()
            for j, i in enumerate(part):
                out.append(label_probs(o.logits[j, keep.index(last[j])], run["label_ids"][i]))
            norm_ms += (time.perf_counter() - t) * 1000.0
            del fork, o
        return out, {"norm_ms": norm_ms, "fork_ms": fork_ms, "batches": -(-len(idx) // step)}

    def path_generate(run, n):
        ids = to_dev(run["generate_json"]["prompt_ids"])
        gen = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                             max_new_tokens=run["generate_json"]["max_new_tokens"], do_sample=False,
                             eos_token_id=list(eos), pad_token_id=eos[0], **image_inputs(ids))
        new = gen[0, ids.shape[1]:].tolist()
        stopped = bool(new) and new[-1] in eos
        body = new[:-1] if stopped else new
        text, reason = None, None
        if tokenizer is not None:
            try:  # ids the tokenizer does not know are dropped by tokenizers' decode
                text = tokenizer.decode(body, skip_special_tokens=False)
            except Exception as e:  # noqa: BLE001 - a decode failure makes the output invalid, not the run
                reason = f"decode failed: {e}"
        valid, choices, why = check_generated(text, run["decision_ids"][:n], run["options"][:n])
        reason = reason or why
        return (text, valid, choices), {"generated_ids": new, "new_tokens": len(new), "stopped_at_eos": stopped,
                                        "invalid_reason": reason or None}

    def request(path, run, n):
        """One measured request of n decisions; returns the sample's fields."""
        idx = list(range(n))
        meter.reset()
        sync()
        t = time.perf_counter()
        if path == "independent":
            probs, ex = path_independent(run, idx)
        elif path == "shared":
            probs, ex = path_shared(run, idx)
        else:
            res, ex = path_generate(run, n)
        if path != "generate_json":
            decs = [decision_entry(run["decision_ids"][i], run["options"][i], probs=p) for i, p in zip(idx, probs)]
            valid, output = True, None
        else:
            text, valid, choices = res
            decs = [decision_entry(run["decision_ids"][i], run["options"][i], choice=choices[i]) for i in idx]
            output = text
        sync()
        total = (time.perf_counter() - t) * 1000.0
        vis, lm, head = meter.times("vision"), meter.times("lm"), meter.times("head")
        f = {"total_ms": total, "lm_forwards": len(lm), "vision_forwards": len(vis), "valid": valid,
             "output": output, "decisions": decs, "extra": ex}
        if not args.no_phases:
            norm = ex.pop("norm_ms", 0.0)
            f["vision_ms"] = sum(vis)
            if path == "independent":
                f["prefill_ms"], f["scoring_ms"] = sum(lm), sum(head) + norm
            else:  # the first LM forward is the context; the rest are suffixes / decode steps
                f["prefill_ms"], f["scoring_ms"] = sum(lm[:1]), sum(lm[1:]) + sum(head) + norm
        else:
            ex.pop("norm_ms", None)
        return f

    env = environment(torch, tf, args, man, weights, facts, vocab)
    if fla:
        env["peer"]["name"] = fla["mod"].PEER_NAME
        env["libraries"].update({fla["mod"].DISTRIBUTION: fla["carry"]["version"], "triton": fla["pre"]["triton"]})
    note = ("transformers peer (bench/peers/transformers.py): stock Qwen3_5ForConditionalGeneration on the "
            "weights, token ids and pixel values of jev's dump. Total time excludes image decoding, "
            "preprocessing and tokenization (done by jev before the dump) and includes the host-to-device copy "
            "of ids and pixels. generate_json prefills in one forward (prefill_chunk null). "
            + ("peak_bytes: torch.cuda.max_memory_allocated, weights included (environment.extra.weights_bytes)."
               if device == "cuda" else
               "peak_bytes null: on CPU torch has no allocation counter comparable to jev's arena peaks, and RSS "
               "is not what the schema measures."))
    if fla:
        note += (" Kernels: flash-linear-attention " + fla["carry"]["version"] + " (Triton) for the DeltaNet delta "
                 "rule (chunked and recurrent), bound by transformers and checked per layer "
                 "(environment.extra.kernels); the gated RMSNorm and the causal convolution stay transformers' torch "
                 "code (causal-conv1d, a CUDA extension, is not installed). The warm-up also runs the shared path "
                 "once at every count (Triton autotunes kernels keyed on the batch size).")

    def write(done, samples):
        """The record of the counts finished so far: written after every count, so that a run cut short
        (a machine taken back) still leaves the rows it measured; settings.counts names only those."""
        settings = {
            "counts": done, "repeats": args.repeats, "warmup": 1, "batch": batch, "paths": list(PATHS),
            "scoring": "label", "image_max_side": man["settings"]["image_max_side"] or 768,
            "prefill_chunk": None,  # generate() prefills the prompt in one forward
            "max_new_tokens_min": man["settings"]["max_new_tokens_min"],
            "max_new_tokens_per_decision": man["settings"]["max_new_tokens_per_decision"],
            "order": "rotated", "workload": man.get("workload"),
            "extra": {"inputs_dir": os.path.abspath(args.inputs_dir), "phases": not args.no_phases,
                      "counts_requested": counts, "kernels": args.kernels,
                      "warmup_shared_per_count": bool(fla)},
        }
        part = "" if done == counts else f" Partial: counts {done} of the requested {counts} were run."
        rec = build_record(env, settings, samples, note + part)
        validate_record(rec)
        write_json_atomic(args.out, rec)
        log(f"wrote {args.out}" + (f" (counts {done} so far)" if part else ""))
        return rec

    smallest = runs[counts[0]]
    with torch.no_grad():  # (not inference_mode: the shared path deep-copies the cache's tensors)
        counter = fla["mod"].CallCounter({**fla["pre"]["codes"], **torch_codes}) if fla else None
        with counter or contextlib.nullcontext():
            for p in PATHS:  # warm once per path on one decision
                t = time.perf_counter()
                request(p, runs[1] if 1 in runs else smallest, 1)
                log(f"warm-up {p}: {time.perf_counter() - t:.1f} s")
            # fla: Triton compiles and autotunes at a kernel's first call per key, and some keys hold the
            # batch size, which only the shared path varies (its suffix batches): one pass per count
            for n in counts if fla else []:
                t = time.perf_counter()
                request("shared", runs[n], n)
                log(f"warm-up shared at {n}: {time.perf_counter() - t:.1f} s")
        if fla:
            fla["mod"].check_calls(counter.counts)
            env["extra"]["kernels"]["warmup_calls"] = dict(counter.counts)  # into the record
            log(f"warm-up calls: {counter.counts}")
        log("warm-up done")
        samples = {}
        for ci, n in enumerate(counts):
            for rep in range(args.repeats):
                order = PATHS[rep % len(PATHS):] + PATHS[:rep % len(PATHS)]
                for k, p in enumerate(order):
                    gc.collect()  # allocator housekeeping stays outside the measured time
                    if device == "cuda":
                        torch.cuda.synchronize()
                        torch.cuda.reset_peak_memory_stats()
                    f = request(p, runs[n], n)
                    peak = int(torch.cuda.max_memory_allocated()) if device == "cuda" else None
                    s = make_sample(n, rep, k, f["total_ms"], f.get("vision_ms"), f.get("prefill_ms"),
                                    f.get("scoring_ms"), f["lm_forwards"], f["vision_forwards"], peak,
                                    "cuda" if peak is not None else None, f["valid"], f["output"], f["decisions"],
                                    f["extra"])
                    samples.setdefault((n, p), []).append(s)
                    log(f"{n:3d} {p:14s} r{rep} {f['total_ms']:10.1f} ms  lm {f['lm_forwards']:4d}  "
                        f"vision {f['vision_forwards']:3d}  valid {f['valid']}")
            rec = write(counts[:ci + 1], samples)
    return rec


def environment(torch, tf, args, man, weights, facts, vocab):
    libs = {"python": platform.python_version(), "torch": torch.__version__, "transformers": tf.__version__}
    for mod in ("tokenizers", "safetensors", "numpy"):
        try:
            libs[mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001 - an optional library that is absent is simply not listed
            pass
    if torch.version.cuda:
        libs["cuda"] = str(torch.version.cuda)
    if torch.backends.cudnn.is_available():
        libs["cudnn"] = str(torch.backends.cudnn.version())
    # fast kernels change numerics: say whether they could have been used
    fast = {}
    for mod in ("fla", "causal_conv1d", "kernels", "flash_attn"):
        try:
            __import__(mod)
            fast[mod] = True
        except Exception:  # noqa: BLE001
            fast[mod] = False
    gpu = None
    if args.device == "cuda":
        props = torch.cuda.get_device_properties(0)
        gpu = {"name": torch.cuda.get_device_name(0), "driver": _gpu_driver(), "memory_bytes": int(props.total_memory)}
    here = os.path.dirname(os.path.abspath(__file__))
    return {
        "peer": {"name": PEER_NAME, "version": tf.__version__},
        "jev": {"version": man["jev"].get("version"), "git_commit": _git_commit(here) or man["jev"].get("git_commit")},
        "model": {"id": man["model"]["id"], "dir": os.path.abspath(args.model_dir),
                  "synthetic": man["model"].get("synthetic"), "weights": weights},
        "image": {k: man["image"][k] for k in ("path", "sha256", "width", "height", "resized_width", "resized_height")},
        "libraries": libs,
        "compiler": None,
        "cpu": {"model": _cpu_model(), "cores": os.cpu_count(), "threads": torch.get_num_threads()},
        "backend": f"{args.device}-{'f32' if args.dtype == 'float32' else 'bf16'}",
        "gpu": gpu,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": socket.gethostname() or None,
        "os": f"{platform.system()} {platform.release()} {platform.machine()}",
        "extra": {"device": args.device, "dtype": args.dtype, "tf32": False, "vocab_size": vocab,
                  "fast_kernels_importable": fast, **facts},
    }


def log(msg):
    print(f"[peer] {msg}", file=sys.stderr, flush=True)


# ---- command line ----

def parse_args(argv):
    ap = argparse.ArgumentParser(description="transformers peer of jev bench (docs/bench-peers.md)")
    ap.add_argument("model_dir", nargs="?", help="the model directory jev ran (hf or mlx4 layout)")
    ap.add_argument("inputs_dir", nargs="?", help="the folder of `jev bench --dump-inputs`")
    ap.add_argument("out", nargs="?", help="the jev-bench/2 record to write")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    ap.add_argument("--counts", type=int, nargs="+", default=None, help="decision counts (default: all dumped)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch", default=None, help="shared-path batch, N or all (default: the dump's)")
    ap.add_argument("--tokenizer", default=None, help="tokenizer.json to decode generate_json (default: MODEL_DIR's)")
    ap.add_argument("--no-phases", action="store_true", help="no per-module synchronization: totals only")
    ap.add_argument("--no-hash", action="store_true", help="skip the sha256 of weights and pixels")
    ap.add_argument("--compare-with", default=None, metavar="JEV.json", help="print max probability deltas vs jev")
    ap.add_argument("--record", default=None, metavar="PEER.json", help="with --compare-with: compare this record")
    ap.add_argument("--max-delta", type=float, default=None, help="exit 3 when a scoring delta exceeds this")
    ap.add_argument("--selftest", action="store_true", help="check the record builder and validator (no torch)")
    ap.add_argument("--check-layouts", nargs=2, metavar=("HF_DIR", "MLX_DIR"), default=None,
                    help="check the MLX conversion against the hf layout of the same synth seed (torch only)")
    ap.add_argument("--kernels", choices=["torch", "fla"], default="torch",
                    help="fla: transformers with flash-linear-attention's delta rule (bench/peers/fla_kernels.py)")
    ap.add_argument("--fla-carry", default=None, metavar="DIR",
                    help="the fla packed by scripts/device/fla-carry.sh (default: .carry-fla in the repository)")
    ap.add_argument("--probe-kernels", action="store_true",
                    help="with --kernels fla: fla's delta rule against transformers' torch one on random tensors")
    a = ap.parse_args(argv)
    if a.batch is not None and a.batch != "all":
        try:
            a.batch = int(a.batch)
        except ValueError:
            ap.error("--batch: N or all")
        if a.batch < 1:
            ap.error("--batch: N >= 1")
    if a.repeats < 1 or a.repeats > 1000:
        ap.error("--repeats: 1..1000")
    why = kernel_args_error(a)
    if why:
        ap.error(why)
    if not a.selftest and not a.check_layouts and not a.record and not a.probe_kernels and \
            not (a.model_dir and a.inputs_dir and a.out):
        ap.error("MODEL_DIR INPUTS_DIR OUT.json are required (or --selftest, or --compare-with with --record)")
    if a.record and not a.compare_with:
        ap.error("--record needs --compare-with")
    return a


def kernel_args_error(a):
    """None, or why --kernels / --fla-carry / --probe-kernels do not go with the rest."""
    if a.fla_carry and a.kernels != "fla":
        return "--fla-carry needs --kernels fla"
    if a.kernels == "fla" and (a.selftest or a.check_layouts or a.record):
        return "--kernels fla runs the peer (or --probe-kernels); not with --selftest, --check-layouts or --record"
    from fla_kernels import check_args
    return check_args(a.kernels, a.device, a.dtype, a.probe_kernels)


def _load_record(path):
    try:
        with open(path, "r", encoding="utf-8") as f:
            rec = json.load(f, object_pairs_hook=_no_duplicates)
    except (OSError, ValueError) as e:
        raise PeerError(f"{path}: {e}")
    try:
        validate_record(rec)
    except PeerError as e:
        raise PeerError(f"{path}: {e}")
    return rec


def main(argv):
    a = parse_args(argv)
    try:
        if a.selftest:
            import peer_selftest
            return peer_selftest.run()
        if a.check_layouts:
            return check_layouts(*a.check_layouts)
        if a.probe_kernels:
            return probe_kernels(a)
        peer = _load_record(a.record) if a.record else run_peer(a)
        if a.compare_with:
            jev = _load_record(a.compare_with)
            lines, worst = compare_records(peer, jev)
            print(f"peer {a.record or a.out} vs jev {a.compare_with}")
            print("\n".join(lines))
            if a.max_delta is not None and worst is not None and worst > a.max_delta:
                print(f"max delta {worst:.3e} exceeds --max-delta {a.max_delta:g}")
                return 3
        return 0
    except PeerError as e:
        print(f"transformers peer: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
