#!/usr/bin/env python3
"""vision_goldens.py - reference goldens for jev's image path, from PIL + transformers + torch.

Run where python3 has torch 2.11, torchvision 0.26, transformers 5.17, pillow, numpy, safetensors (no network
needed). Everything runs on the CPU on purpose: the processor's uint8 resize is torch's CPU kernel (the one jev
reproduces), and CPU f32 avoids cuDNN's TF32 convolutions.

    make -j2
    build/jev synth --config configs/tiny.json --seed 1 --layout hf   --out /tmp/jev-tiny-hf
    build/jev synth --config configs/tiny.json --seed 1 --layout mlx4 --out /tmp/jev-tiny-mlx4
    python3 scripts/reference/vision_goldens.py --repo . --tiny-hf /tmp/jev-tiny-hf \\
        --tiny-mlx4 /tmp/jev-tiny-mlx4 --out /tmp/jev-vision-goldens
    cp /tmp/jev-vision-goldens/* tests/golden/

Inputs read from the repo: assets/dog.jpg, tests/data/*.png, configs/preprocessor_config.json.
Outputs written to --out (all small; the two PNGs are lossless copies of the processor's resized uint8 images):
    vision-decode.json       PIL Image.open + convert("RGB") of every test image: mode, size, sha256 of the RGB
                             bytes, the pixels of the small files, per-row sums of the large ones, and the
                             exif_transpose variant for the EXIF files.
    vision-preprocess.json   the processor on the dog photo (bounded within 768: forced to the bounded target
                             608x768 by wrapping smart_resize) and on tests/data/alpha-257x181.png (unbounded):
                             target, grid, sha256 of the resized uint8 image (HWC), per-row sums and a strided
                             sample of pixel_values.
    vision-dog-resized.png, vision-alpha-resized.png   the processor's resized uint8 images.
    vision-tower-hf.json, vision-tower-mlx4.json       the tiny model's vision tower (f32) on a formula image
                             (96x128, do_resize=False) - full output and per-stage slices - and on the dog's
                             pixel_values (strided rows, row sums); torch's inv_freq with its bit patterns;
                             the sha256 of the model.safetensors it read.
    vision-mm-hf.json, vision-mm-mlx4.json             a full multimodal forward of the tiny model (text ids +
                             image pads): get_rope_index positions and rope_delta, and logits at a few
                             positions (top-10, a slice, sum and sum of squares).
For mlx4 the quantized tensors are dequantized to f32 with MLX's formula (w = scale * q + bias, f32) and the
MLX names/layouts/pre-shifted norms are mapped back to the HF module names.
"""
import argparse
import hashlib
import inspect
import json
import os
import platform
import struct
import sys

import numpy as np
import PIL
import torch
import torchvision
import transformers
from PIL import Image, ImageOps

TEST_PNGS = ["grey1.png", "grey2.png", "grey4.png", "grey8.png", "grey16.png", "grey8-trns.png", "ga8.png",
             "ga16.png", "rgb8.png", "rgb16.png", "rgba8.png", "rgba16.png", "pal8.png", "pal4.png", "pal1.png",
             "rgb8-adam7.png", "rgb8-exif6.png", "rgb8-exif8-mm.png", "alpha-257x181.png"]
BOUND = 768  # the benchmark's "resized within 768x768"


def sha256(b):
    return hashlib.sha256(b).hexdigest()


def file_sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def f32_bits(x):
    return struct.pack("<f", float(x)).hex()


def versions(cmd):
    return {
        "command": cmd,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "transformers": transformers.__version__,
        "pillow": PIL.__version__,
        "numpy": np.__version__,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "platform": platform.platform(),
    }


def write_json(out, name, obj):
    path = os.path.join(out, name)
    with open(path, "w") as f:
        json.dump(obj, f, separators=(",", ":"))
    print(f"{name}: {os.path.getsize(path)} bytes")


# ---- decoding ----

def rgb_info(img, full):
    a = np.asarray(img.convert("RGB"), dtype=np.uint8)
    d = {"width": int(a.shape[1]), "height": int(a.shape[0]), "sha256": sha256(a.tobytes()),
         "row_sums": [int(v) for v in a.reshape(a.shape[0], -1).sum(axis=1, dtype=np.int64)]}
    if full:
        d["rgb"] = [int(v) for v in a.reshape(-1)]
    return d


def decode_goldens(repo, meta):
    files = {}
    for name in TEST_PNGS + ["dog.jpg"]:
        path = os.path.join(repo, "assets", name) if name == "dog.jpg" else os.path.join(repo, "tests", "data", name)
        im = Image.open(path)
        entry = {"mode": im.mode, **rgb_info(im, full=im.width * im.height <= 64)}
        if "exif" in name:
            entry["exif_transposed"] = rgb_info(ImageOps.exif_transpose(Image.open(path)), full=True)
        files[name] = entry
    return {"meta": meta, "files": files}


# ---- the processor ----

def make_processor(repo):
    """The processor transformers builds from configs/preprocessor_config.json; it must be the torchvision
    backend (the v5 default, the one jev matches), else the Qwen2VLImageProcessor class is built by hand."""
    from transformers import AutoImageProcessor
    cfg_dir = os.path.join(repo, "configs")
    proc = None
    try:
        proc = AutoImageProcessor.from_pretrained(cfg_dir)
    except Exception as e:
        print("AutoImageProcessor failed:", e)
    if proc is None or getattr(proc, "backend", None) != "torchvision":
        print("building Qwen2VLImageProcessor (torchvision backend) directly")
        from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor
        cfg = json.load(open(os.path.join(cfg_dir, "preprocessor_config.json")))
        keep = ["size", "patch_size", "temporal_patch_size", "merge_size", "image_mean", "image_std"]
        proc = Qwen2VLImageProcessor(**{k: cfg[k] for k in keep if k in cfg})
    return proc


def size_get(size, key):
    v = getattr(size, key, None)
    if v is None and isinstance(size, dict):
        v = size.get(key)
    return v


def run_processor(proc, img, target=None, do_resize=True):
    """pixel_values, grid, and the uint8 image the processor's resize produced (HWC), optionally forcing the
    resize target by wrapping the smart_resize that Qwen2VLImageProcessor.resize calls."""
    captured = []
    orig_resize = proc.resize

    def recording_resize(*a, **k):
        out = orig_resize(*a, **k)
        captured.append(out.detach().clone())
        return out

    proc.resize = recording_resize
    g = type(proc).resize.__globals__
    real_smart = g.get("smart_resize")
    if target is not None:
        assert real_smart is not None, "Qwen2VLImageProcessor.resize no longer calls smart_resize"

        def forced(height, width, factor=28, min_pixels=56 * 56, max_pixels=14 * 14 * 4 * 1280):
            return target

        g["smart_resize"] = forced
    try:
        out = proc(images=[img], do_resize=do_resize, return_tensors="pt")
    finally:
        proc.resize = orig_resize
        if real_smart is not None:
            g["smart_resize"] = real_smart
    pv = out["pixel_values"].to(torch.float32)
    thw = out["image_grid_thw"]
    resized = None
    if captured:
        t = captured[-1]
        assert t.dtype == torch.uint8, f"the resize returned {t.dtype}, not uint8"
        resized = t.reshape(-1, t.shape[-2], t.shape[-1]).permute(1, 2, 0).contiguous().numpy()
    return pv, thw, resized


def bounded_target(h, w, proc):
    """The benchmark's bound, then the processor's own smart_resize (the rule jev implements)."""
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize
    s = min(1.0, BOUND / max(h, w))
    hb, wb = (round(h * s), round(w * s)) if s < 1.0 else (h, w)
    factor = proc.patch_size * proc.merge_size
    return smart_resize(hb, wb, factor=factor, min_pixels=size_get(proc.size, "shortest_edge"),
                        max_pixels=size_get(proc.size, "longest_edge")), (hb, wb)


def pv_summary(pv):
    a = pv.numpy().astype(np.float64)
    flat = pv.numpy().reshape(-1)
    stride = 997
    idx = [(i * stride) % flat.size for i in range(2000)]
    return {"rows": int(a.shape[0]), "cols": int(a.shape[1]), "row_sums": [float(v) for v in a.sum(axis=1)],
            "sample_stride": stride, "samples": [[int(i), float(flat[i])] for i in idx]}


def preprocess_goldens(repo, out, proc, meta):
    res = {"meta": meta, "processor": type(proc).__name__,
           "backend": getattr(proc, "backend", "?"), "images": {}}
    dog = Image.open(os.path.join(repo, "assets", "dog.jpg"))
    (th, tw), (hb, wb) = bounded_target(dog.height, dog.width, proc)
    pv, thw, resized = run_processor(proc, dog, target=(th, tw))
    Image.fromarray(resized).save(os.path.join(out, "vision-dog-resized.png"), optimize=True)
    res["images"]["dog"] = {"source": "assets/dog.jpg", "bound": BOUND, "bounded": [hb, wb], "target": [th, tw],
                            "grid": [int(v) for v in thw[0]], "resized_sha256": sha256(resized.tobytes()),
                            "resized_png": "vision-dog-resized.png", "pixel_values": pv_summary(pv)}
    alpha = Image.open(os.path.join(repo, "tests", "data", "alpha-257x181.png"))
    pv2, thw2, resized2 = run_processor(proc, alpha)
    Image.fromarray(resized2).save(os.path.join(out, "vision-alpha-resized.png"), optimize=True)
    res["images"]["alpha"] = {"source": "tests/data/alpha-257x181.png", "bound": 0,
                              "target": [int(resized2.shape[0]), int(resized2.shape[1])],
                              "grid": [int(v) for v in thw2[0]], "resized_sha256": sha256(resized2.tobytes()),
                              "resized_png": "vision-alpha-resized.png", "pixel_values": pv_summary(pv2)}
    return res, pv, thw


# ---- the tiny model ----

def formula_image(h=96, w=128):
    """The tower's isolated input: a uint8 image from a formula (tests/test-vision-golden.c repeats it)."""
    y, x, c = np.meshgrid(np.arange(h), np.arange(w), np.arange(3), indexing="ij")
    return ((x * 7 + y * 13 + c * 50 + (x * y) % 17) % 256).astype(np.uint8)


MLX_SHIFTED = ("input_layernorm.weight", "post_attention_layernorm.weight", "q_norm.weight", "k_norm.weight")


def unpack_codes(w_u32, bits, in_dim):
    """MLX affine codes: each row a little-endian bit stream of `bits`-bit codes."""
    b = np.ascontiguousarray(w_u32.astype("<u4")).view(np.uint8)
    bitarr = np.unpackbits(b, axis=1, bitorder="little")[:, : in_dim * bits]
    bitarr = bitarr.reshape(w_u32.shape[0], in_dim, bits).astype(np.uint32)
    return (bitarr << np.arange(bits, dtype=np.uint32)).sum(axis=2, dtype=np.uint32)


def to_numpy_u32(t):
    return t.view(torch.int32).numpy().view(np.uint32) if t.dtype != torch.int32 else t.numpy().view(np.uint32)


def load_state_dict(model_dir, layout):
    from safetensors.torch import load_file
    files = sorted(f for f in os.listdir(model_dir) if f.endswith(".safetensors"))
    raw = {}
    for f in files:
        raw.update(load_file(os.path.join(model_dir, f)))
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    if layout == "hf":
        return {k: v.to(torch.float32) for k, v in raw.items()}
    q = cfg.get("quantization") or cfg.get("quantization_config")
    group, bits = int(q["group_size"]), int(q["bits"])
    sd = {}
    for k, v in raw.items():
        if k.endswith(".scales") or k.endswith(".biases"):
            continue
        base = k[: -len(".weight")] if k.endswith(".weight") else None
        if base is not None and base + ".scales" in raw:
            scales = raw[base + ".scales"].to(torch.float32).numpy()
            biases = raw[base + ".biases"].to(torch.float32).numpy()
            g = group if group else None
            in_dim = scales.shape[1] * g
            b = int(round(32 * v.shape[1] / in_dim))
            assert b == bits or b in (2, 3, 4, 5, 6, 8), (k, b)
            codes = unpack_codes(to_numpy_u32(v), b, in_dim).astype(np.float32)
            s_full = np.repeat(scales, g, axis=1).astype(np.float32)
            b_full = np.repeat(biases, g, axis=1).astype(np.float32)
            w = s_full * codes  # f32 product, then f32 sum: jev's (and MLX's) dequantization
            w = w + b_full
            t = torch.from_numpy(np.ascontiguousarray(w, dtype=np.float32))
        else:
            t = v.to(torch.float32)
        name = k
        if name.startswith("vision_tower."):
            name = "model.visual." + name[len("vision_tower."):]
        elif name.startswith("language_model.model."):
            name = "model.language_model." + name[len("language_model.model."):]
        elif name.startswith("language_model.lm_head."):
            name = "lm_head." + name[len("language_model.lm_head."):]
        if name.endswith("patch_embed.proj.weight") and t.dim() == 5:  # MLX channels-last [D, T, P, P, C]
            t = t.permute(0, 4, 1, 2, 3).contiguous()
        if name.endswith("linear_attn.conv1d.weight") and t.dim() == 3 and t.shape[2] == 1:  # MLX [C, K, 1]
            t = t.permute(0, 2, 1).contiguous()
        if name.endswith(MLX_SHIFTED) or name == "model.language_model.norm.weight":  # MLX stores 1 + w
            t = t - 1.0
        sd[name] = t
    return sd


def load_model(model_dir, layout):
    from transformers import Qwen3_5Config, Qwen3_5ForConditionalGeneration
    cfg = Qwen3_5Config.from_pretrained(model_dir)
    try:
        model = Qwen3_5ForConditionalGeneration._from_config(cfg, attn_implementation="eager", dtype=torch.float32)
    except Exception as e:
        print("_from_config(attn_implementation='eager') failed, default construction:", e)
        model = Qwen3_5ForConditionalGeneration(cfg)
    model = model.to(torch.float32).eval()
    sd = load_state_dict(model_dir, layout)
    missing, unexpected = model.load_state_dict(sd, strict=False)
    missing = [m for m in missing if m != "lm_head.weight"]
    if missing or unexpected:
        raise SystemExit(f"{model_dir}: state dict mismatch: missing {missing[:10]}, unexpected {unexpected[:10]}")
    if "lm_head.weight" not in sd:  # tied: the head is the embedding
        emb = model.model.language_model.embed_tokens.weight
        if model.lm_head.weight.data_ptr() != emb.data_ptr():
            with torch.no_grad():
                model.lm_head.weight.copy_(emb)
    st = sorted(f for f in os.listdir(model_dir) if f.endswith(".safetensors"))
    return model, {f: file_sha256(os.path.join(model_dir, f)) for f in st}


def slice2d(t, rows=2, cols=8):
    a = t.detach().to(torch.float32).numpy()
    return {"shape": list(a.shape), "first": [[float(v) for v in a[r, :cols]] for r in range(min(rows, a.shape[0]))],
            "last": [float(v) for v in a[-1, :cols]], "row_sums": [float(v) for v in a.astype(np.float64).sum(1)]}


@torch.no_grad()
def tower_goldens(model, shas, proc, dog_pv, dog_thw, meta):
    visual = model.model.visual
    stages = {}
    hooks = [visual.patch_embed.register_forward_hook(lambda m, i, o: stages.__setitem__("patch_embed", o)),
             visual.blocks[0].register_forward_pre_hook(lambda m, a: stages.__setitem__("pos_embed", a[0])),
             visual.merger.register_forward_hook(lambda m, i, o: stages.__setitem__("merger", o))]
    for l, blk in enumerate(visual.blocks):
        hooks.append(blk.register_forward_hook(
            lambda m, i, o, l=l: stages.__setitem__(f"block{l}", o[0] if isinstance(o, tuple) else o)))
    img = formula_image()
    pv, thw, _ = run_processor(proc, Image.fromarray(img), do_resize=False)
    out = visual(pv, grid_thw=thw)
    emb = out.pooler_output if hasattr(out, "pooler_output") else out[1]
    res = {"meta": meta, "weights_sha256": shas,
           "attn_implementation": str(getattr(model.config, "_attn_implementation", "?")),
           "inv_freq": [float(v) for v in visual.rotary_pos_emb.inv_freq],
           "inv_freq_bits": [f32_bits(v) for v in visual.rotary_pos_emb.inv_freq],
           "formula": {"height": 96, "width": 128, "grid": [int(v) for v in thw[0]],
                       "pixel_values_sum": float(pv.double().sum()),
                       "embeddings": {"shape": list(emb.shape), "values": [float(v) for v in emb.reshape(-1)]},
                       "stages": {k: slice2d(v) for k, v in stages.items()}}}
    stages.clear()
    out = visual(dog_pv, grid_thw=dog_thw)
    emb = (out.pooler_output if hasattr(out, "pooler_output") else out[1]).to(torch.float32)
    a = emb.numpy()
    stride = 7
    res["dog"] = {"grid": [int(v) for v in dog_thw[0]], "shape": list(a.shape), "row_stride": stride,
                  "rows": {str(r): [float(v) for v in a[r]] for r in range(0, a.shape[0], stride)},
                  "row_sums": [float(v) for v in a.astype(np.float64).sum(1)],
                  "sum": float(a.astype(np.float64).sum()), "sum_sq": float((a.astype(np.float64) ** 2).sum())}
    for h in hooks:
        h.remove()
    return res


MM_TEXT_HEAD = [151644, 872, 198, 151652]           # <|im_start|>user\n<|vision_start|>
MM_TEXT_TAIL = [151653, 74785, 419, 2168, 304, 825, 3409, 13, 151645, 198, 151644, 77091, 198]  # ...<|im_start|>assistant\n


@torch.no_grad()
def mm_goldens(model, shas, proc, dog_pv, dog_thw, meta):
    cfg = model.config
    pad = cfg.image_token_id
    merge = cfg.vision_config.spatial_merge_size
    res = {"meta": meta, "weights_sha256": shas, "image_token_id": pad, "cases": {}}
    img = formula_image()
    pv, thw, _ = run_processor(proc, Image.fromarray(img), do_resize=False)
    for name, (p, t) in {"formula": (pv, thw), "dog": (dog_pv, dog_thw)}.items():
        n_img = int(t[0].prod().item()) // (merge * merge)
        ids = MM_TEXT_HEAD + [pad] * n_img + MM_TEXT_TAIL
        input_ids = torch.tensor([ids])
        mm = (input_ids == pad).int()
        pos, delta = model.model.get_rope_index(input_ids, mm_token_type_ids=mm, image_grid_thw=t)
        logits = model(input_ids=input_ids, pixel_values=p, image_grid_thw=t, mm_token_type_ids=mm,
                       use_cache=False).logits[0].to(torch.float32)
        T = len(ids)
        at = sorted({T - 1, T - 5, len(MM_TEXT_HEAD) - 1, len(MM_TEXT_HEAD), len(MM_TEXT_HEAD) + n_img})
        per = {}
        for q in at:
            row = logits[q]
            top = torch.topk(row, 10)
            r64 = row.double()
            per[str(q)] = {"top10_ids": [int(v) for v in top.indices], "top10": [float(v) for v in top.values],
                           "slice0_16": [float(v) for v in row[:16]], "sum": float(r64.sum()),
                           "sum_sq": float((r64 ** 2).sum())}
        res["cases"][name] = {"ids": ids, "grid": [int(v) for v in t[0]],
                              "positions": [[int(v) for v in pos[a, 0]] for a in range(3)],
                              "rope_delta": int(delta.reshape(-1)[0]), "logits": per}
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", default=".")
    ap.add_argument("--tiny-hf", required=True)
    ap.add_argument("--tiny-mlx4", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(0)
    cmd = "python3 " + " ".join([os.path.relpath(sys.argv[0], a.repo)] + sys.argv[1:])
    meta = versions(cmd)
    write_json(a.out, "vision-decode.json", decode_goldens(a.repo, meta))
    proc = make_processor(a.repo)
    meta["processor_signature"] = str(inspect.signature(type(proc).resize))
    pre, dog_pv, dog_thw = preprocess_goldens(a.repo, a.out, proc, meta)
    write_json(a.out, "vision-preprocess.json", pre)
    for layout, d in (("hf", a.tiny_hf), ("mlx4", a.tiny_mlx4)):
        model, shas = load_model(d, layout)
        write_json(a.out, f"vision-tower-{layout}.json", tower_goldens(model, shas, proc, dog_pv, dog_thw, meta))
        write_json(a.out, f"vision-mm-{layout}.json", mm_goldens(model, shas, proc, dog_pv, dog_thw, meta))


if __name__ == "__main__":
    main()
