"""
bench/peers/peer_selftest.py - the self-test of the transformers peer (`transformers.py --selftest`).

What it is: a fake dump and a fake record pushed through the same code the real run uses
(bench/peers/jevbench.py), with answers known in advance: the manifest rules, the
generate_json checker, the MLX name and bit-stream rules, the agreement numbers, the
comparison, the validator (against mutated records), and, when build/jev exists, jev's own
C validator (`jev report`) on the record written here.

The `--kernels fla` parts that need no torch are checked too (fla_kernels.py): the option
rules, the carry's activation (in a child python, on a carry laid out like fla-carry.sh's),
the reading of transformers' hub-kernel wrapper and of per-layer bindings on stand-in
modules, the call counter, and a record named for fla through both validators.

What it is not: a test of torch or transformers code (none is importable where this runs);
`transformers.py --check-layouts` covers the torch side of the MLX loader, and
`--compare-with` the model itself.

Constraints: standard library only; writes only under a temporary folder it removes (in
$JEV_TEST_DIR when set), plus the record to $PEER_SELFTEST_RECORD when that is set.
"""

import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
import types

import fla_kernels
from jevbench import (INPUTS_FORMAT, PATHS, PEER_NAME, PeerError, _is_int, build_record, check_generated,
                      compare_records, decision_entry, expected_quant, is_shifted_norm, load_manifest, make_sample,
                      mlx_to_hf_name, quant_shape, softmax_double, unpack_codes_py, validate_record,
                      write_json_atomic)


def run():
    """Builds a fake record through the same code the run uses and checks it against the
    schema (this file's port, and jev's own C validator when build/jev exists); exercises the
    manifest checks, the generate_json checker, the MLX name rules, the bit-stream decoder,
    the agreement and the comparison on cases with known answers."""
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)

    def raises(fn, needle, what):
        try:
            fn()
        except PeerError as e:
            check(needle in str(e), f"{what}: message \"{e}\" lacks \"{needle}\"")
            return
        failures.append(f"{what}: no error")

    base = os.environ.get("JEV_TEST_DIR") or None  # the test suite's scratch folder, when run by it
    if base:
        os.makedirs(base, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="peer-selftest-", dir=base)
    # -- a small dump: grid 1x4x4 -> 16 patches, 4 image tokens, patch_dim 8
    img, vs, ve = 900, 901, 902
    prefix = [1, 2, vs] + [img] * 4 + [ve, 3]
    sufs = [[10, 11, 12], [13, 14], [15, 16, 17, 18], [19]]
    opts = [["dog", "cat", "bird"], ["yes", "no"], ["one", "two"], ["a", "b", "c", "d"]]
    labels = [[40, 41, 42], [40, 41], [40, 41], [40, 41, 42, 43]]

    def run_of(n):
        return {"decisions": n, "decision_ids": [f"q{i:02d}" for i in range(n)], "options": opts[:n],
                "label_ids": labels[:n],
                "shared": {"prefix_ids": prefix, "suffix_ids": sufs[:n], "rope_delta": -2},
                "independent": {"prompt_ids": [prefix + s for s in sufs[:n]]},
                "generate_json": {"prompt_ids": prefix + [20, 21], "max_new_tokens": max(128, 24 * n)}}
    man = {"format": INPUTS_FORMAT, "jev": {"version": "0.1.0", "git_commit": None},
           "model": {"id": "synthetic tiny", "dir": "/nowhere", "layout": "mlx4", "synthetic": True,
                     "weights": [{"file": "model.safetensors", "bytes": 10, "sha256": "0" * 64}]},
           "image": {"path": "assets/dog.jpg", "sha256": "1" * 64, "width": 1546, "height": 1213,
                     "resized_width": 64, "resized_height": 64},
           "workload": "bench/dog-workload.json",
           "settings": {"batch": 4, "scoring": "label", "image_max_side": 768, "prefill_chunk": 512,
                        "max_new_tokens_min": 128, "max_new_tokens_per_decision": 24},
           "special_ids": {"image_token_id": img, "vision_start_token_id": vs, "vision_end_token_id": ve},
           "eos_token_ids": [5, 6],
           "pixel_values": {"file": "pixel_values.f32", "dtype": "float32", "byte_order": "little",
                            "shape": [16, 8], "grid_thw": [1, 4, 4], "sha256": None},
           "runs": [run_of(1), run_of(4)]}

    def write_dump(m, pixel_bytes=16 * 8 * 4):
        with open(os.path.join(tmp, "manifest.json"), "w", encoding="utf-8") as f:
            json.dump(m, f)
        with open(os.path.join(tmp, "pixel_values.f32"), "wb") as f:
            f.write(b"\0" * pixel_bytes)
    write_dump(man)
    got = load_manifest(tmp, 2, 1000, 8)
    check([r["decisions"] for r in got["runs"]] == [1, 4], "manifest: runs read back")
    cases = [
        (lambda m: m.update(format="jev-bench-inputs/2"), "is not jev-bench-inputs/1", "format version"),
        (lambda m: m["runs"][1]["shared"]["prefix_ids"].__setitem__(3, 7), "image tokens", "image token count"),
        (lambda m: m["runs"][1]["shared"]["suffix_ids"][0].append(img), "a suffix holds none", "image in suffix"),
        (lambda m: m["runs"][1]["label_ids"][0].__setitem__(1, 40), "unique token ids", "duplicate label"),
        (lambda m: m["runs"][1]["independent"]["prompt_ids"][2].append(1000), "outside the vocabulary", "vocab"),
        (lambda m: m["runs"].reverse(), "strictly increasing", "count order"),
        (lambda m: m["pixel_values"].update(grid_thw=[1, 4, 2]), "makes 8 patches", "grid vs shape"),
        (lambda m: m["runs"][0].update(options=[]), "1 arrays", "options length"),
        (lambda m: m.update(eos_token_ids=[]), "non-empty array", "eos"),
    ]
    for mutate, needle, what in cases:
        m = copy.deepcopy(man)
        mutate(m)
        write_dump(m)
        raises(lambda: load_manifest(tmp, 2, 1000, 8), needle, f"manifest {what}")
    write_dump(man, pixel_bytes=100)
    raises(lambda: load_manifest(tmp, 2, 1000, 8), "needs 512", "manifest pixel file size")
    write_dump(man)
    raises(lambda: load_manifest(tmp, 2, 1000, 12), "patch_dim 8", "manifest patch_dim")

    # -- generate_json checker (src/decide/genjson.h cases)
    ids2, opts2 = ["q00", "q01"], [["dog", "cat"], ["yes", "no"]]
    ok, ch, _ = check_generated(' {"q00": "dog", "q01": "no"}\n', ids2, opts2)
    check(ok and ch == ["dog", "no"], "generated: valid object")
    for text, what in [('{"q00": "A dog", "q01": "no"}', "option text"), ('{"q00": "dog"}', "missing key"),
                       ('{"q00": "dog", "q01": "no", "q02": "x"}', "extra key"),
                       ('{"q00": "dog", "q00": "cat", "q01": "no"}', "repeated key"),
                       ('```json\n{"q00": "dog", "q01": "no"}\n```', "code fence"),
                       ('{"q00": "dog", "q01": "no"} and more', "trailing text"), ('["dog", "no"]', "array"),
                       ("", "empty"), (None, "no tokenizer")]:
        ok, ch, reason = check_generated(text, ids2, opts2)
        check(not ok and reason, f"generated: {what} must be invalid")
    ok, ch, _ = check_generated('{"q00": "A dog", "q01": "no"}', ids2, opts2)
    check(ch == [None, "no"], "generated: allowed answers kept in an invalid output")

    # -- MLX names, norm shift, quantization shapes, the bit stream
    check(mlx_to_hf_name("language_model.model.layers.3.self_attn.q_norm.weight")
          == "model.language_model.layers.3.self_attn.q_norm.weight", "mlx name: text")
    check(mlx_to_hf_name("vision_tower.blocks.0.attn.qkv.weight") == "model.visual.blocks.0.attn.qkv.weight",
          "mlx name: vision")
    check(mlx_to_hf_name("language_model.lm_head.weight") == "lm_head.weight", "mlx name: head")
    check(mlx_to_hf_name("mtp.fc.weight") is None, "mlx name: mtp ignored")
    raises(lambda: mlx_to_hf_name("model.language_model.norm.weight"), "not an MLX", "mlx name: HF name refused")
    for n, want in [("model.language_model.layers.0.input_layernorm.weight", True),
                    ("model.language_model.layers.7.post_attention_layernorm.weight", True),
                    ("model.language_model.layers.3.self_attn.k_norm.weight", True),
                    ("model.language_model.norm.weight", True),
                    ("model.language_model.layers.0.linear_attn.norm.weight", False),
                    ("model.visual.blocks.0.norm1.weight", False), ("model.visual.merger.norm.weight", False)]:
        check(is_shifted_norm(n) == want, f"norm shift rule: {n}")
    check(quant_shape(128, 16, 1024, "x") == (4, 64), "quant shape 4-bit g64")
    check(quant_shape(96, 16, 1024, "x") == (3, 64), "quant shape 3-bit g64")
    check(quant_shape(256, 32, 1024, "x") == (8, 32), "quant shape 8-bit g32")
    raises(lambda: quant_shape(100, 16, 1024, "t"), "whole bits", "quant shape: bad packing")
    raises(lambda: quant_shape(128, 15, 1024, "t"), "not an MLX affine layout", "quant shape: bad groups")
    check(expected_quant({"bits": 4, "group_size": 64, "mode": "affine",
                          "a.b": {"bits": 8, "group_size": 32}}, "a.b", "x") == (8, 32), "quant override")
    check(expected_quant({"bits": 4, "group_size": 64}, "a.c", "x") == (4, 64), "quant global")
    check(expected_quant({"bits": 4, "group_size": 64, "a.d": False}, "a.d", "x") is None, "quant float module")
    # 4-bit: codes 0..15 packed nibble by nibble, little end first
    words = [0x76543210, 0xFEDCBA98]
    check(unpack_codes_py(words, 4, 16) == list(range(16)), "bit stream: 4-bit")
    # 3-bit: 32 codes of 3 bits = 96 bits = 3 words; code k = k % 8, built bit by bit
    stream = 0
    for k in range(32):
        stream |= (k % 8) << (3 * k)
    w3 = [(stream >> (32 * i)) & 0xFFFFFFFF for i in range(3)]
    check(unpack_codes_py(w3, 3, 32) == [k % 8 for k in range(32)], "bit stream: 3-bit crosses words")
    # int32 view of the words (what torch holds) decodes the same
    check(unpack_codes_py([w - (1 << 32) if w >= 1 << 31 else w for w in words], 4, 16) == list(range(16)),
          "bit stream: negative int32 words")

    # -- a record built like the run builds it
    rng = 12345

    def rand():
        nonlocal rng
        rng = (rng * 1103515245 + 12345) % (1 << 31)
        return rng / float(1 << 31)
    counts, repeats = [1, 4], 3
    samples = {}
    for n in counts:
        run = run_of(n)
        for rep in range(repeats):
            order = PATHS[rep % 3:] + PATHS[:rep % 3]
            for k, p in enumerate(order):
                total = 100.0 + 1000.0 * rand()
                if p == "generate_json":
                    text = '{"q00": "dog"' + (', "q01": "yes"' if n > 1 else "") + "}"
                    valid, ch, _ = check_generated(text, run["decision_ids"], run["options"])
                    decs = [decision_entry(run["decision_ids"][i], run["options"][i], choice=ch[i]) for i in range(n)]
                    s = make_sample(n, rep, k, total, 10.0, 20.0, 30.0, 12, 1, 2 << 30, "cuda", valid, text, decs,
                                    {"generated_ids": [1, 2, 3]})
                else:
                    decs = []
                    for i in range(n):
                        # the same logits for both scoring paths of a (count, repeat, decision)
                        logits = [3.0 * ((n * 7919 + rep * 104729 + i * 31 + j * 17) % 97) / 97.0
                                  for j in range(len(run["options"][i]))]
                        if p == "shared":
                            logits = [x + 1e-7 for x in logits]
                        decs.append(decision_entry(run["decision_ids"][i], run["options"][i],
                                                   probs=softmax_double(logits)))
                    s = make_sample(n, rep, k, total, 10.0, 20.0, 30.0, n if p == "independent" else 1 + n,
                                    n if p == "independent" else 1, 2 << 30, "cuda", True, None, decs)
                samples.setdefault((n, p), []).append(s)
    env = {"peer": {"name": PEER_NAME, "version": "5.17.0"}, "jev": {"version": "0.1.0", "git_commit": None},
           "model": {"id": "synthetic tiny", "dir": "/nowhere", "synthetic": True,
                     "weights": [{"file": "model.safetensors", "bytes": 10, "sha256": "0" * 64}]},
           "image": dict(man["image"]), "libraries": {"torch": "2.11.0", "transformers": "5.17.0"},
           "compiler": None, "cpu": {"model": "fake", "cores": 16, "threads": 16}, "backend": "cuda-f32",
           "gpu": {"name": "fake GPU", "driver": None, "memory_bytes": 1 << 30}, "date": "2026-01-01T00:00:00Z",
           "machine": "selftest", "os": "Linux", "extra": {"dtype": "float32"}}
    settings = {"counts": counts, "repeats": repeats, "warmup": 1, "batch": 4, "paths": list(PATHS),
                "scoring": "label", "image_max_side": 768, "prefill_chunk": None, "max_new_tokens_min": 128,
                "max_new_tokens_per_decision": 24, "order": "rotated", "workload": "bench/dog-workload.json"}
    rec = build_record(env, settings, samples, "self-test record")
    try:
        validate_record(rec)
    except PeerError as e:
        failures.append(f"record: {e}")
    ag = {a["decisions"]: a for a in rec["agreement"]}
    check(ag[1]["generated_shared_agreement"] is not None, "agreement: valid generation compared")
    check(ag[4]["generated_shared_agreement"] is None, "agreement: invalid generations give null")
    d = ag[4]["direct_shared_max_prob_delta"]
    check(d is not None and 0 < d < 1e-6, f"agreement: tiny delta expected, got {d}")
    check(ag[4]["argmax_agreement"] == 1.0, "agreement: argmax equal")
    # types the C side insists on
    s0 = rec["runs"][0]["samples"][0]
    check(all(_is_int(s0[k]) for k in ("repeat", "order", "lm_forwards", "vision_forwards", "peak_bytes")),
          "record: count fields are JSON integers")

    # -- the validator catches what schema.c catches
    bad = [
        (lambda r: r["runs"][0]["samples"][0].__setitem__("lm_forwards", 12.0), "expected an integer or null"),
        (lambda r: r["runs"][0]["samples"][0].__setitem__("totl_ms", 1.0), "unknown field"),
        (lambda r: r["runs"][0]["samples"][0].pop("vision_ms"), "missing field"),
        (lambda r: r["runs"][0]["samples"][0].__setitem__("requested_decisions_per_s", 99.0), "decisions / total"),
        (lambda r: r["runs"][0]["samples"].pop(), "expected 3 samples"),
        (lambda r: r["runs"].pop(), "no run for"),
        (lambda r: r["settings"].__setitem__("counts", [4, 1]), "strictly increasing"),
        (lambda r: r["runs"][3]["samples"][0]["decisions"][0].__setitem__("probs", [0.5, 0.1, 0.1]), "sum to"),
        (lambda r: r["runs"][1]["samples"][0].__setitem__("output", "x"), "only generate_json"),
        (lambda r: r["runs"][0]["samples"][0].__setitem__("peak_where", "gpu"), "is not one of"),
        (lambda r: r["agreement"].pop(), "no entry for"),
        (lambda r: r.__setitem__("schema", "jev-bench/3"), "$.schema"),
        (lambda r: r["settings"].__setitem__("precision", "half"), "$.settings.precision"),
        (lambda r: r["agreement"][0].__setitem__("fast_vs_exact", {}), "only a record of"),
        (lambda r: r.__setitem__("schema", "jev-bench/1"), "$.settings.precision: unknown field"),
    ]
    for mutate, needle in bad:
        r = copy.deepcopy(rec)
        mutate(r)
        raises(lambda: validate_record(r), needle, f"validator: {needle}")
    # a jev-bench/1 record (the committed runs before the precision modes) still validates
    v1 = copy.deepcopy(rec)
    v1["schema"] = "jev-bench/1"
    del v1["settings"]["precision"]
    for a in v1["agreement"]:
        del a["fast_vs_exact"]
    try:
        validate_record(v1)
    except PeerError as e:
        failures.append(f"a jev-bench/1 record: {e}")

    # -- comparison: a jev twin with shifted probabilities
    twin = copy.deepcopy(rec)
    for run in twin["runs"]:
        for s in run["samples"]:
            for dd in s["decisions"] or []:
                if dd["probs"]:
                    p = dd["probs"]
                    p[0], p[-1] = p[0] + 0.01, p[-1] - 0.01
    lines, worst = compare_records(rec, twin)
    check(worst is not None and abs(worst - 0.01) < 1e-9, f"compare: max delta 0.01 expected, got {worst}")
    check(any("generate_json" in x and "3/3 equal" in x for x in lines), "compare: generated ids compared")

    # -- write it and let jev's own validator read it, when a build is here
    path = os.path.join(tmp, "peer.json")
    write_json_atomic(path, rec)
    keep = os.environ.get("PEER_SELFTEST_RECORD")  # tests/test-peer.c loads it with jev's loader
    if keep:
        write_json_atomic(keep, rec)
    with open(path, "r", encoding="utf-8") as f:
        check(json.load(f) == rec, "record: round trip through the file")
    here = os.path.dirname(os.path.abspath(__file__))
    jev = os.environ.get("JEV_JEV_BIN") or os.path.join(here, "..", "..", "build", "jev")
    c_checked = False
    if os.path.exists(jev):
        out = subprocess.run([jev, "report", path, "--output", os.path.join(tmp, "peer.md")], capture_output=True,
                             text=True)
        check(out.returncode == 0, f"jev report refused the record: {out.stderr.strip()}")
        c_checked = out.returncode == 0
        r = copy.deepcopy(rec)
        r["runs"][0]["samples"][0]["lm_forwards"] = 12.5
        write_json_atomic(path, r)
        out = subprocess.run([jev, "report", path], capture_output=True, text=True)
        check(out.returncode != 0 and "lm_forwards" in out.stderr, "jev report must refuse a fractional count")
    check_fla(tmp, check, raises, rec, jev if c_checked else None)
    shutil.rmtree(tmp)
    for f in failures:
        print(f"FAIL {f}")
    print(f"selftest: {'ok' if not failures else f'{len(failures)} failure(s)'}"
          f" (C validator {'also checked the record' if c_checked else 'not found: build/jev missing'})")
    return 0 if not failures else 1


def fake_carry(root, version="0.5.2", meta_version=None, source=True):
    """A carry laid out as scripts/device/fla-carry.sh writes it, with stand-in modules."""
    site, deps = os.path.join(root, "site"), os.path.join(root, "deps")
    for d in (os.path.join(site, "fla"), os.path.join(site, f"flash_linear_attention-{version}.dist-info"),
              os.path.join(deps, "einops")):
        os.makedirs(d, exist_ok=True)
    files = {os.path.join(site, "fla", "__init__.py"): f'__version__ = "{version}"\n',
             os.path.join(site, f"flash_linear_attention-{version}.dist-info", "METADATA"):
                 f"Metadata-Version: 2.1\nName: flash-linear-attention\nVersion: {meta_version or version}\n",
             os.path.join(site, f"flash_linear_attention-{version}.dist-info", "top_level.txt"): "fla\n",
             os.path.join(deps, "einops", "__init__.py"): '__version__ = "0.8.1"\n'}
    if source:
        files[os.path.join(root, "SOURCE")] = f"commit {'a' * 40}\ntag v{version}\nversion {version}\n"
    for path, text in files.items():
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    return root


def check_fla(tmp, check, raises, rec, jev):
    """The fla parts that run without torch (see the file's comment)."""
    # -- option rules
    ca = fla_kernels.check_args
    check(ca("torch", "cpu", "float32", False) is None, "fla args: the default is accepted")
    check(ca("fla", "cuda", "bfloat16", False) is None, "fla args: cuda bf16 accepted")
    check("--device cuda" in (ca("fla", "cpu", "bfloat16", False) or ""), "fla args: cpu refused")
    check("bf16 only" in (ca("fla", "cuda", "float32", False) or ""), "fla args: f32 refused")
    check(ca("fla", "cuda", "float32", True) is None, "fla args: the probe takes any --dtype")
    check("needs --kernels fla" in (ca("torch", "cuda", "float32", True) or ""), "fla args: probe without fla")

    # -- activation, in a child python (it changes sys.path and the import caches)
    here = os.path.dirname(os.path.abspath(__file__))

    def activated(carry):
        out = subprocess.run([sys.executable, os.path.join(here, "fla_kernels.py"), "check-carry", carry],
                             capture_output=True, text=True, timeout=60)
        return out.returncode, (json.loads(out.stdout) if out.returncode == 0 else out.stderr)
    carry = fake_carry(os.path.join(tmp, "carry-ok"))
    rc, got = activated(carry)
    check(rc == 0, f"fla carry: activation failed: {got}")
    if rc == 0:
        site = os.path.join(os.path.abspath(carry), "site")
        check(got["fla_origin"] == os.path.join(site, "fla", "__init__.py"), f"fla carry: fla from {got['fla_origin']}")
        check(got["distributions"] == ["flash-linear-attention"], f"fla carry: distribution map {got['distributions']}")
        check(got["version"] == "0.5.2" and got["commit"] == "a" * 40, "fla carry: version and commit read back")
        check(got["site_index"] == 0 and got["deps_last"], "fla carry: site first and deps last on sys.path")
        check(got["einops_origin"] is not None, "fla carry: einops importable")
    for name, kw, needle in [("carry-nosource", {"source": False}, "SOURCE"),
                             ("carry-meta", {"meta_version": "0.4.0"}, "the dist-info says")]:
        rc, got = activated(fake_carry(os.path.join(tmp, name), **kw))
        check(rc == 1 and needle in got, f"fla carry: {name} must be refused naming \"{needle}\", got {rc}: {got}")
    rc, got = activated(os.path.join(tmp, "carry-none"))
    check(rc == 1 and "fla-carry.sh" in got, f"fla carry: a missing carry must name the script, got {got}")

    # -- the binding: stand-ins for transformers' hub-kernel wrapper (5.15 on) and for per-layer attributes
    def fla_chunk(q):
        return q

    def fla_rec(q):
        return q

    def hub_wrapper(implementation, torch_function):
        """The shape of use_kernel_func_from_hub_with_fallback's result: the implementation in a
        closure cell, functools.wraps of the torch body."""
        is_new_implementation = implementation is not torch_function

        def wrapped(*args, **kwargs):
            return implementation(*args, **kwargs) if is_new_implementation else torch_function(*args, **kwargs)
        wrapped.__wrapped__ = torch_function
        return wrapped

    def torch_chunk(q):
        return q

    def torch_rec(q):
        return q
    pre = {"fns": {"chunk": fla_chunk, "recurrent": fla_rec}, "triton": "3.6.0", "einops": "0.8.1 (x)"}

    def model_with(modeling_attrs, layer_attrs):
        mod = types.ModuleType("selftest_fake_modeling")
        for k, v in modeling_attrs.items():
            setattr(mod, k, v)
        sys.modules[mod.__name__] = mod
        layer_cls = type("FakeGatedDeltaNet", (), {"__module__": mod.__name__})
        norm_cls = type("FakeRMSNormGated", (), {"__module__": mod.__name__})
        layers = []
        for _ in range(3):
            layer = layer_cls()
            layer.norm = norm_cls()
            for k, v in layer_attrs.items():
                setattr(layer, k, v)
            layers.append(layer)
        return types.SimpleNamespace(modules=lambda: iter([object()] + layers))

    def bound(model, what):
        try:
            return fla_kernels.check_binding(model, pre)
        except PeerError as e:
            check(False, f"{what}: {e}")
            return {"delta_rule_chunk": "", "delta_rule_recurrent": "", "deltanet_layers": 0}, {}
    try:
        hub = {"torch_chunk_gated_delta_rule": hub_wrapper(fla_chunk, torch_chunk),
               "torch_recurrent_gated_delta_rule": hub_wrapper(fla_rec, torch_rec)}
        facts, torch_codes = bound(model_with(hub, {}), "fla binding: hub wrapper")
        check(facts["delta_rule_chunk"].endswith("fla_chunk") and facts["deltanet_layers"] == 3,
              f"fla binding: hub wrapper read, got {facts}")
        check(torch_codes.get("transformers.torch_chunk_gated_delta_rule") is torch_chunk.__code__,
              "fla binding: the torch body is what the counter watches")
        fallback = dict(hub, torch_recurrent_gated_delta_rule=hub_wrapper(torch_rec, torch_rec))
        raises(lambda: fla_kernels.check_binding(model_with(fallback, {}), pre), "did not bind flash-linear",
               "fla binding: a torch fallback is refused")
        older = {"torch_chunk_gated_delta_rule": torch_chunk, "torch_recurrent_gated_delta_rule": torch_rec}
        facts, _ = bound(model_with(older, {"chunk_gated_delta_rule": fla_chunk, "recurrent_gated_delta_rule": fla_rec}),
                         "fla binding: per-layer attributes")
        check(facts["delta_rule_recurrent"].endswith("fla_rec"), "fla binding: per-layer attributes read")
        raises(lambda: fla_kernels.check_binding(model_with(older, {}), pre), "did not bind flash-linear",
               "fla binding: plain torch functions are refused")
        raises(lambda: fla_kernels.check_binding(model_with({}, {}), pre), "does not know",
               "fla binding: an unknown binding is refused")
    finally:
        sys.modules.pop("selftest_fake_modeling", None)

    # -- the call counter and its verdict
    with fla_kernels.CallCounter({"fla.chunk_gated_delta_rule": fla_chunk.__code__,
                                  "transformers.torch_chunk_gated_delta_rule": torch_chunk.__code__}) as c:
        for i in range(3):
            fla_chunk(i)
    check(c.counts == {"fla.chunk_gated_delta_rule": 3, "transformers.torch_chunk_gated_delta_rule": 0},
          f"fla counter: {c.counts}")
    try:
        fla_kernels.check_calls(c.counts)
    except PeerError as e:
        check(False, f"fla verdict: {e}")
    raises(lambda: fla_kernels.check_calls({"fla.chunk_gated_delta_rule": 0}), "never called",
           "fla verdict: no fla call")
    raises(lambda: fla_kernels.check_calls({"fla.chunk_gated_delta_rule": 2,
                                            "transformers.torch_chunk_gated_delta_rule": 1}), "torch delta rule",
           "fla verdict: a torch call")

    # -- a record named for fla: both validators, and its own series in jev's report
    r = copy.deepcopy(rec)
    r["environment"]["peer"]["name"] = fla_kernels.PEER_NAME
    r["environment"]["backend"] = "cuda-bf16"
    r["environment"]["libraries"]["flash-linear-attention"] = "0.5.2"
    r["environment"]["extra"]["kernels"] = {"delta_rule_chunk": "fla.ops.gated_delta_rule.chunk.chunk_gated_delta_rule",
                                            "warmup_calls": {"fla.chunk_gated_delta_rule": 7}}
    try:
        validate_record(r)
    except PeerError as e:
        check(False, f"fla record: {e}")
    if jev:
        a, b, md = (os.path.join(tmp, x) for x in ("peer-a.json", "peer-fla.json", "fla.md"))
        write_json_atomic(a, rec)
        write_json_atomic(b, r)
        out = subprocess.run([jev, "report", a, b, "--output", md], capture_output=True, text=True)
        check(out.returncode == 0, f"jev report refused the fla record: {out.stderr.strip()}")
        if out.returncode == 0:
            with open(md, "r", encoding="utf-8") as f:
                text = f.read()
            check("transformers + flash-linear-attention cuda-bf16" in text, "fla record: its own label in the report")
