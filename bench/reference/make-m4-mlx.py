#!/usr/bin/env python3
"""make-m4-mlx.py - turns the seed's published M4 benchmark text into a
jev-bench/1 record (bench/reference/m4-mlx.json), mechanically, so that every
number in the record can be traced to the published text.

Usage: python3 bench/reference/make-m4-mlx.py SEED_001.txt > bench/reference/m4-mlx.json

What it reads (and nothing else): the medians table, the "Every latency
sample (ms)" table, the agreement lines and the example failed outputs.

What the seed publishes, and therefore what the record holds:
- total_ms: every sample (3 per row).
- valid: per sample, exactly, because "Valid runs" is 3/3 or 0/3 in every row.
- requested_decisions_per_s / valid_decisions_per_s per sample: derived from
  total_ms by their definition (decisions / seconds; 0 when invalid).
- vision/prefill/scoring ms, LM and vision forwards, peak memory: medians
  only. Samples carry null; run.published_medians carries the median.
  Peak memory is published in GB with two decimals: peak_bytes = GB * 1e9.
- output: only the three example failed outputs (repeat 0 of 4, 16, 64
  decisions); every other sample's output was not published (null).
- agreement: as published (deltas with 8 decimals).
"""
import json
import re
import sys


def main():
    text = open(sys.argv[1], encoding="utf-8").read()
    lines = text.splitlines()

    # table rows are tab-separated; the two tables differ in their number of cells
    medians = {}
    samples = {}
    for line in lines:
        cells = line.split("\t")
        if len(cells) == 11 and cells[0].isdigit():
            medians[(int(cells[0]), cells[1])] = cells
        elif len(cells) == 3 and cells[0].isdigit():
            samples[(int(cells[0]), cells[1])] = [float(x) for x in cells[2].split(", ")]

    agreement = []
    for m in re.finditer(
        r"(\d+) decisions: direct/shared maximum probability delta ([0-9.]+); argmax agreement ([0-9.]+)%; "
        r"generated/shared agreement (None|[0-9.]+)\.",
        text,
    ):
        agreement.append(
            {
                "decisions": int(m.group(1)),
                "direct_shared_max_prob_delta": float(m.group(2)),
                "argmax_agreement": float(m.group(3)) / 100.0,
                "generated_shared_agreement": None if m.group(4) == "None" else float(m.group(4)),
            }
        )

    failed = {}
    for i, line in enumerate(lines):
        m = re.match(r"Example failed generate output \((\d+) decisions, repeat (\d+)\):", line)
        if m:
            j = i + 1
            while lines[j].strip() == "":
                j += 1
            failed[(int(m.group(1)), int(m.group(2)))] = lines[j]

    counts = [1, 4, 16, 64]
    paths = ["generate_json", "independent", "shared"]
    runs = []
    for c in counts:
        for p in paths:
            row = medians[(c, p)]
            valid_runs, n_runs = (int(x) for x in row[10].split("/"))
            totals = samples[(c, p)]
            assert n_runs == len(totals) == 3 and valid_runs in (0, n_runs), row
            ss = []
            for r, t in enumerate(totals):
                req = c * 1000.0 / t
                valid = valid_runs == n_runs
                ss.append(
                    {
                        "repeat": r,
                        "order": None,
                        "total_ms": t,
                        "vision_ms": None,
                        "prefill_ms": None,
                        "scoring_ms": None,
                        "lm_forwards": None,
                        "vision_forwards": None,
                        "peak_bytes": None,
                        "peak_where": "metal",
                        "requested_decisions_per_s": req,
                        "valid_decisions_per_s": req if valid else 0.0,
                        "valid": valid,
                        "output": failed.get((c, r)) if p == "generate_json" else None,
                        "decisions": None,
                    }
                )
            runs.append(
                {
                    "decisions": c,
                    "path": p,
                    "samples": ss,
                    "published_medians": {
                        "total_ms": float(row[2]),
                        "vision_ms": float(row[3]),
                        "prefill_ms": float(row[4]),
                        "scoring_ms": float(row[5]),
                        "lm_forwards": int(row[6]),
                        "vision_forwards": int(row[7]),
                        "peak_bytes": int(round(float(row[8]) * 1e9)),
                        "requested_decisions_per_s": float(row[9]),
                    },
                }
            )
    assert len(agreement) == 4 and len(failed) == 3

    record = {
        "schema": "jev-bench/1",
        "note": (
            "Published reference, not a measurement of this project. Source: the seed document "
            "001_628e0ba5312d519c.txt ('Real-model benchmark', Apple M4 / 16GB, MLX-VLM, Qwen3.5-0.8B 4-bit "
            "weights, float32 computation, batch 4, three repetitions with rotated order), converted by "
            "bench/reference/make-m4-mlx.py. Per-sample values published: total_ms (the 'Every latency sample' "
            "table) and validity (Valid runs 3/3 or 0/3). Derived by definition: requested_decisions_per_s = "
            "decisions / (total_ms / 1000) and valid_decisions_per_s (0 when invalid). MEDIANS ONLY (samples are "
            "null, the published median is in runs[].published_medians): vision_ms, prefill_ms, scoring_ms, "
            "lm_forwards, vision_forwards, peak_bytes. peak_bytes = the published 'Peak Metal GB' (two decimals) "
            "x 1e9; memory is peak live Metal allocation. Generated outputs: only the three published example "
            "failed outputs (repeat 0 at 4, 16 and 64 decisions); other outputs were not published (null). "
            "Candidate distributions were not published (decisions null). Weight and image hashes, library "
            "versions and dates are in the seed's raw results.json, which is not available here (null)."
        ),
        "environment": {
            "peer": {"name": "mlx-vlm", "version": None},
            "jev": {"version": None, "git_commit": None},
            "model": {"id": "Qwen3.5-0.8B-4bit", "dir": ".models/Qwen3.5-0.8B-4bit", "synthetic": False,
                      "weights": []},
            "image": {"path": None, "sha256": None, "width": None, "height": None, "resized_width": None,
                      "resized_height": None},
            "libraries": {},
            "compiler": None,
            "cpu": {"model": "Apple M4", "cores": None, "threads": None},
            "backend": "metal",
            "gpu": {"name": "Apple M4 (integrated, 16GB unified memory)", "driver": None, "memory_bytes": None},
            "date": None,
            "machine": "Apple M4 / 16GB",
            "os": None,
        },
        "settings": {
            "counts": counts,
            "repeats": 3,
            "warmup": 1,
            "batch": 4,
            "paths": paths,
            "scoring": "label",
            "image_max_side": 768,
            "prefill_chunk": 512,
            "max_new_tokens_min": 128,
            "max_new_tokens_per_decision": 24,
            "order": "rotated",
            "workload": None,
        },
        "runs": runs,
        "agreement": agreement,
    }
    json.dump(record, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
