"""
bench/peers/jevbench.py - the parts of the transformers peer that need no torch.

What it is: reading and checking the inputs dump of `jev bench --dump-inputs`
(docs/bench-inputs.md), the raw record "jev-bench/2" (docs/bench-schema.md): its builder,
its agreement numbers and a validator ported from common/bench/schema.c, the generate_json
checker (src/decide/genjson.h), the MLX layout's names, norm rule and bit stream, the
safetensors header reader, and the comparison of a peer's record with jev's.

What it is not: anything that runs a model (bench/peers/transformers.py does), or a second
definition of the schema: where this file and schema.c differ, schema.c is right and this
file is a bug (the self-test runs jev's own validator on a record built here).

Constraints: standard library only, so that `transformers.py --selftest` and
`--compare-with` run on machines without torch. Every problem is a PeerError whose message
names the file and the field (a JSON path for records).
"""

import hashlib
import json
import math
import os
import re
import struct
import tempfile

SCHEMA = "jev-bench/2"  # what build_record writes
SCHEMA_V1 = "jev-bench/1"  # still read: the records from before the precision modes
INPUTS_FORMAT = "jev-bench-inputs/1"
PATHS = ["generate_json", "independent", "shared"]  # table order, as jev's records
PEER_NAME = "transformers"


class PeerError(Exception):
    """A bad input or a failed consistency check; the message names what and where."""


# ---- small helpers ----

def _is_int(v):
    # bool is an int subclass in Python; JSON integers must not be booleans
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v):
    return (isinstance(v, (int, float)) and not isinstance(v, bool)
            and math.isfinite(float(v)))


def sha256_file(path, chunk=1 << 22):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(chunk)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def write_json_atomic(path, obj):
    """Temp file in the destination folder, fsync, rename: a reader never sees a part."""
    text = json.dumps(obj, indent=1, ensure_ascii=False, allow_nan=False) + "\n"
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".tmp.", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def utf8_clean(s):
    """Lone surrogates cannot be written as UTF-8; the schema wants U+FFFD for bad bytes."""
    if s is None:
        return None
    return re.sub("[\ud800-\udfff]", "\ufffd", s)


def softmax_double(xs):
    """Softmax in double precision with max subtraction (what jev's answer code does)."""
    m = max(xs)
    e = [math.exp(x - m) for x in xs]
    s = sum(e)
    return [v / s for v in e]


def argmax_first(xs):
    """Index of the largest value, ties to the first (jev's rule)."""
    best, bv = -1, None
    for i, v in enumerate(xs):
        if bv is None or v > bv:
            best, bv = i, v
    return best


def median(xs):
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


# ---- the inputs dump (docs/bench-inputs.md) ----

def _need(obj, key, where, check, what):
    if not isinstance(obj, dict) or key not in obj:
        raise PeerError(f"{where}.{key}: missing")
    v = obj[key]
    if not check(v):
        raise PeerError(f"{where}.{key}: expected {what}, got {json.dumps(v)[:60]}")
    return v


def _int_list(v):
    return isinstance(v, list) and all(_is_int(x) for x in v)


def _image_runs(ids, image_id):
    """(count of image tokens, number of contiguous runs of them)."""
    count, runs, prev = 0, 0, False
    for t in ids:
        cur = t == image_id
        count += cur
        runs += cur and not prev
        prev = cur
    return count, runs


def load_manifest(inputs_dir, spatial_merge=2, vocab_size=None, patch_dim=None):
    """Reads and checks manifest.json (every rule of docs/bench-inputs.md). The model-dependent
    numbers (merge size, vocabulary, patch vector length) come from the model's config when
    the caller knows them. Returns the manifest dict; raises PeerError naming the field."""
    path = os.path.join(inputs_dir, "manifest.json")
    try:
        with open(path, "r", encoding="utf-8") as f:
            m = json.load(f, object_pairs_hook=_no_duplicates)
    except OSError as e:
        raise PeerError(f"{path}: cannot read: {e.strerror}")
    except ValueError as e:
        raise PeerError(f"{path}: not valid JSON: {e}")
    w = path
    if not isinstance(m, dict):
        raise PeerError(f"{w}: expected an object")
    fmt = _need(m, "format", w, lambda v: isinstance(v, str), "a string")
    if fmt != INPUTS_FORMAT:
        raise PeerError(f"{w}.format: \"{fmt[:40]}\" is not {INPUTS_FORMAT} (this peer reads only that)")
    for key in ("jev", "model", "image", "settings", "special_ids", "pixel_values"):
        _need(m, key, w, lambda v: isinstance(v, dict), "an object")
    model = m["model"]
    _need(model, "id", w + ".model", lambda v: isinstance(v, str) and v, "a non-empty string")
    _need(model, "layout", w + ".model", lambda v: v in ("hf", "mlx4"), "\"hf\" or \"mlx4\"")
    weights = _need(model, "weights", w + ".model", lambda v: isinstance(v, list), "an array")
    for i, wt in enumerate(weights):
        at = f"{w}.model.weights[{i}]"
        _need(wt, "file", at, lambda v: isinstance(v, str) and v and "/" not in v and v not in (".", ".."),
              "a plain file name")
        _need(wt, "sha256", at, lambda v: v is None or (isinstance(v, str) and re.fullmatch("[0-9a-f]{64}", v)),
              "64 lowercase hex digits or null")
    for key in ("path", "sha256", "width", "height", "resized_width", "resized_height"):
        if key not in m["image"]:
            raise PeerError(f"{w}.image.{key}: missing")
    st = m["settings"]
    _need(st, "batch", w + ".settings", lambda v: v == "all" or (_is_int(v) and v >= 1), "an integer >= 1 or \"all\"")
    for key in ("image_max_side", "prefill_chunk", "max_new_tokens_min", "max_new_tokens_per_decision"):
        _need(st, key, w + ".settings", lambda v: v is None or _is_int(v), "an integer or null")
    sp = m["special_ids"]
    for key in ("image_token_id", "vision_start_token_id", "vision_end_token_id"):
        _need(sp, key, w + ".special_ids", _is_int, "an integer")
    eos = _need(m, "eos_token_ids", w, lambda v: _int_list(v) and len(v) > 0, "a non-empty array of integers")
    pv = m["pixel_values"]
    at = w + ".pixel_values"
    _need(pv, "file", at, lambda v: isinstance(v, str) and v and "/" not in v, "a plain file name")
    _need(pv, "dtype", at, lambda v: v == "float32", "\"float32\"")
    _need(pv, "byte_order", at, lambda v: v == "little", "\"little\"")
    shape = _need(pv, "shape", at, lambda v: _int_list(v) and len(v) == 2 and min(v) > 0, "[n_patches, patch_dim]")
    grid = _need(pv, "grid_thw", at, lambda v: _int_list(v) and len(v) == 3 and min(v) > 0, "[t, gh, gw]")
    if grid[0] * grid[1] * grid[2] != shape[0]:
        raise PeerError(f"{at}.grid_thw: {grid} makes {grid[0] * grid[1] * grid[2]} patches, shape says {shape[0]}")
    if patch_dim is not None and shape[1] != patch_dim:
        raise PeerError(f"{at}.shape: patch_dim {shape[1]}, the model's vision config wants {patch_dim}")
    if grid[1] % spatial_merge or grid[2] % spatial_merge:
        raise PeerError(f"{at}.grid_thw: {grid} is not a multiple of the merge size {spatial_merge}")
    pfile = os.path.join(inputs_dir, pv["file"])
    try:
        size = os.path.getsize(pfile)
    except OSError as e:
        raise PeerError(f"{pfile}: cannot read: {e.strerror}")
    if size != shape[0] * shape[1] * 4:
        raise PeerError(f"{pfile}: {size} bytes, {at}.shape {shape} needs {shape[0] * shape[1] * 4}")
    n_img = shape[0] // (spatial_merge * spatial_merge)
    image_id = sp["image_token_id"]

    def ids_ok(ids, at2, with_image):
        if not _int_list(ids) or not ids:
            raise PeerError(f"{at2}: expected a non-empty array of integers")
        lo, hi = min(ids), max(ids)
        if lo < 0 or (vocab_size is not None and hi >= vocab_size):
            raise PeerError(f"{at2}: token id {lo if lo < 0 else hi} is outside the vocabulary (0..{vocab_size})")
        count, runs = _image_runs(ids, image_id)
        if with_image and (count != n_img or runs != 1):
            raise PeerError(f"{at2}: {count} image tokens in {runs} runs, the image needs {n_img} in one run")
        if not with_image and count:
            raise PeerError(f"{at2}: holds {count} image tokens, a suffix holds none")

    runs = _need(m, "runs", w, lambda v: isinstance(v, list) and v, "a non-empty array")
    prev = 0
    for r, run in enumerate(runs):
        at = f"{w}.runs[{r}]"
        n = _need(run, "decisions", at, lambda v: _is_int(v) and v >= 1, "an integer >= 1")
        if n <= prev:
            raise PeerError(f"{at}.decisions: counts must be strictly increasing")
        prev = n
        ids = _need(run, "decision_ids", at, lambda v: isinstance(v, list) and len(v) == n
                    and all(isinstance(x, str) and x for x in v) and len(set(v)) == n, f"{n} unique strings")
        del ids
        opts = _need(run, "options", at, lambda v: isinstance(v, list) and len(v) == n, f"{n} arrays")
        labels = _need(run, "label_ids", at, lambda v: isinstance(v, list) and len(v) == n, f"{n} arrays")
        for i in range(n):
            o, lab = opts[i], labels[i]
            if not (isinstance(o, list) and o and all(isinstance(x, str) and x for x in o) and len(set(o)) == len(o)):
                raise PeerError(f"{at}.options[{i}]: expected unique non-empty strings")
            if not (_int_list(lab) and len(lab) == len(o) and len(set(lab)) == len(lab)):
                raise PeerError(f"{at}.label_ids[{i}]: expected {len(o)} unique token ids (one per option)")
            ids_ok(lab, f"{at}.label_ids[{i}]", False)
        sh = _need(run, "shared", at, lambda v: isinstance(v, dict), "an object")
        ids_ok(_need(sh, "prefix_ids", at + ".shared", lambda v: True, ""), at + ".shared.prefix_ids", True)
        suf = _need(sh, "suffix_ids", at + ".shared", lambda v: isinstance(v, list) and len(v) == n, f"{n} arrays")
        for i, s in enumerate(suf):
            ids_ok(s, f"{at}.shared.suffix_ids[{i}]", False)
        _need(sh, "rope_delta", at + ".shared", lambda v: v is None or _is_int(v), "an integer or null")
        ind = _need(run, "independent", at, lambda v: isinstance(v, dict), "an object")
        pr = _need(ind, "prompt_ids", at + ".independent", lambda v: isinstance(v, list) and len(v) == n, f"{n} arrays")
        for i, p in enumerate(pr):
            ids_ok(p, f"{at}.independent.prompt_ids[{i}]", True)
        gen = _need(run, "generate_json", at, lambda v: isinstance(v, dict), "an object")
        ids_ok(_need(gen, "prompt_ids", at + ".generate_json", lambda v: True, ""), at + ".generate_json.prompt_ids", True)
        _need(gen, "max_new_tokens", at + ".generate_json", lambda v: _is_int(v) and v >= 1, "an integer >= 1")
    del eos
    return m


def _no_duplicates(pairs):
    seen = {}
    for k, v in pairs:
        if k in seen:
            raise ValueError(f"duplicate key \"{k}\"")
        seen[k] = v
    return seen


# ---- generate_json validity (src/decide/genjson.h) ----

def check_generated(text, decision_ids, options):
    """(valid, choices, reason): valid iff text is exactly one JSON object (surrounding
    whitespace allowed) whose keys are exactly decision_ids, none repeated, and whose values
    are allowed option ids. choices[i] is the answer for decision i when it is allowed, else
    None, also in an invalid output (as jev's checker reports them)."""
    n = len(decision_ids)
    none = [None] * n
    if text is None:
        return False, none, "no text (no tokenizer to decode the generated ids)"
    try:
        obj = json.loads(text, object_pairs_hook=_pairs_keep)
    except ValueError as e:
        return False, none, f"not one JSON value: {e}"
    if not isinstance(obj, _Pairs):
        return False, none, "not a JSON object"
    index = {d: i for i, d in enumerate(decision_ids)}
    choices = list(none)
    reason = None
    seen = set()
    for k, v in obj.pairs:
        if k in seen:
            reason = reason or f"key \"{k}\" repeated"
            continue
        seen.add(k)
        i = index.get(k)
        if i is None:
            reason = reason or f"unknown key \"{k}\""
            continue
        if isinstance(v, str) and v in options[i]:
            choices[i] = v
        else:
            reason = reason or f"\"{k}\": value is not an option id"
    for d in decision_ids:
        if d not in seen:
            reason = reason or f"key \"{d}\" missing"
    return reason is None, choices, reason or ""


class _Pairs:
    """A JSON object as its list of pairs, so duplicates stay visible to the checker."""

    def __init__(self, pairs):
        self.pairs = pairs


def _pairs_keep(pairs):
    return _Pairs(pairs)


# ---- the record (docs/bench-schema.md) ----

def decision_entry(did, options, probs=None, choice=None):
    """One decisions[] entry; for a scoring path the choice is the argmax option."""
    if probs is not None:
        choice = options[argmax_first(probs)]
    return {"id": did, "choice": choice, "options": list(options),
            "probs": None if probs is None else [float(p) for p in probs]}


def make_sample(n, repeat, order, total_ms, vision_ms=None, prefill_ms=None, scoring_ms=None,
                lm_forwards=None, vision_forwards=None, peak_bytes=None, peak_where=None,
                valid=True, output=None, decisions=None, extra=None):
    """A sample with decisions/s derived exactly as the schema checks them."""
    total_ms = float(total_ms)
    req = n * 1000.0 / total_ms
    s = {
        "repeat": int(repeat), "order": None if order is None else int(order),
        "total_ms": total_ms,
        "vision_ms": None if vision_ms is None else float(vision_ms),
        "prefill_ms": None if prefill_ms is None else float(prefill_ms),
        "scoring_ms": None if scoring_ms is None else float(scoring_ms),
        "lm_forwards": None if lm_forwards is None else int(lm_forwards),
        "vision_forwards": None if vision_forwards is None else int(vision_forwards),
        "peak_bytes": None if peak_bytes is None else int(peak_bytes),
        "peak_where": peak_where if peak_bytes is not None else None,
        "requested_decisions_per_s": req,
        "valid_decisions_per_s": req if valid else 0.0,
        "valid": bool(valid),
        "output": utf8_clean(output),
        "decisions": decisions,
    }
    if extra:
        s["extra"] = extra
    return s


def _scored_answer(d):
    probs = d.get("probs")
    if isinstance(probs, list) and probs:
        return d["options"][argmax_first(probs)]
    return d.get("choice")


def compute_agreement(runs, n, repeats):
    """The three agreement numbers of one count, exactly as jev_bench_agreement_compute."""
    def find(path):
        for r in runs:
            if r["decisions"] == n and r["path"] == path:
                return {s["repeat"]: s for s in r["samples"]}
        return None
    ind, sh, gen = find("independent"), find("shared"), find("generate_json")
    out = {"decisions": n, "direct_shared_max_prob_delta": None, "argmax_agreement": None,
           "generated_shared_agreement": None, "fast_vs_exact": None}  # a peer has no jev exact run to compare
    if sh is None:
        return out
    delta, agree, compared = 0.0, 0, 0
    for r in range(repeats):
        a, b = (ind or {}).get(r), sh.get(r)
        da = a.get("decisions") if a else None
        db = b.get("decisions") if b else None
        if not isinstance(da, list) or not isinstance(db, list):
            continue
        for x, y in zip(da, db):
            pa, pb = x.get("probs"), y.get("probs")
            if not isinstance(pa, list) or not isinstance(pb, list):
                continue
            if len(pa) != len(pb):
                raise PeerError(f"agreement at {n} decisions: {len(pa)} independent vs {len(pb)} shared candidates")
            for p, q in zip(pa, pb):
                delta = max(delta, abs(p - q))
            agree += argmax_first(pa) == argmax_first(pb)
            compared += 1
    if compared:
        out["direct_shared_max_prob_delta"] = delta
        out["argmax_agreement"] = agree / compared
    total, n_gen = 0.0, 0
    for r in range(repeats):
        g, b = (gen or {}).get(r), sh.get(r)
        if g is None or b is None or g.get("valid") is not True:
            continue
        dg, db = g.get("decisions"), b.get("decisions")
        if not isinstance(dg, list) or not isinstance(db, list) or not dg or len(dg) != len(db):
            continue
        same = sum(1 for x, y in zip(dg, db) if x.get("choice") is not None and x.get("choice") == _scored_answer(y))
        total += same / len(dg)
        n_gen += 1
    if n_gen:
        out["generated_shared_agreement"] = total / n_gen
    return out


def build_record(environment, settings, samples, note=None):
    """samples: {(n, path): [sample, ...]} -> the whole record, runs in settings order."""
    runs = []
    for n in settings["counts"]:
        for p in settings["paths"]:
            runs.append({"decisions": n, "path": p,
                         "samples": sorted(samples.get((n, p), []), key=lambda s: s["repeat"])})
    settings = dict(settings)
    settings.setdefault("precision", None)  # jev's mode; a peer says null (its dtype is in environment.extra)
    rec = {"schema": SCHEMA}
    if note:
        rec["note"] = note
    rec["environment"] = environment
    rec["settings"] = settings
    rec["runs"] = runs
    rec["agreement"] = [compute_agreement(runs, n, settings["repeats"]) for n in settings["counts"]]
    return rec


# ---- validator: a port of common/bench/schema.c, so a bad record never leaves this script ----

_S, _I, _N, _B, _Z, _O, _A, _OPT = 1, 2, 4, 8, 16, 32, 64, 128
_KIND_NAMES = [(_S, "a string"), (_I, "an integer"), (_N, "a number"), (_B, "a boolean"),
               (_O, "an object"), (_A, "an array"), (_Z, "null")]


def _type_ok(v, t):
    if v is None:
        return bool(t & _Z)
    if isinstance(v, bool):
        return bool(t & _B)
    if isinstance(v, int):
        return bool(t & (_I | _N))
    if isinstance(v, float):
        return bool(t & _N) and math.isfinite(v)
    if isinstance(v, str):
        return bool(t & _S)
    if isinstance(v, dict):
        return bool(t & _O)
    if isinstance(v, list):
        return bool(t & _A)
    return False


def _check_object(obj, at, fields, allow_extra):
    if not isinstance(obj, dict):
        raise PeerError(f"{at}: expected an object")
    for key, t in fields:
        if key not in obj:
            if t & _OPT:
                continue
            raise PeerError(f"{at}.{key}: missing field")
        if not _type_ok(obj[key], t):
            want = " or ".join(name for bit, name in _KIND_NAMES if t & bit)
            raise PeerError(f"{at}.{key}: expected {want}, got {json.dumps(obj[key])[:40]}")
    names = {k for k, _ in fields}
    for key, v in obj.items():
        if key in names:
            continue
        if allow_extra and key == "extra":
            if not isinstance(v, dict):
                raise PeerError(f"{at}.extra: expected an object")
            continue
        raise PeerError(f"{at}.{key}: unknown field (not in the jev-bench schema)")


def _range(obj, at, key, lo, hi):
    v = obj.get(key)
    if v is None:
        return
    if not (lo <= v <= hi):
        raise PeerError(f"{at}.{key}: {v} is out of range [{lo}, {hi}]")


def _near(a, b, rel):
    return abs(a - b) <= rel * max(abs(a), abs(b)) + 1e-12


def validate_record(rec):
    """Raises PeerError with the JSON path of the first problem, as `jev report` would."""
    max_count = 9007199254740992.0
    if not isinstance(rec, dict):
        raise PeerError("$: expected an object")
    if rec.get("schema") not in (SCHEMA, SCHEMA_V1):
        raise PeerError(f"$.schema: expected \"{SCHEMA}\" or \"{SCHEMA_V1}\"")
    v2 = rec["schema"] == SCHEMA  # version 2 adds settings.precision and agreement[].fast_vs_exact
    _check_object(rec, "$", [("schema", _S), ("note", _S | _OPT), ("environment", _O), ("settings", _O),
                             ("runs", _A), ("agreement", _A)], True)
    env, at = rec["environment"], "$.environment"
    _check_object(env, at, [("peer", _O | _Z), ("jev", _O), ("model", _O), ("image", _O), ("libraries", _O),
                            ("compiler", _S | _Z), ("cpu", _O), ("backend", _S), ("gpu", _O | _Z),
                            ("date", _S | _Z), ("machine", _S | _Z), ("os", _S | _Z)], True)
    if not env["backend"]:
        raise PeerError(f"{at}.backend: must not be empty")
    if env["peer"] is not None:
        _check_object(env["peer"], at + ".peer", [("name", _S), ("version", _S | _Z)], False)
        if not env["peer"]["name"]:
            raise PeerError(f"{at}.peer.name: must not be empty")
    _check_object(env["jev"], at + ".jev", [("version", _S | _Z), ("git_commit", _S | _Z)], False)
    _check_object(env["model"], at + ".model", [("id", _S), ("dir", _S | _Z), ("synthetic", _B | _Z),
                                                ("weights", _A)], False)
    if not env["model"]["id"]:
        raise PeerError(f"{at}.model.id: must not be empty")
    for i, w in enumerate(env["model"]["weights"]):
        wat = f"{at}.model.weights[{i}]"
        _check_object(w, wat, [("file", _S), ("bytes", _I | _Z), ("sha256", _S | _Z)], False)
        _range(w, wat, "bytes", 0, max_count)
        if w["sha256"] is not None and not re.fullmatch("[0-9a-f]{64}", w["sha256"]):
            raise PeerError(f"{wat}.sha256: expected 64 lowercase hex digits")
    img = env["image"]
    _check_object(img, at + ".image", [("path", _S | _Z), ("sha256", _S | _Z), ("width", _I | _Z),
                                       ("height", _I | _Z), ("resized_width", _I | _Z),
                                       ("resized_height", _I | _Z)], False)
    if img["sha256"] is not None and not re.fullmatch("[0-9a-f]{64}", img["sha256"]):
        raise PeerError(f"{at}.image.sha256: expected 64 lowercase hex digits")
    for k in ("width", "height", "resized_width", "resized_height"):
        _range(img, at + ".image", k, 1, 1 << 20)
    for k, v in env["libraries"].items():
        if not isinstance(v, str):
            raise PeerError(f"{at}.libraries.{k}: expected a string")
    _check_object(env["cpu"], at + ".cpu", [("model", _S | _Z), ("cores", _I | _Z), ("threads", _I | _Z)], False)
    _range(env["cpu"], at + ".cpu", "cores", 1, 1 << 20)
    _range(env["cpu"], at + ".cpu", "threads", 1, 1 << 20)
    if env["gpu"] is not None:
        _check_object(env["gpu"], at + ".gpu", [("name", _S), ("driver", _S | _Z), ("memory_bytes", _I | _Z)], False)
        _range(env["gpu"], at + ".gpu", "memory_bytes", 0, max_count)

    st, at = rec["settings"], "$.settings"
    _check_object(st, at, [("counts", _A), ("repeats", _I), ("warmup", _I), ("batch", _I | _S), ("paths", _A),
                           ("scoring", _S), ("image_max_side", _I), ("prefill_chunk", _I | _Z),
                           ("max_new_tokens_min", _I | _Z), ("max_new_tokens_per_decision", _I | _Z),
                           ("order", _S), ("workload", _S | _Z)] + ([("precision", _S | _Z)] if v2 else []), True)
    if v2 and st["precision"] not in (None, "exact", "fast"):
        raise PeerError(f"{at}.precision: \"{st['precision']}\" is not one of \"exact\", \"fast\"")
    _range(st, at, "repeats", 1, 1000)
    _range(st, at, "warmup", 0, 1000)
    _range(st, at, "image_max_side", 1, 1 << 20)
    _range(st, at, "prefill_chunk", 1, 1 << 24)
    _range(st, at, "max_new_tokens_min", 0, 1 << 24)
    _range(st, at, "max_new_tokens_per_decision", 0, 1 << 24)
    if st["scoring"] not in ("label", "multi_token"):
        raise PeerError(f"{at}.scoring: \"{st['scoring']}\" is not one of \"label\", \"multi_token\"")
    if st["order"] not in ("rotated", "fixed"):
        raise PeerError(f"{at}.order: \"{st['order']}\" is not one of \"rotated\", \"fixed\"")
    if isinstance(st["batch"], str):
        if st["batch"] != "all":
            raise PeerError(f"{at}.batch: \"{st['batch']}\" is not one of \"all\"")
    else:
        _range(st, at, "batch", 1, 65536)
    counts, paths = st["counts"], st["paths"]
    if not 1 <= len(counts) <= 64:
        raise PeerError(f"{at}.counts: expected 1 to 64 counts, got {len(counts)}")
    for i, c in enumerate(counts):
        if not _is_int(c):
            raise PeerError(f"{at}.counts[{i}]: expected an integer")
        if not 1 <= c <= 65536:
            raise PeerError(f"{at}.counts[{i}]: {c} is out of range [1, 65536]")
        if i and c <= counts[i - 1]:
            raise PeerError(f"{at}.counts[{i}]: counts must be strictly increasing")
    if not 1 <= len(paths) <= 16:
        raise PeerError(f"{at}.paths: expected 1 to 16 paths, got {len(paths)}")
    for i, p in enumerate(paths):
        if not isinstance(p, str) or not re.fullmatch("[a-z][a-z0-9_]{0,31}", p):
            raise PeerError(f"{at}.paths[{i}]: path name must match [a-z][a-z0-9_]* (at most 32 characters)")
        if p in paths[:i]:
            raise PeerError(f"{at}.paths[{i}]: path \"{p}\" listed twice")
    repeats = st["repeats"]

    seen, where = set(), [None]
    for ri, run in enumerate(rec["runs"]):
        rat = f"$.runs[{ri}]"
        _check_object(run, rat, [("decisions", _I), ("path", _S), ("samples", _A),
                                 ("published_medians", _O | _OPT)], True)
        n, p = run["decisions"], run["path"]
        if n not in counts:
            raise PeerError(f"{rat}.decisions: {n} is not in settings.counts")
        if p not in paths:
            raise PeerError(f"{rat}.path: \"{p}\" is not in settings.paths")
        if (n, p) in seen:
            raise PeerError(f"{rat}: a second run for ({n}, {p})")
        seen.add((n, p))
        if len(run["samples"]) != repeats:
            raise PeerError(f"{rat}.samples: expected {repeats} samples (settings.repeats), got {len(run['samples'])}")
        reps = set()
        for si, s in enumerate(run["samples"]):
            _validate_sample(s, f"{rat}.samples[{si}]", n, p, repeats, reps, where)
    for n in counts:
        for p in paths:
            if (n, p) not in seen:
                raise PeerError(f"$.runs: no run for {n} decisions, path {p}")
    agseen = set()
    for ai, a in enumerate(rec["agreement"]):
        aat = f"$.agreement[{ai}]"
        _check_object(a, aat, [("decisions", _I), ("direct_shared_max_prob_delta", _N | _Z),
                               ("argmax_agreement", _N | _Z), ("generated_shared_agreement", _N | _Z)]
                      + ([("fast_vs_exact", _O | _Z)] if v2 else []), False)
        if a["decisions"] not in counts:
            raise PeerError(f"{aat}.decisions: {a['decisions']} is not in settings.counts")
        if a["decisions"] in agseen:
            raise PeerError(f"{aat}.decisions: a second entry for {a['decisions']}")
        agseen.add(a["decisions"])
        for k in ("direct_shared_max_prob_delta", "argmax_agreement", "generated_shared_agreement"):
            _range(a, aat, k, 0, 1)
        if v2:
            _validate_vs_exact(a["fast_vs_exact"], aat + ".fast_vs_exact", st["precision"], env["peer"] is not None,
                               paths)
    for n in counts:
        if n not in agseen:
            raise PeerError(f"$.agreement: no entry for {n} decisions")


def _validate_vs_exact(fx, at, precision, peer, paths):
    """As schema.c's check_vs_exact: null unless jev's fast record, which has every path once."""
    fast = precision == "fast"
    if fx is None:
        if fast and not peer:
            raise PeerError(f"{at}: a fast record must compare with exact (null here)")
        return
    if not fast:
        raise PeerError(f"{at}: only a record of settings.precision \"fast\" has it")
    for p, e in fx.items():
        if p not in paths:
            raise PeerError(f"{at}.{p}: \"{p}\" is not in settings.paths")
        _check_object(e, f"{at}.{p}", [("max_prob_delta", _N | _Z), ("argmax_agreement", _N | _Z)], False)
        _range(e, f"{at}.{p}", "max_prob_delta", 0, 1)
        _range(e, f"{at}.{p}", "argmax_agreement", 0, 1)
    for p in paths:
        if p not in fx:
            raise PeerError(f"{at}: no entry for path {p}")


def _validate_sample(s, at, n, path, repeats, reps, where):
    _check_object(s, at, [("repeat", _I), ("order", _I | _Z), ("total_ms", _N), ("vision_ms", _N | _Z),
                          ("prefill_ms", _N | _Z), ("scoring_ms", _N | _Z), ("lm_forwards", _I | _Z),
                          ("vision_forwards", _I | _Z), ("peak_bytes", _I | _Z), ("peak_where", _S | _Z),
                          ("requested_decisions_per_s", _N), ("valid_decisions_per_s", _N), ("valid", _B),
                          ("output", _S | _Z), ("decisions", _A | _Z)], True)
    _range(s, at, "repeat", 0, repeats - 1)
    if s["repeat"] in reps:
        raise PeerError(f"{at}.repeat: repeat {s['repeat']} appears twice in this run")
    reps.add(s["repeat"])
    _range(s, at, "order", 0, 15)
    _range(s, at, "total_ms", 0.001, 1e9)
    for k in ("vision_ms", "prefill_ms", "scoring_ms"):
        _range(s, at, k, 0, 1e9)
    for k in ("lm_forwards", "vision_forwards", "peak_bytes"):
        _range(s, at, k, 0, 9007199254740992.0)
    if s["peak_where"] is not None:
        if s["peak_where"] not in ("cpu", "cuda", "metal"):
            raise PeerError(f"{at}.peak_where: \"{s['peak_where']}\" is not one of \"cpu\", \"cuda\", \"metal\"")
        if where[0] is None:
            where[0] = s["peak_where"]
        elif where[0] != s["peak_where"]:
            raise PeerError(f"{at}.peak_where: \"{s['peak_where']}\" differs from \"{where[0]}\" earlier in the file")
    elif s["peak_bytes"] is not None:
        raise PeerError(f"{at}.peak_where: required when peak_bytes is recorded")
    want = n * 1000.0 / s["total_ms"]
    if not _near(s["requested_decisions_per_s"], want, 1e-3):
        raise PeerError(f"{at}.requested_decisions_per_s: {s['requested_decisions_per_s']} is not decisions / total time ({want})")
    if s["valid"] and not _near(s["valid_decisions_per_s"], s["requested_decisions_per_s"], 1e-3):
        raise PeerError(f"{at}.valid_decisions_per_s: must be requested_decisions_per_s for a valid sample")
    if not s["valid"] and s["valid_decisions_per_s"] != 0:
        raise PeerError(f"{at}.valid_decisions_per_s: must be 0 for an invalid sample")
    if s["output"] is not None and path != "generate_json":
        raise PeerError(f"{at}.output: only generate_json samples carry a generated output")
    decs = s["decisions"]
    if decs is None:
        return
    if len(decs) != n:
        raise PeerError(f"{at}.decisions: expected {n} entries (one per decision), got {len(decs)}")
    for i, d in enumerate(decs):
        dat = f"{at}.decisions[{i}]"
        _check_object(d, dat, [("id", _S), ("choice", _S | _Z), ("options", _A), ("probs", _A | _Z)], False)
        opts = d["options"]
        if not 1 <= len(opts) <= 256:
            raise PeerError(f"{dat}.options: expected 1 to 256 options, got {len(opts)}")
        for j, o in enumerate(opts):
            if not isinstance(o, str):
                raise PeerError(f"{dat}.options[{j}]: expected a string")
            if o in opts[:j]:
                raise PeerError(f"{dat}.options[{j}]: option listed twice")
        if d["choice"] is not None and d["choice"] not in opts:
            raise PeerError(f"{dat}.choice: \"{d['choice'][:40]}\" is not one of the options")
        probs = d["probs"]
        if probs is not None:
            if len(probs) != len(opts):
                raise PeerError(f"{dat}.probs: expected {len(opts)} probabilities (one per option), got {len(probs)}")
            for j, p in enumerate(probs):
                if not _is_num(p):
                    raise PeerError(f"{dat}.probs[{j}]: expected a number")
                if not 0.0 <= p <= 1.0:
                    raise PeerError(f"{dat}.probs[{j}]: probability {p} is out of range [0, 1]")
            if abs(sum(probs) - 1.0) > 1e-3:
                raise PeerError(f"{dat}.probs: probabilities sum to {sum(probs):.6f}, not 1")


# ---- MLX layout (docs/model-files.md, spec/qwen35.md §10.2): names and bit streams ----

_SHIFTED_NORM = re.compile(r"^model\.language_model\.(layers\.\d+\.(input_layernorm|post_attention_layernorm|"
                           r"self_attn\.q_norm|self_attn\.k_norm)|norm)\.weight$")


def mlx_to_hf_name(name):
    """mlx-vlm's renames undone; None for tensors HF does not load (mtp.*)."""
    if name.startswith("language_model.model."):
        return "model.language_model." + name[len("language_model.model."):]
    if name.startswith("language_model.lm_head."):
        return "lm_head." + name[len("language_model.lm_head."):]
    if name.startswith("vision_tower."):
        return "model.visual." + name[len("vision_tower."):]
    if name.startswith("mtp.") or name.startswith("language_model.mtp."):
        return None
    raise PeerError(f"tensor '{name}': not an MLX Qwen3.5 name (language_model.model.*, vision_tower.*)")


def is_shifted_norm(hf_name):
    """The zero-centred RMSNorms that MLX stores as 1 + w (not linear_attn.norm, not the
    vision LayerNorms)."""
    return bool(_SHIFTED_NORM.match(hf_name))


def quant_shape(packed_cols, scale_cols, in_dim, name):
    """(bits, group) of a quantized [out, in] matrix from its shapes; PeerError if they do
    not describe one."""
    if in_dim <= 0 or (packed_cols * 32) % in_dim:
        raise PeerError(f"tensor '{name}': {packed_cols} packed words do not hold {in_dim} codes of whole bits")
    bits = packed_cols * 32 // in_dim
    if bits not in (2, 3, 4, 5, 6, 8) or scale_cols <= 0 or in_dim % scale_cols:
        raise PeerError(f"tensor '{name}': {bits} bits, {scale_cols} groups over {in_dim} is not an MLX affine layout")
    return bits, in_dim // scale_cols


def expected_quant(qcfg, module, name):
    """(bits, group) that config.json's "quantization" declares for a module, or None when it
    says the module stays float."""
    if not isinstance(qcfg, dict):
        raise PeerError(f"tensor '{name}' is quantized but config.json has no \"quantization\"")
    if qcfg.get("mode", "affine") != "affine":
        raise PeerError(f"config.json: quantization mode \"{qcfg.get('mode')}\" (only affine is MLX's 4-bit format)")
    own = qcfg.get(module)
    if own is False:
        return None
    if isinstance(own, dict):
        return own.get("bits", qcfg.get("bits")), own.get("group_size", qcfg.get("group_size"))
    return qcfg.get("bits"), qcfg.get("group_size")


def unpack_codes_py(words, bits, n):
    """Reference decoder of one row: the little-endian bit stream of u32 words, code k at bits
    k*bits .. k*bits+bits-1. Slow and obviously right; the torch version is checked
    against it on real rows at load time."""
    stream = 0
    for i, w in enumerate(words):
        stream |= (w & 0xFFFFFFFF) << (32 * i)
    mask = (1 << bits) - 1
    return [(stream >> (k * bits)) & mask for k in range(n)]


# ---- safetensors (header parsing is pure; tensors need torch) ----

_ST_DTYPES = {"F32": 4, "F16": 2, "BF16": 2, "U32": 4, "I32": 4, "I64": 8, "U8": 1, "I8": 1, "F64": 8}


def st_header(path):
    """(header without __metadata__, data start) of a safetensors file, checked."""
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise PeerError(f"{path}: shorter than a safetensors header")
        (n,) = struct.unpack("<Q", head)
        size = os.fstat(f.fileno()).st_size
        if n > 100 << 20 or 8 + n > size:
            raise PeerError(f"{path}: header length {n} does not fit the file")
        try:
            hdr = json.loads(f.read(n), object_pairs_hook=_no_duplicates)
        except ValueError as e:
            raise PeerError(f"{path}: header is not JSON: {e}")
    hdr.pop("__metadata__", None)
    for name, e in hdr.items():
        if e.get("dtype") not in _ST_DTYPES:
            raise PeerError(f"{path}: tensor '{name}': dtype {e.get('dtype')} not handled")
        numel = 1
        for d in e["shape"]:
            numel *= d
        b, end = e["data_offsets"]
        if end - b != numel * _ST_DTYPES[e["dtype"]] or 8 + n + end > size:
            raise PeerError(f"{path}: tensor '{name}': data_offsets do not match its shape")
    return hdr, 8 + n


def st_files(model_dir):
    """The weight files of a model directory: the shards of the index, or model.safetensors."""
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index, "r", encoding="utf-8") as f:
            wm = json.load(f).get("weight_map", {})
        return sorted(set(wm.values()))
    if os.path.exists(os.path.join(model_dir, "model.safetensors")):
        return ["model.safetensors"]
    raise PeerError(f"{model_dir}: no model.safetensors and no model.safetensors.index.json")


# ---- comparison with jev's record ----

def compare_records(peer, jev):
    """Per (path, decisions): the max |p_peer - p_jev| over samples of equal repeat and their
    decisions, the argmax agreement, and for generate_json whether the generated ids (or
    texts) are equal. Returns (lines, max delta over scoring paths or None)."""
    def index(rec):
        return {(r["decisions"], r["path"]): {s["repeat"]: s for s in r["samples"]} for r in rec["runs"]}
    a, b = index(peer), index(jev)
    lines = ["path            decisions  max|p_peer-p_jev|  argmax agreement  compared"]
    worst = None
    for key in sorted(set(a) & set(b), key=lambda k: (PATHS.index(k[1]) if k[1] in PATHS else 99, k[0])):
        n, path = key
        delta, agree, cmp_n, gen_same, gen_n = 0.0, 0, 0, 0, 0
        for rep in sorted(set(a[key]) & set(b[key])):
            sa, sb = a[key][rep], b[key][rep]
            if path == "generate_json":
                ia = (sa.get("extra") or {}).get("generated_ids")
                ib = (sb.get("extra") or {}).get("generated_ids")
                if ia is not None and ib is not None:
                    gen_same += ia == ib
                    gen_n += 1
                elif sa.get("output") is not None and sb.get("output") is not None:
                    gen_same += sa["output"] == sb["output"]
                    gen_n += 1
                continue
            da, db = sa.get("decisions"), sb.get("decisions")
            if not isinstance(da, list) or not isinstance(db, list):
                continue
            for x, y in zip(da, db):
                if x.get("probs") is None or y.get("probs") is None:
                    continue
                if x["options"] != y["options"] or x["id"] != y["id"]:
                    raise PeerError(f"{path} {n} decisions: decision {x['id']} has options {x['options']} here and "
                                    f"{y['id']} {y['options']} in jev's record: not the same workload")
                delta = max(delta, max(abs(p - q) for p, q in zip(x["probs"], y["probs"])))
                agree += argmax_first(x["probs"]) == argmax_first(y["probs"])
                cmp_n += 1
        if path == "generate_json":
            what = f"{gen_same}/{gen_n} equal outputs" if gen_n else "no outputs to compare"
            lines.append(f"{path:<15} {n:>9}  {'-':>17}  {what:>16}")
            continue
        if cmp_n:
            worst = delta if worst is None else max(worst, delta)
            lines.append(f"{path:<15} {n:>9}  {delta:17.3e}  {agree / cmp_n:16.4f}  {cmp_n:>8}")
        else:
            lines.append(f"{path:<15} {n:>9}  {'no distributions':>17}")
    return lines, worst

