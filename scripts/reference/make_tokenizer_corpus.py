#!/usr/bin/env python3
"""Writes the tokenizer test inputs (plain Python, no dependencies):

  tests/data/tokenizer-corpus.json     cases for the stand-in tokenizer and its
                                       Qwen3.5-regex variant, plus that regex
  tests/data/tokenizers/*.json         tiny hand-made tokenizer.json files that
                                       exercise components Qwen's file does not
                                       use (unk, byte fallback, split behaviours,
                                       added-token flags, NFKC, ignore_merges)
  tests/data/tokenizer-features.json   the cases run on those tiny tokenizers

Expected ids are NOT written here: scripts/reference/tokenizer_goldens.py
computes them with Hugging Face `tokenizers`. A case is {"name", "text"} or,
for bytes that are not UTF-8, {"name", "bytes": [ints]}; the reference turns
bytes into str with bytes.decode("utf-8", errors="replace"), which is what
jev does (each maximal ill-formed subpart becomes U+FFFD).

Usage: python3 scripts/reference/make_tokenizer_corpus.py   (from anywhere)
"""
import json
import os
import unicodedata

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

# The Qwen3.5 pre-tokenizer regex (spec/qwen35.md section 9); the C test and
# the reference script both put it in place of the Split pattern.
QWEN35_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
                r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

CHAT_FRAME = ("<|im_start|>user\n<|vision_start|><|image_pad|><|image_pad|><|image_pad|><|vision_end|>"
              "Describe this image.<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n")


def corpus_cases():
    cases = []

    def add(group, text):
        cases.append({"name": "%s-%02d" % (group, sum(c["name"].startswith(group + "-") for c in cases)),
                      "text": text})

    def add_bytes(group, data):
        cases.append({"name": "%s-%02d" % (group, sum(c["name"].startswith(group + "-") for c in cases)),
                      "bytes": list(data)})

    # English prose
    for t in [
        "Hello world!",
        "The quick brown fox jumps over the lazy dog.",
        "It's a truth universally acknowledged, that a single man in possession of a good fortune, must be in want of a wife.",
        "I'm sure we'll see they've done what she'd said; you're right, isn't it?",
        "IT'S LOUD. WE'LL SHOUT. THEY'VE GONE. I'M HERE. SHE'D KNOW. YOU'RE OUT.",
        "It'S mIxEd: 'Re 'vE 'Ll 'D 'M 'T",
        "'s 't 're 've 'm 'll 'd",
        "rock'n'roll o'clock ma'am y'all",
        "He said \"hello\" and left -- quickly... (very quickly!)",
        "Mr. Smith paid $1,234.56 for 3 books on 2024-02-29 at 10:45 p.m.",
        "e-mail: first.last+tag@example.co.uk, web: https://www.example.com/path/to/page?q=1&r=two#frag",
        "Dear Sir or Madam,\n\nThank you for your letter.\n\nYours faithfully,\nJ. Doe",
        "  leading spaces and trailing spaces  ",
        "Multiple   spaces    between     words",
        "Tabs\tbetween\t\twords\t",
        "Question? Answer! Ellipsis… Dash — en dash – quote ‘single’ “double”",
        "A sentence without a final stop",
        "lowercase only here",
        "CamelCaseIdentifiersLikeThisOne and snake_case_names_like_this",
        "#hashtag @mention ~tilde ^caret *star* _under_ |pipe| \\backslash\\",
    ]:
        add("en", t)

    # code
    for t in [
        "def f(x):\n    return x * 2\n",
        "int main(void) {\n\tprintf(\"%d\\n\", 42);\n\treturn 0;\n}\n",
        "for (size_t i = 0; i < n; i++) { sum += a[i] * b[i]; }",
        "{\"key\": \"value\", \"list\": [1, 2, 3], \"nested\": {\"a\": null, \"b\": true}}",
        "<div class=\"box\"><p>Hello &amp; goodbye</p></div>",
        "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC;",
        "if x == 1:\r\n    y = 2\r\nelse:\r\n    y = 3\r\n",
        "    \n        deeply\n            indented\n",
        "#!/bin/bash\nset -euo pipefail\necho \"$HOME\" | grep -q root && exit 1\n",
        "x+=1;y-=2;z*=3;w/=4;a%=5;b<<=6;c>>=7;d&=8;e|=9;f^=10;",
        "const re = /^[a-z0-9_]+$/i; // comment\n/* block */",
        "lambda: [i**2 for i in range(10) if i % 2 == 0]",
        "   ",
        "\t\t\treturn;",
        "a = b ?? c; d = e?.f ?? g;",
    ]:
        add("code", t)

    # CJK, Arabic and other scripts
    for t in [
        "你好，世界！",
        "自然语言处理是人工智能的一个重要分支。",
        "我爱北京天安门，天安门上太阳升。",
        "日本語の文章です。ひらがなとカタカナと漢字が混ざっています。",
        "ｶﾀｶﾅ ﾊﾝｶｸ",
        "東京スカイツリーは634メートルです。",
        "안녕하세요, 세계! 한국어 문장입니다.",
        "\u1100\u1161\u11a8 \u1112\u1161\u11ab",  # conjoining jamo: NFC composes them
        "مرحبا بالعالم",
        "مَرْحَبًا بِكُمْ فِي الْعَالَمِ",  # harakat are \p{Mn}
        "שָׁלוֹם עוֹלָם",
        "नमस्ते दुनिया, यह हिंदी है।",
        "สวัสดีครับ ยินดีต้อนรับ",
        "Привет, мир! Съешь же ещё этих мягких французских булок.",
        "Γειά σου Κόσμε! Ελληνικά.",
        "Բարեւ աշխարհ",
        "გამარჯობა მსოფლიო",
        "ሰላም ልዑል",
        "ᏣᎳᎩ ᎦᏬᏂᎯᏍᏗ",
        "Tiếng Việt có dấu: Việt Nam, Hà Nội, Đà Nẵng",
        "Tie\u0302\u0301ng Vie\u0323\u0302t decomposed",
        "தமிழ் மொழி",
        "ខ្ញុំស្រលាញ់អ្នក",
        "བོད་ཡིག",
    ]:
        add("script", t)

    # emoji
    for t in [
        "I love it 😀😃😄",
        "👍🏽 thumbs up with skin tone",
        "👨‍👩‍👧‍👦 family ZWJ sequence",
        "🏳️‍🌈 rainbow flag and 🇺🇸🇯🇵 flags",
        "1️⃣ 2️⃣ #️⃣ keycaps",
        "❤️ ❤ heart with and without VS16",
        "🧑🏿‍🚀 astronaut",
        "emoji🙂inside🙃words",
        "👩🏻‍❤️‍💋‍👨🏼",
        "☺️✌️☝️",
    ]:
        add("emoji", t)

    # combining marks: the \p{M} classes of the Qwen3.5 regex change these
    for t in [
        "e\u0301cole",              # NFC composes to école
        "q\u0303 is not composable",
        "a\u0300\u0301\u0302 stacked",
        "Z\u0351\u0352\u0353a\u0354\u0355l\u0356\u0357g\u0358\u0359o\u035a",
        "n\u0303an\u0303o",
        "\u0301 starts with a mark",
        "1\u0301 mark after a digit",
        " \u0301 mark after a space",
        "!\u0301 mark after punctuation",
        "x\u20dd enclosing circle",
        "\u0915\u093c\u0916\u093c composition exclusions stay decomposed",
        "A\u030angstro\u0308m and \u212b sign",
        "\u2126 ohm sign",
        "ﬁ ligature and ﬀ",
        "word\u0308s with diaeresis",
        "o\u0328\u0304 ogonek macron",
        "क्षत्रिय",
        "ä\u0324 a-umlaut with diaeresis below",
        "abc\u0300",
        "\u0300\u0301\u0302",
    ]:
        add("mark", t)

    # digits and numbers
    for k in range(1, 13):
        add("digits", "1234567890"[:k] if k <= 10 else "9" * k)
    for t in [
        "3.14159265358979",
        "1,000,000 and 1.000.000",
        "２０２５年１２月",
        "١٢٣٤٥ arabic-indic",
        "x² + y³ = z⁴",
        "Ⅻ Roman and ½ fraction",
        "version 2.0.1-beta+build.123",
        "0x1F 0b1010 0o777 1e-10",
        "-42 +17 ±3",
        "phone: +1 (555) 123-4567",
    ]:
        add("num", t)

    # whitespace runs
    for t in [
        "a b", "a  b", "a   b", "a    b", "a\tb", "a\t\tb", "a\nb", "a\n\nb", "a\n\n\nb",
        "a\r\nb", "a\r\n\r\nb", "a \n b", "a\n \nb", "a \t\n b", "trailing\n", "trailing\n\n",
        "\nleading", "\n\n\n", " ", "  ", "\t", "\n", "\r", "\r\n",
        "a\u00a0b nbsp", "a\u3000b ideographic", "a\u2003b em space", "a\u180eb mongolian vowel separator",
        "a\u0085b next line", "a\u200bb zero width space", "a\u2028b line separator", "a\u2029b paragraph",
        "a\u000bb vertical tab", "a\u000cb form feed", "x" + " " * 40 + "y", " " * 64,
        "\n" * 20, "\t \t \t", "word \u00a0\u00a0 word", "end with nbsp\u00a0",
        # U+180E is not White_Space (Oniguruma) but PCRE2's \s matches it: these split differently
        "a \u180ex", "x \u180e\u180e y", " \u180e\u180e\u180eword", "\u180e \u180e",
    ]:
        add("ws", t)

    # added tokens inside text
    for t in [
        "<|im_start|>user\nHello<|im_end|>",
        "<|endoftext|>",
        "text<|endoftext|>more",
        "<|im_end|><|im_start|>",
        "  <|im_start|>  spaced  <|im_end|>  ",
        "<think>\nreasoning\n</think>\n\nanswer",
        "<tool_call>{\"name\": \"f\"}</tool_call>",
        "<|vision_start|><|image_pad|><|vision_end|>",
        "a<|box_start|>(1,2),(3,4)<|box_end|>b",
        "<|fim_prefix|>def f():<|fim_suffix|>\n<|fim_middle|>",
        CHAT_FRAME,
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n",
    ]:
        add("special", t)

    # look-alikes of added tokens
    for t in [
        "<|im_start|", "<|im_start |>", "<|IM_START|>", "< |im_start|>", "<|im_start|>>", "<<|im_end|>",
        "<|im_st<|im_end|>art|>", "<|fake_token|>", "<thinking>", "</think >", "＜|im_start|＞",
        "<|im_start|\u200b>", "<|endoftext", "|endoftext|>", "<|im_end|\n>", "<<think>>",
    ]:
        add("lookalike", t)

    # long words
    for t in [
        "supercalifragilisticexpialidocious",
        "pneumonoultramicroscopicsilicovolcanoconiosis",
        "Donaudampfschifffahrtsgesellschaftskapitänswitwe",
        "a" * 300,
        "ab" * 120,
        "0123456789abcdef" * 12,
        "https://example.com/" + "very-long-path-segment/" * 8,
        "SGVsbG8gV29ybGQhIFRoaXMgaXMgYmFzZTY0IGVuY29kZWQgdGV4dC4=",
        "!" * 100,
        "\u4e00" * 80,
    ]:
        add("long", t)

    # mixed scripts
    for t in [
        "Hello世界123мир",
        "Tokyo東京とうきょうTōkyō",
        "naïve café résumé coöperate",
        "𝐀𝐁𝐂 𝑥𝑦𝑧 mathematical letters",
        "ℌ𝔢𝔩𝔩𝔬 fraktur",
        "日本語English한국어Русский",
        "ABCdef123ＡＢＣｄｅｆ１２３",
        "Ελληνικά and English and עברית",
        "中文,English;日本語:한국어.",
        "price: ¥1,000 / €9.99 / £5 / ₹100",
    ]:
        add("mixed", t)

    # edge cases
    for t in [
        "", "a", "'", "''", "'s", "'S'T", "\u0000", "a\u0000b", "\u0001\u0002\u007f", "\ufeffBOM first",
        "'\u017f long s", "it'\u017f", "\ufffd replacement char", "\U0010fffd plane 16 private use",
        "\ue000 private use", "tab\tend\t",
    ]:
        add("edge", t)

    # bytes that are not UTF-8
    for data in [
        b"\xff", b"\x80", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf",
        b"ab\xffcd", b"abc\xe4\xbd", b"\xf0\x9f\x98x", b"\xff<|im_start|>\xfe", b"caf\xe9",
        b"\xe4\xbd\xa0\xe5\xa5", b"\xf8\x88\x80\x80\x80", b"\xc3\x28 \xa0\xa1 \xe2\x28\xa1",
        b"ok \xef\xbb\xbf\xef\xbf\xbe",
    ]:
        add_bytes("bytes", data)

    # every text must use characters assigned in Unicode 14 (PCRE2 10.42's tables)
    for c in cases:
        for ch in c.get("text", ""):
            if unicodedata.category(ch) == "Cn":
                raise SystemExit("case %s has an unassigned character U+%04X" % (c["name"], ord(ch)))
    return cases


# ---- tiny tokenizers ----

def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def bpe_model(alphabet, merges, extra=(), pair_form=True, **opts):
    """A BPE model whose vocab is the alphabet, each merge's result and extra
    entries (ids in that order)."""
    vocab = {}
    for s in list(alphabet) + ["".join(m) for m in merges] + list(extra):
        if s not in vocab:
            vocab[s] = len(vocab)
    model = {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
             "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
             "vocab": vocab, "merges": [list(m) for m in merges] if pair_form else [" ".join(m) for m in merges]}
    model.update(opts)
    return model


def added(content, special=False, normalized=None, lstrip=False, rstrip=False, single_word=False):
    return {"id": None, "content": content, "single_word": single_word, "lstrip": lstrip, "rstrip": rstrip,
            "normalized": (not special) if normalized is None else normalized, "special": special}


def assign_ids(vocab, tokens):
    """tokenizers' id rule for added tokens, in file order: an earlier added
    token's id, else the model's id of the content, else the next id after
    the vocabulary (its entry count) and the added ids so far."""
    seen = {}
    for t in tokens:
        tid = seen.get(t["content"], vocab.get(t["content"]))
        if tid is None:
            top = max(seen.values()) if seen else None
            tid = len(vocab) if top is None or (top < len(vocab) and len(vocab) > 0) else top + 1
        seen[t["content"]] = tid
        t["id"] = tid
    return list(tokens)


def tokenizer(model, added_tokens=(), normalizer=None, pre_tokenizer=None, decoder=None):
    added_tokens = assign_ids(model["vocab"], added_tokens)
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": list(added_tokens),
            "normalizer": normalizer, "pre_tokenizer": pre_tokenizer, "post_processor": None,
            "decoder": decoder, "model": model}


def byte_level_merges(words, b2u):
    """Merges that build each word of `words` (byte-level strings) left to right."""
    merges = []
    for w in words:
        s = "".join(b2u[b] for b in w.encode("utf-8"))
        cur = s[0]
        for ch in s[1:]:
            if (cur, ch) not in merges:
                merges.append((cur, ch))
            cur = cur + ch
    return merges


def suffixes(texts):
    """Every suffix of every text: merges that build them make BPE ids depend
    on exactly where the pre-tokenizer cut, so a wrong split shows in ids."""
    return [t[i:] for t in texts for i in range(len(t))]


BL_TEXTS = [
    "the quick fox", "hello world", "say hello, world", "shello hellos hello", "[CLS] the [CLS]x",
    "a   <mask> b", "a <sep>   b", "the ﬁx fix", "<e>and<e> and", "\u212b NFKC ① ｶ",
    " zebra zebra", "aaaaaaa", "\n\n\n\n\n", "     ", "sing singing", "<mask><mask>  <sep><sep>  ",
    "", "🙂 emoji", "helloworld hello_world hello-world", "it's 'S  x\t\ty",
]

SPLIT_TEXTS = [
    "CamelCaseWords", "lineAline\nline", "ab ab  ab", "ABC", "aCamel Case line", "x\ny\nz",
    "Case\u0301 e\u0301", "", "queue aeiou xyz", "ab\n\nab", "ab\ncd\nef", "one\ntwo\n", "Up\nDown",
    "a123b45 6", "12 34", "x 1 2  3", "Ab 12Cd",
]

INVERT_TEXTS = ["queue aeiou xyz", "strength", "banana split", "a e i", "rhythm", "aa bb aa", ""]


def feature_tokenizers():
    b2u = bytes_to_unicode()
    alphabet = [b2u[b] for b in range(256)]
    words = [" the", " quick", " fox", "the", "he", "ll", " hello", "hello", " world", "ing", " sing", "and",
             " and", "ab", "aa", "aaa", "fix", " fix", "\n\n", "  "]
    merges = byte_level_merges(words + suffixes(BL_TEXTS), b2u)
    # ignore_merges: " zebra" is a vocabulary entry that no merge builds
    zebra = "".join(b2u[b] for b in b" zebra")
    bl_model = bpe_model(alphabet, merges, extra=[zebra], ignore_merges=True)
    bl = tokenizer(
        bl_model,
        added_tokens=[
            added("[CLS]", special=True),
            added("<mask>", special=True, lstrip=True),
            added("<sep>", special=True, rstrip=True),
            added("hello", single_word=True, normalized=True),  # also a vocabulary entry: keeps its id
            added("ﬁx", normalized=True),          # matched as NFKC("ﬁx") = "fix"
            added("<e>", normalized=False),
            added("and", normalized=False),        # content already in the vocabulary
            added("[CLS]x", special=True),          # longest match wins over "[CLS]"
        ],
        normalizer={"type": "Sequence", "normalizers": [{"type": "NFKC"}]},
        pre_tokenizer={"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        decoder={"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True})

    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)] + ["-"]
    char_merges = [("t", "h"), ("th", "e"), ("a", "n"), ("an", "d"), ("i", "n"), ("in", "g"), ("e", "r")]
    unk_fuse = tokenizer(
        bpe_model(letters + ["[UNK]"], char_merges, pair_form=False, unk_token="[UNK]", fuse_unk=True),
        pre_tokenizer={"type": "Split", "pattern": {"String": " "}, "behavior": "Removed", "invert": False},
        decoder=None)
    # a merges.txt header line, which tokenizers skips without giving it a rank
    unk_fuse["model"]["merges"] = ["#version: 0.2"] + unk_fuse["model"]["merges"]

    unk_nofuse = tokenizer(
        bpe_model(letters + [str(d) for d in range(10)] + ["<unk>"], char_merges, unk_token="<unk>",
                  fuse_unk=False),
        normalizer={"type": "NFD"},
        pre_tokenizer={"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "\\d"}, "behavior": "MergedWithPrevious", "invert": False},
            {"type": "Split", "pattern": {"Regex": "-"}, "behavior": "MergedWithNext", "invert": False}]},
        decoder=None)

    # no <0xE6>: characters whose UTF-8 has that byte fall back to <unk>
    fb_alphabet = ["<0x%02X>" % b for b in range(256) if b != 0xE6] + list("abcdefghijklmnopqrstuvwxyz ")
    fallback = tokenizer(
        bpe_model(fb_alphabet, [("a", "b"), ("ab", "c"), ("x", "y")], byte_fallback=True, unk_token="<unk>",
                  extra=["<unk>"]),
        pre_tokenizer={"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "\\s+"}, "behavior": "Contiguous", "invert": False},
            {"type": "Split", "pattern": {"Regex": "[0-9]+"}, "behavior": "Isolated", "invert": True},
            {"type": "Split", "pattern": {"String": "q"}, "behavior": "Removed", "invert": False}]},
        decoder=None)

    splits = tokenizer(
        bpe_model(alphabet, byte_level_merges(["Camel", "Case", "line", "ab"] + suffixes(SPLIT_TEXTS), b2u)),
        normalizer={"type": "NFC"},
        pre_tokenizer={"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "(?=[A-Z])"}, "behavior": "Isolated", "invert": False},
            {"type": "Split", "pattern": {"Regex": "^[a-z]+|[a-z]+$"}, "behavior": "Isolated", "invert": False},
            {"type": "Split", "pattern": {"Regex": "[0-9]"}, "behavior": "Contiguous", "invert": False},
            {"type": "Split", "pattern": {"Regex": "\\s"}, "behavior": "MergedWithNext", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
        decoder={"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False})

    invert = tokenizer(
        bpe_model(alphabet, byte_level_merges(suffixes(INVERT_TEXTS), b2u)),
        pre_tokenizer={"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "[aeiou]"}, "behavior": "MergedWithPrevious", "invert": True},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
        decoder={"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False})

    return {
        "bytelevel-added.json": (bl, BL_TEXTS),
        "split-invert.json": (invert, INVERT_TEXTS),
        "chars-unk-fuse.json": (unk_fuse, [
            "the and thing", "THE AND", "mixed Case ABC def", "a1b2c3", "emoji 🙂🙃 end", "-- -",
            "  spaced  out  ", "",
        ]),
        "chars-unk-nofuse.json": (unk_nofuse, [
            "the-end and-more", "abc123def", "A1B2", "e\u0301 cafe\u0301", "x-y-z", "1-2-3", "UPPER lower",
        ]),
        "byte-fallback.json": (fallback, [
            "abc xy", "abcabc 123 xyz", "café", "ab\tc\n\nxy", "Zebra 99 bottles", "日本", "a  b   c",
            "quiz qq q", "日q本",
        ]),
        "split-behaviors.json": (splits, SPLIT_TEXTS),
    }


def main():
    cases = corpus_cases()
    corpus = {
        "about": "Tokenizer test corpus. Expected ids come from scripts/reference/tokenizer_goldens.py "
                 "(Hugging Face tokenizers); generated by scripts/reference/make_tokenizer_corpus.py.",
        "bytes_rule": "a case with \"bytes\" is decoded with bytes.decode('utf-8', errors='replace')",
        "variant_rule": "tokenizer-qwen35-regex: in the stand-in tokenizer.json, pre_tokenizer.pretokenizers[0] "
                        "(a Split) gets pattern {\"Regex\": qwen35_regex}; nothing else changes",
        "qwen35_regex": QWEN35_REGEX,
        "chat_frame": CHAT_FRAME,
        "cases": cases,
    }
    with open(os.path.join(ROOT, "tests/data/tokenizer-corpus.json"), "w", encoding="utf-8") as f:
        json.dump(corpus, f, ensure_ascii=False, indent=1)
        f.write("\n")
    feats = []
    for name, (tok, texts) in feature_tokenizers().items():
        path = "tests/data/tokenizers/" + name
        with open(os.path.join(ROOT, path), "w", encoding="utf-8") as f:
            json.dump(tok, f, ensure_ascii=False, indent=1)
            f.write("\n")
        feats.append({"file": path, "cases": [{"name": "%s-%02d" % (name[:-5], i), "text": t}
                                              for i, t in enumerate(texts)]})
    with open(os.path.join(ROOT, "tests/data/tokenizer-features.json"), "w", encoding="utf-8") as f:
        json.dump({"about": "cases for the tiny tokenizers in tests/data/tokenizers/", "tokenizers": feats}, f,
                  ensure_ascii=False, indent=1)
        f.write("\n")
    print("%d corpus cases, %d tiny tokenizers" % (len(cases), len(feats)))


if __name__ == "__main__":
    main()
