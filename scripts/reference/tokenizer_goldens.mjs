// tokenizer_goldens.mjs - the Node twin of tokenizer_goldens.py: the same
// goldens, computed by Hugging Face tokenizers' official Node binding (npm
// package `tokenizers`, the same Rust library as the Python package).
//
// Usage (from the repository root; the package is installed outside the tree):
//   npm install --prefix /tmp/hf tokenizers@0.23.2
//   NODE_PATH=/tmp/hf/node_modules node scripts/reference/tokenizer_goldens.mjs \
//       .cache/tokenizer-qwen3/tokenizer.json tests/golden
//
// Output files, fields and the variant derivation are those of the Python
// script (see its docstring). A "bytes" case is turned into a string with
// TextDecoder("utf-8"), whose replacement rule (one U+FFFD per maximal
// ill-formed subpart, WHATWG Encoding) is Python's errors="replace" rule.
import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";

const require = createRequire(import.meta.url);
const { Tokenizer } = require("tokenizers");
const version = require("tokenizers/package.json").version;

function caseText(c) {
  if (c.bytes !== undefined) return new TextDecoder("utf-8").decode(Uint8Array.from(c.bytes));
  return c.text;
}

function qwen35Variant(tokJson, regex) {
  const obj = JSON.parse(tokJson);
  const first = obj.pre_tokenizer.pretokenizers[0];
  if (first.type !== "Split") throw new Error("pre_tokenizer.pretokenizers[0] is not a Split");
  first.pattern = { Regex: regex };
  return JSON.stringify(obj);
}

function withoutAdded(tokJson) {
  const obj = JSON.parse(tokJson);
  obj.added_tokens = [];
  return JSON.stringify(obj);
}

async function runCases(tokJson, cases) {
  const tok = Tokenizer.fromString(tokJson);
  const plain = Tokenizer.fromString(withoutAdded(tokJson));
  const out = [];
  for (const c of cases) {
    const text = caseText(c);
    const ids = (await tok.encode(text, null, { addSpecialTokens: false })).getIds();
    const plainIds = (await plain.encode(text, null, { addSpecialTokens: false })).getIds();
    out.push({
      name: c.name,
      ids: Array.from(ids),
      plain_ids: Array.from(plainIds),
      decoded: await tok.decode(Array.from(ids), false),
      decoded_skip: await tok.decode(Array.from(ids), true),
    });
  }
  return out;
}

const sha256 = (s) => createHash("sha256").update(Buffer.from(s, "utf8")).digest("hex");

function write(path, obj) {
  writeFileSync(path, JSON.stringify(obj, null, 1) + "\n");
  console.log("wrote", path);
}

async function main() {
  const [tokPath, outdir] = process.argv.slice(2);
  if (!tokPath || !outdir) {
    console.error("usage: node scripts/reference/tokenizer_goldens.mjs TOKENIZER_JSON OUTDIR");
    process.exit(2);
  }
  mkdirSync(outdir, { recursive: true });
  const command = `NODE_PATH=/tmp/hf/node_modules node scripts/reference/tokenizer_goldens.mjs ${tokPath} ${outdir}`;
  const base = readFileSync(tokPath, "utf8");
  const corpusText = readFileSync("tests/data/tokenizer-corpus.json", "utf8");
  const corpus = JSON.parse(corpusText);
  const meta = {
    tokenizers_version: version + " (node binding)",
    command,
    tokenizer_sha256: sha256(base),
    corpus_sha256: sha256(corpusText),
  };
  const variants = [
    ["tokenizer-qwen3.json", "qwen3", base],
    ["tokenizer-qwen35-regex.json", "qwen35-regex", qwen35Variant(base, corpus.qwen35_regex)],
  ];
  for (const [fname, variant, tokJson] of variants)
    write(join(outdir, fname), { ...meta, variant, cases: await runCases(tokJson, corpus.cases) });

  const feats = JSON.parse(readFileSync("tests/data/tokenizer-features.json", "utf8"));
  const results = [];
  for (const entry of feats.tokenizers) {
    const tokJson = readFileSync(entry.file, "utf8");
    results.push({ file: entry.file, tokenizer_sha256: sha256(tokJson), cases: await runCases(tokJson, entry.cases) });
  }
  write(join(outdir, "tokenizer-features.json"), { tokenizers_version: meta.tokenizers_version, command, tokenizers: results });
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
