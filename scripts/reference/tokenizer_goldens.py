#!/usr/bin/env python3
"""Tokenizer goldens from Hugging Face `tokenizers` (the reference jev must equal).

Usage (from the repository root, on a machine with the `tokenizers` package):

    python3 scripts/reference/tokenizer_goldens.py .cache/tokenizer-qwen3/tokenizer.json tests/golden

Reads (all committed in the repository, paths relative to its root):
  TOKENIZER_JSON                       the stand-in tokenizer (scripts/setup.sh installs it)
  tests/data/tokenizer-corpus.json     the cases and the Qwen3.5 regex
  tests/data/tokenizer-features.json   cases for the tiny tokenizers in tests/data/tokenizers/
Writes into OUTDIR:
  tokenizer-qwen3.json          the stand-in tokenizer as is
  tokenizer-qwen35-regex.json   the same file with pre_tokenizer.pretokenizers[0] (a Split) given
                                {"Regex": corpus["qwen35_regex"]}: nothing else changes
  tokenizer-features.json       the tiny tokenizers
Each case records:
  ids           encode(text, add_special_tokens=False).ids
  plain_ids     the same with the added_tokens list emptied (jev's JEV_TOK_NO_ADDED: user text)
  decoded       decode(ids, skip_special_tokens=False)
  decoded_skip  decode(ids, skip_special_tokens=True)
A case given as "bytes" is turned into str with bytes(b).decode("utf-8", errors="replace"),
the rule jev applies to ill-formed UTF-8.
"""
import hashlib
import json
import os
import sys

import tokenizers
from tokenizers import Tokenizer


def case_text(case):
    if "bytes" in case:
        return bytes(case["bytes"]).decode("utf-8", errors="replace")
    return case["text"]


def qwen35_variant(tok_json, regex):
    """The derivation the C test repeats: only the first pre-tokenizer's pattern changes."""
    obj = json.loads(tok_json)
    first = obj["pre_tokenizer"]["pretokenizers"][0]
    assert first["type"] == "Split", "pre_tokenizer.pretokenizers[0] is not a Split"
    first["pattern"] = {"Regex": regex}
    return json.dumps(obj, ensure_ascii=False)


def without_added(tok_json):
    obj = json.loads(tok_json)
    obj["added_tokens"] = []
    return json.dumps(obj, ensure_ascii=False)


def run_cases(tok_json, cases):
    tok = Tokenizer.from_str(tok_json)
    plain = Tokenizer.from_str(without_added(tok_json))
    out = []
    for case in cases:
        text = case_text(case)
        ids = tok.encode(text, add_special_tokens=False).ids
        out.append({
            "name": case["name"],
            "ids": ids,
            "plain_ids": plain.encode(text, add_special_tokens=False).ids,
            "decoded": tok.decode(ids, skip_special_tokens=False),
            "decoded_skip": tok.decode(ids, skip_special_tokens=True),
        })
    return out


def sha256_text(s):
    return hashlib.sha256(s.encode("utf-8")).hexdigest()


def write(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print("wrote", path)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    tok_path, outdir = sys.argv[1], sys.argv[2]
    os.makedirs(outdir, exist_ok=True)
    command = "python3 scripts/reference/tokenizer_goldens.py %s %s" % (tok_path, outdir)
    with open(tok_path, encoding="utf-8") as f:
        base = f.read()
    with open("tests/data/tokenizer-corpus.json", encoding="utf-8") as f:
        corpus_text = f.read()
    corpus = json.loads(corpus_text)
    meta = {
        "tokenizers_version": tokenizers.__version__,
        "command": command,
        "tokenizer_sha256": sha256_text(base),
        "corpus_sha256": sha256_text(corpus_text),
    }
    variants = [
        ("tokenizer-qwen3.json", "qwen3", base),
        ("tokenizer-qwen35-regex.json", "qwen35-regex", qwen35_variant(base, corpus["qwen35_regex"])),
    ]
    for fname, variant, tok_json in variants:
        write(os.path.join(outdir, fname), dict(meta, variant=variant, cases=run_cases(tok_json, corpus["cases"])))

    with open("tests/data/tokenizer-features.json", encoding="utf-8") as f:
        feats = json.load(f)
    results = []
    for entry in feats["tokenizers"]:
        with open(entry["file"], encoding="utf-8") as f:
            tok_json = f.read()
        results.append({"file": entry["file"], "tokenizer_sha256": sha256_text(tok_json),
                        "cases": run_cases(tok_json, entry["cases"])})
    write(os.path.join(outdir, "tokenizer-features.json"),
          {"tokenizers_version": tokenizers.__version__, "command": command, "tokenizers": results})


if __name__ == "__main__":
    main()
