#!/usr/bin/env python3
"""
scripts/device/llama-lm-record.py - the language-model-level comparison of jev and llama.cpp, as one record.

What it is: the last part of scripts/device/llama-peer.sh's `lm` step. It reads llama-bench's JSON
output (one file per GGUF: a prompt-processing test of PREFIX tokens and a generation test of
DECODE tokens, each with its per-repeat samples) and the summary lines of `jev run` (one per
repeat and mode, prefixed with the mode), and writes
  --json  {"format": "jev-llama-lm/1", ...}: every sample kept, medians, the llama.cpp release;
  --md    a table: prefill of PREFIX tokens and decode, tok/s and ms, and each row's ratio to
          llama.cpp bf16 (> 1: faster than llama.cpp bf16).
Medians throughout (llama-bench's own mean ± stddev is kept beside them in the JSON).

What it is not: the decision-level record (bench/peers/llamacpp.py writes jev-bench/2), or a
measurement: it only reads what the two programs printed. Standard library only.
"""

import argparse
import json
import re
import statistics
import sys

JEV_LINE = re.compile(r"^(\S+) jev run: prefill (\d+) tok ([0-9.]+) ms \([0-9.]+ tok/s\) \| decode (\d+) tok "
                      r"([0-9.]+) tok/s ([0-9.]+) ms/tok")


def fail(msg):
    print(f"llama-lm-record: error: {msg}", file=sys.stderr)
    sys.exit(1)


def llama_rows(path, prefix, decode):
    """One row per GGUF: the prefill and decode tests of llama-bench -o json."""
    try:
        with open(path, encoding="utf-8") as f:
            tests = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{path}: {e}")
    if not isinstance(tests, list) or not tests:
        fail(f"{path}: expected llama-bench's JSON array of tests")
    row = {"engine": "llama.cpp", "file": path, "weights": None, "prefill": None, "decode": None}
    for t in tests:
        ts = t.get("samples_ts") or [t.get("avg_ts")]
        entry = {"tok_s_median": statistics.median(ts), "tok_s_samples": ts, "tok_s_mean": t.get("avg_ts"),
                 "tok_s_stddev": t.get("stddev_ts")}
        row["weights"] = row["weights"] or t.get("model_type")
        row.setdefault("llama_bench", {k: t.get(k) for k in ("build_commit", "build_number", "gpu_info", "backends",
                                                            "n_batch", "n_ubatch", "n_gpu_layers", "flash_attn",
                                                            "type_k", "type_v", "model_size", "model_n_params")})
        if t.get("n_prompt") == prefix and t.get("n_gen") == 0:
            row["prefill"] = entry
        elif t.get("n_gen") == decode and t.get("n_prompt") == 0:
            row["decode"] = entry
    if row["prefill"] is None or row["decode"] is None:
        fail(f"{path}: no pp{prefix} and tg{decode} tests in it")
    return row


def jev_rows(path, prefix, decode, backend):
    modes = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = JEV_LINE.match(line.strip())
            if not m:
                continue
            mode, n, ms, nd, dts = m.group(1), int(m.group(2)), float(m.group(3)), int(m.group(4)), float(m.group(5))
            if n != prefix or nd != decode:
                fail(f"{path}: a jev run of {n} + {nd} tokens, not {prefix} + {decode}")
            d = modes.setdefault(mode, {"prefill": [], "decode": []})
            d["prefill"].append(n / (ms * 1e-3))
            d["decode"].append(dts)
    if not modes:
        fail(f"{path}: no `jev run:` summary line")
    rows = []
    for mode, d in modes.items():
        rows.append({"engine": "jev", "weights": f"hf bf16 checkpoint, {mode} mode ({backend})",
                     "prefill": {"tok_s_median": statistics.median(d["prefill"]), "tok_s_samples": d["prefill"]},
                     "decode": {"tok_s_median": statistics.median(d["decode"]), "tok_s_samples": d["decode"]}})
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("llama_bench_json", nargs="+")
    ap.add_argument("--prefix", type=int, required=True)
    ap.add_argument("--decode", type=int, required=True)
    ap.add_argument("--repeats", type=int, required=True)
    ap.add_argument("--source", help="llama-carry.sh's SOURCE file (commit, tag)")
    ap.add_argument("--jev-runs", required=True)
    ap.add_argument("--jev-backend", default="cuda")
    ap.add_argument("--json", required=True)
    ap.add_argument("--md", required=True)
    a = ap.parse_args(argv)
    source = {}
    if a.source:
        with open(a.source, encoding="utf-8") as f:
            source = dict(line.rstrip("\n").split(" ", 1) for line in f if " " in line)
    rows = [llama_rows(p, a.prefix, a.decode) for p in a.llama_bench_json]
    rows += jev_rows(a.jev_runs, a.prefix, a.decode, a.jev_backend)
    ref = next((r for r in rows if r["engine"] == "llama.cpp" and "bf16" in (r["weights"] or "").lower()), rows[0])
    rec = {"format": "jev-llama-lm/1", "llama_cpp": source, "prefix_tokens": a.prefix, "decode_tokens": a.decode,
           "repeats": a.repeats, "ratio_reference": f"{ref['engine']} {ref['weights']}", "rows": rows,
           "note": "llama-bench -p PREFIX -n DECODE -r REPEATS -ngl 99 (its defaults otherwise: n_batch 2048, "
                   "n_ubatch 512, random tokens) on GGUFs converted by llama.cpp's convert_hf_to_gguf.py from "
                   "jev synth's hf layout; jev run --random-tokens PREFIX --decode DECODE on that hf layout. "
                   "Text model only on both sides. Medians of the repeats."}
    with open(a.json, "w", encoding="utf-8") as f:
        json.dump(rec, f, indent=1)
        f.write("\n")
    head = (f"| engine | weights / mode | prefill {a.prefix} tokens | decode ({a.decode} tokens) "
            f"| prefill vs ref | decode vs ref |\n| --- | --- | ---: | ---: | ---: | ---: |\n")
    lines = []
    for r in rows:
        p, d = r["prefill"]["tok_s_median"], r["decode"]["tok_s_median"]
        lines.append(f"| {r['engine']} | {r['weights']} | {p:,.0f} tok/s ({a.prefix / p * 1e3:.1f} ms) "
                     f"| {d:,.0f} tok/s ({1e3 / d:.2f} ms/token) | {p / ref['prefill']['tok_s_median']:.2f} "
                     f"| {d / ref['decode']['tok_s_median']:.2f} |")
    with open(a.md, "w", encoding="utf-8") as f:
        f.write(f"llama.cpp {source.get('tag', '?')} ({source.get('commit', '?')[:12]}) beside jev, medians of "
                f"{a.repeats}; ratios to {rec['ratio_reference']} (> 1: faster)\n\n" + head + "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
