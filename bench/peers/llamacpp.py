#!/usr/bin/env python3
"""
bench/peers/llamacpp.py - the llama.cpp peer's record: jev's inputs in, a jev-bench/2 record out.

What it is: the Python half of the decision-level llama.cpp peer (docs/bench-peers.md). It reads
and checks jev's inputs dump (`jev bench --dump-inputs DIR`, docs/bench-inputs.md) with the
transformers peer's reader, flattens the token ids for bench/peers/llama-peer.c (a C program over
libllama, built on the GPU machine by scripts/device/llama-peer.sh), runs it on a GGUF of the same
weights, and builds, validates and writes the record with bench/peers/jevbench.py, so that the
schema has one definition on the peers' side. With --compare-with it prints the distributions'
max difference from a jev record (reported, never a failure: the peer is text-only, below).

What it is not: a vision peer. llama-peer evaluates the image placeholder ids as text tokens with
text positions and runs no vision tower; the record's note, `environment.extra.text_only` and
`vision_ms: null` say so. Paths: independent and shared (generate_json is not run).

Standard library only (no torch): it runs wherever python3 does.
"""

import argparse
import datetime
import hashlib
import os
import platform
import socket
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from jevbench import (PeerError, build_record, compare_records, decision_entry, load_manifest,  # noqa: E402
                      make_sample, validate_record, write_json_atomic)

PATHS = ["independent", "shared"]


def log(msg):
    print(f"[llama-peer] {msg}", file=sys.stderr, flush=True)


def flatten(man, counts, fold=None):
    """The flat text llama-peer.c reads: its header, then per run the ids of both paths. fold: every
    id taken modulo it (a smoke test on a random GGUF of a small vocabulary, never a measurement)."""
    def ids(v):
        v = [x % fold for x in v] if fold else v
        return " ".join(map(str, [len(v)] + v))
    lines = ["jev-llama-inputs 1"]
    batch_all = man["settings"]["batch"]
    for r in man["runs"]:
        n = r["decisions"]
        if counts and n not in counts:
            continue
        batch = n if batch_all == "all" else min(batch_all, n)
        lines.append(f"run {n} {batch}")
        lines.append("prefix " + ids(r["shared"]["prefix_ids"]))
        lines += ["suffix " + ids(v) for v in r["shared"]["suffix_ids"]]
        lines += ["prompt " + ids(v) for v in r["independent"]["prompt_ids"]]
        for i, v in enumerate(r["label_ids"]):
            if fold and len({x % fold for x in v}) != len(v):
                raise PeerError(f"--fold-ids {fold}: decision {i} of run {n}: its label ids {v} collide")
            lines.append("labels " + ids(v))
    return "\n".join(lines) + "\n"


def parse_output(text, man, repeats):
    """llama-peer's lines -> {(n, path): [sample]}; every (count, path, repeat) must be there."""
    runs = {r["decisions"]: r for r in man["runs"]}
    times, probs, system = {}, {}, None
    for ln, line in enumerate(text.splitlines(), 1):
        w = line.split()
        if not w:
            continue
        try:
            if w[0] == "system":
                system = line[len("system "):]
            elif w[0] == "sample":
                n, path, rep, order = int(w[1]), w[2], int(w[3]), int(w[4])
                times[(n, path, rep)] = (order, float(w[5]), float(w[6]), float(w[7]), int(w[8]))
            elif w[0] == "probs":
                n, path, rep, i, k = int(w[1]), w[2], int(w[3]), int(w[4]), int(w[5])
                if len(w) != 6 + k:
                    raise ValueError("probability count")
                probs[(n, path, rep, i)] = [float(x) for x in w[6:]]
            else:
                raise ValueError(f"unknown line kind '{w[0]}'")
        except (ValueError, IndexError) as e:
            raise PeerError(f"llama-peer output line {ln}: {e}: {line[:80]}")
    samples = {}
    for (n, path, rep), (order, total, prefill, scoring, forwards) in sorted(times.items()):
        if n not in runs or path not in PATHS:
            raise PeerError(f"llama-peer output: a sample of {n} decisions, path {path}, that the dump does not have")
        r = runs[n]
        decs = []
        for i in range(n):
            p = probs.get((n, path, rep, i))
            if p is None or len(p) != len(r["options"][i]):
                raise PeerError(f"llama-peer output: {path} {n} decisions repeat {rep}: decision {i} has no "
                                f"distribution over its {len(r['options'][i])} options")
            decs.append(decision_entry(r["decision_ids"][i], r["options"][i], p))
        s = make_sample(n, rep, order, total, None, prefill, scoring, forwards, 0, decisions=decs)
        samples.setdefault((n, path), []).append(s)
    for (n, path), ss in samples.items():
        if len(ss) != repeats:
            raise PeerError(f"llama-peer output: {path} {n} decisions has {len(ss)} samples, not {repeats}")
    return samples, system


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def _cpu_model():
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def _gpu():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=30)
        name, driver, mib = [x.strip() for x in out.stdout.splitlines()[0].split(",")]
        return {"name": name, "driver": driver, "memory_bytes": int(mib) * (1 << 20)}
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def main(argv=None):
    ap = argparse.ArgumentParser(description="llama.cpp peer of jev bench (docs/bench-peers.md)")
    ap.add_argument("gguf", help="the GGUF of the model jev ran (convert_hf_to_gguf.py of its hf layout)")
    ap.add_argument("inputs_dir", help="the folder of `jev bench --dump-inputs`")
    ap.add_argument("out", help="the jev-bench/2 record to write")
    ap.add_argument("--bin", default="llama-peer", help="the llama-peer program (default: on PATH)")
    ap.add_argument("--dtype", required=True, help="the GGUF's weight type, for the record (f32, bf16)")
    ap.add_argument("--llama-version", default=None, help="the llama.cpp release, for the record (b10573 ...)")
    ap.add_argument("--llama-commit", default=None, help="its commit, for the record")
    ap.add_argument("--counts", type=int, nargs="*", default=None, help="decision counts of the dump to run (all)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--ngl", type=int, default=99, help="layers on the GPU (0: CPU)")
    ap.add_argument("--fold-ids", type=int, default=None,
                    help="take every id modulo N: a smoke test of the plumbing on a random GGUF of a small "
                         "vocabulary (llama.cpp's test-llama-archs -o), never a measurement")
    ap.add_argument("--compare-with", default=None, help="a jev record: print the probability differences")
    a = ap.parse_args(argv)
    try:
        man = load_manifest(a.inputs_dir)
        counts = [r["decisions"] for r in man["runs"] if not a.counts or r["decisions"] in a.counts]
        if not counts:
            raise PeerError(f"--counts {a.counts}: none of them is in the dump ({[r['decisions'] for r in man['runs']]})")
        with tempfile.TemporaryDirectory(prefix="llama-peer-") as tmp:
            flat = os.path.join(tmp, "inputs.txt")
            with open(flat, "w", encoding="ascii") as f:
                f.write(flatten(man, counts, a.fold_ids))
            cmd = [a.bin, a.gguf, flat, "--repeats", str(a.repeats), "--threads", str(a.threads),
                   "--ngl", str(a.ngl)]
            log("$ " + " ".join(cmd))
            try:
                proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
            except OSError as e:
                raise PeerError(f"{a.bin}: cannot run: {e.strerror}")
        if proc.returncode != 0:
            raise PeerError(f"{a.bin} exited with status {proc.returncode}")
        samples, system = parse_output(proc.stdout, man, a.repeats)
        # the device kind first, as the transformers peer's "cuda-f32": jev report sets a peer beside jev
        # on the same kind of device by the backend up to its first '-'
        # llama_print_system_info names each backend registered, "CUDA : ..." in a CUDA build
        cuda = a.ngl > 0 and "CUDA :" in (system or "")
        gpu = _gpu() if cuda else None
        backend = f"{'cuda' if cuda else 'cpu'}-{a.dtype}"
        env = {
            "peer": {"name": "llama.cpp", "version": a.llama_version},
            "jev": {"version": man["jev"].get("version"), "git_commit": man["jev"].get("git_commit")},
            "model": {"id": f"{man['model']['id']} as GGUF {a.dtype}", "dir": os.path.abspath(a.gguf),
                      "synthetic": man["model"].get("synthetic"),
                      "weights": [{"file": os.path.basename(a.gguf), "bytes": os.path.getsize(a.gguf),
                                   "sha256": sha256_file(a.gguf)}]},
            "image": {k: man["image"][k] for k in ("path", "sha256", "width", "height", "resized_width",
                                                   "resized_height")},
            "libraries": {"llama.cpp": a.llama_version or "unknown", "llama.cpp commit": a.llama_commit or "unknown"},
            "compiler": None,
            "cpu": {"model": _cpu_model(), "cores": os.cpu_count(), "threads": a.threads},
            "backend": backend,
            "gpu": gpu,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "machine": socket.gethostname() or None,
            "os": f"{platform.system()} {platform.release()} {platform.machine()}",
            "extra": {"dtype": a.dtype, "n_gpu_layers": a.ngl, "text_only": True, "system_info": system,
                      "fold_ids": a.fold_ids,
                      "source_model_weights": man["model"]["weights"]},
        }
        settings = {
            "counts": counts, "repeats": a.repeats, "warmup": 1, "batch": man["settings"]["batch"],
            "paths": list(PATHS), "scoring": "label",
            "image_max_side": man["settings"]["image_max_side"] or 768, "prefill_chunk": None,
            "max_new_tokens_min": man["settings"]["max_new_tokens_min"],
            "max_new_tokens_per_decision": man["settings"]["max_new_tokens_per_decision"],
            "order": "rotated", "workload": man.get("workload"),
            "extra": {"inputs_dir": os.path.abspath(a.inputs_dir)},
        }
        note = ("llama.cpp peer (bench/peers/llama-peer.c over libllama, bench/peers/llamacpp.py): TEXT ONLY. "
                "The prompts' image placeholder ids are evaluated as text tokens with text positions and no "
                "vision tower runs, so times are the language model's on jev's token counts and the "
                "distributions are not image-conditioned (their difference from jev's is expected). "
                "independent: one llama_decode of each prompt, memory cleared before each. shared: one "
                "llama_decode of the prefix, llama_memory_seq_cp forks, each batch of suffixes in one "
                "llama_decode. lm_forwards counts llama_decode calls (libllama splits each into n_ubatch "
                "pieces). Time excludes tokenization (jev's ids). peak_bytes null.")
        if a.fold_ids:
            note = (f"SMOKE TEST, NOT A MEASUREMENT: every token id taken modulo {a.fold_ids} for a random GGUF of "
                    f"that vocabulary. " + note)
        rec = build_record(env, settings, samples, note)
        validate_record(rec)
        write_json_atomic(a.out, rec)
        log(f"wrote {a.out}")
        if a.compare_with:
            import json
            with open(a.compare_with, encoding="utf-8") as f:
                lines, worst = compare_records(rec, json.load(f))
            print("\n".join(lines))
            print(f"max |p_llama.cpp - p_jev| over scoring paths: {worst} (text-only peer: expected to differ)")
    except PeerError as e:
        log(f"error: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
