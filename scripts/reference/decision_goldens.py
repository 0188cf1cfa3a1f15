#!/usr/bin/env python3
"""decision_goldens.py - reference decision distributions for jev's pipeline, from transformers + torch.

Run where python3 has torch 2.11, transformers 5.17, numpy, safetensors (no network needed). It reads the
inputs jev itself built (`jev decide --dump-ids F`: token ids of the shared prefix and of every question's
label-mode and text-mode suffix, the label token ids per option, the candidate token ids per option, the
image's pixel values) and computes, with PLAIN FULL FORWARDS of the tiny model in f32 (no cache, no fork, no
trie, no restricted head):

    label mode   per question: one forward of prefix + label suffix; at the last position, per option the
                 logsumexp of its label ids' logits (an alias of yes/no counts for its label), softmax over
                 the options (float64)
    text mode    per question and option: one forward of prefix + text suffix + candidate; log-softmax over
                 the FULL vocabulary (float64) at each position that predicts a candidate token; the
                 candidate's score is the sum (and, separately, the mean) of its token log-probabilities;
                 softmax over the options

The jev half (synthesizing the tiny model and writing the dumps) runs on the dev machine:

    make -j2
    bash scripts/reference/decision_goldens.sh /tmp/jev-decide-goldens      # tiny-hf/ + dump-*.json there

then, where transformers is (copy the folder over):

    python3 scripts/reference/decision_goldens.py --model /tmp/jev-decide-goldens/tiny-hf \\
        --out tests/golden/decisions-tiny.json \\
        text=/tmp/jev-decide-goldens/dump-text.json image=/tmp/jev-decide-goldens/dump-image.json

Inputs read from the repo: nothing (everything is in the dumps and the model folder); the cases' requests
are tests/data/decide/golden-text.json and golden-image.json (+ tests/data/rgb8.png), as the .sh says.
Output (small JSON): per case the sha256 of every id list the forwards used (so the C test can tell a
changed prompt from a numeric difference) and the distributions; plus the versions, the command and the
sha256 of the weights. tests/test-decide-golden.c compares jev's distributions with these within 1e-4.
Everything runs on the CPU in float32 (no TF32), which is fast for the tiny model.
"""
import argparse
import base64
import hashlib
import json
import os
import platform
import sys

import numpy as np
import torch
import transformers


def file_sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def ids_sha256(ids):
    """The digest tests/test-decide-golden.c computes too: sha256 of the decimal ids joined by commas."""
    return hashlib.sha256(",".join(str(int(i)) for i in ids).encode()).hexdigest()


def load_model(model_dir):
    """The tiny model of the HF (bf16) layout as written by `jev synth --layout hf`, upcast to f32 exactly."""
    from safetensors.torch import load_file
    from transformers import Qwen3_5Config, Qwen3_5ForConditionalGeneration
    cfg = Qwen3_5Config.from_pretrained(model_dir)
    try:
        model = Qwen3_5ForConditionalGeneration._from_config(cfg, attn_implementation="eager", dtype=torch.float32)
    except Exception as e:  # older signatures
        print("_from_config(attn_implementation='eager') failed, default construction:", e)
        model = Qwen3_5ForConditionalGeneration(cfg)
    model = model.to(torch.float32).eval()
    files = sorted(f for f in os.listdir(model_dir) if f.endswith(".safetensors"))
    sd = {}
    for f in files:
        sd.update({k: v.to(torch.float32) for k, v in load_file(os.path.join(model_dir, f)).items()})
    if any(k.startswith("language_model.") or k.startswith("vision_tower.") for k in sd):
        raise SystemExit(f"{model_dir}: an MLX-layout model; synthesize the tiny model with --layout hf")
    missing, unexpected = model.load_state_dict(sd, strict=False)
    missing = [m for m in missing if m != "lm_head.weight"]
    if missing or unexpected:
        raise SystemExit(f"{model_dir}: state dict mismatch: missing {missing[:10]}, unexpected {unexpected[:10]}")
    if "lm_head.weight" not in sd:  # tied: the head is the embedding
        emb = model.model.language_model.embed_tokens.weight
        if model.lm_head.weight.data_ptr() != emb.data_ptr():
            with torch.no_grad():
                model.lm_head.weight.copy_(emb)
    return model, {f: file_sha256(os.path.join(model_dir, f)) for f in files}


def pixel_values(img):
    """The dump's image: f32 little-endian [n_patches, patch_dim] in base64, and its grid."""
    pv = img["pixel_values"]
    assert pv["dtype"] == "float32-le", pv["dtype"]
    a = np.frombuffer(base64.b64decode(pv["base64"]), dtype="<f4").reshape(pv["shape"])
    return torch.from_numpy(a.astype(np.float32)), torch.tensor([img["grid_thw"]], dtype=torch.long)


class Runner:
    def __init__(self, model, dump):
        self.model = model
        self.pad = model.config.image_token_id
        self.img = dump["image"]
        if self.img is not None:
            self.pv, self.thw = pixel_values(self.img)
            if self.img["pad_id"] != self.pad:
                raise SystemExit(f"dump image pad id {self.img['pad_id']} != config image_token_id {self.pad}")

    @torch.no_grad()
    def logits(self, ids):
        """Logits [T, V] (float64) of one plain full forward of ids."""
        input_ids = torch.tensor([ids], dtype=torch.long)
        mm = (input_ids == self.pad).int()
        kw = {"use_cache": False, "mm_token_type_ids": mm}
        if self.img is not None and int(mm.sum()) > 0:
            n = int(self.thw[0].prod().item()) // (self.model.config.vision_config.spatial_merge_size ** 2)
            if int(mm.sum()) != n:
                raise SystemExit(f"prompt has {int(mm.sum())} image pads, the image needs {n}")
            kw.update(pixel_values=self.pv, image_grid_thw=self.thw)
        out = self.model(input_ids=input_ids, **kw).logits[0]
        return out.to(torch.float64)


def softmax(x):
    x = np.asarray(x, dtype=np.float64)
    m = np.max(x)
    e = np.exp(x - m)
    return (e / e.sum()).tolist()


def logsumexp(x):
    x = np.asarray(x, dtype=np.float64)
    m = np.max(x)
    return float(m + np.log(np.exp(x - m).sum()))


def run_case(model, dump):
    r = Runner(model, dump)
    prefix = dump["prefix_ids"]
    out = {"prefix_ids_sha256": ids_sha256(prefix), "has_image": dump["image"] is not None, "questions": []}
    if dump["image"] is not None:
        out["pixel_values_sha256"] = hashlib.sha256(base64.b64decode(dump["image"]["pixel_values"]["base64"])).hexdigest()
    for q in dump["questions"]:
        # label mode: one forward, the last position
        lab = q["label"]
        ids = prefix + lab["suffix_ids"]
        row = r.logits(ids)[-1]
        masses = [logsumexp([float(row[i]) for i in option]) for option in lab["option_ids"]]
        label_probs = softmax(masses)
        # text mode: one forward per candidate, full-vocabulary log-softmax at its positions
        txt = q["text"]
        base = prefix + txt["suffix_ids"]
        token_lp = []
        for cand in txt["candidates"]:
            full = base + cand
            lsm = torch.log_softmax(r.logits(full), dim=-1)
            token_lp.append([float(lsm[len(base) - 1 + j, t]) for j, t in enumerate(cand)])
        sums = [sum(v) for v in token_lp]
        means = [sum(v) / len(v) for v in token_lp]
        out["questions"].append({
            "id": q["id"], "type": q["type"], "options": q["options"],
            "label_suffix_ids_sha256": ids_sha256(lab["suffix_ids"]),
            "text_suffix_ids_sha256": ids_sha256(txt["suffix_ids"]),
            "label_option_ids": lab["option_ids"], "candidates": txt["candidates"],
            "label_probs": label_probs, "text_probs_sum": softmax(sums), "text_probs_mean": softmax(means),
            "text_token_logprobs": token_lp,
        })
        print(f"  {q['id']}: label {np.round(label_probs, 4).tolist()} text {np.round(softmax(sums), 4).tolist()}")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="the tiny model folder (jev synth --layout hf)")
    ap.add_argument("--out", required=True, help="the golden file to write (tests/golden/decisions-tiny.json)")
    ap.add_argument("cases", nargs="+", help="NAME=DUMP.json pairs written by `jev decide --dump-ids`")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    model, shas = load_model(a.model)
    res = {
        "format": "jev-decide-goldens/1",
        "meta": {"command": " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
                 "python": platform.python_version(), "torch": torch.__version__,
                 "transformers": transformers.__version__, "numpy": np.__version__,
                 "platform": platform.platform(), "device": "cpu", "dtype": "float32"},
        "model": {"config": "configs/tiny.json", "seed": 1, "layout": "hf", "weights_sha256": shas},
        "cases": {},
    }
    for spec in a.cases:
        name, _, path = spec.partition("=")
        if not name or not path:
            raise SystemExit(f"case '{spec}': expected NAME=DUMP.json")
        dump = json.load(open(path))
        if dump.get("format") != "jev-decide-inputs/1":
            raise SystemExit(f"{path}: format {dump.get('format')!r}, expected 'jev-decide-inputs/1'")
        print(f"case {name}: {len(dump['questions'])} questions, prefix {len(dump['prefix_ids'])} tokens")
        res["cases"][name] = run_case(model, dump)
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)
    print(f"{a.out}: {os.path.getsize(a.out)} bytes")


if __name__ == "__main__":
    main()
