#!/usr/bin/env python3
"""State-rendering goldens: how a decision's JSON `state` reaches the model.

The reference is CPython's json.dumps(state, indent=2, ensure_ascii=False), the
rendering every Python peer uses; jev's io/jsonw.h writer reproduces it byte for
byte (src/decide/prompt-render.c shows the state through it). Per case the
golden records:

    dumps   json.dumps(state, indent=2, ensure_ascii=False), for every case
            Python can write as UTF-8 (a lone surrogate it cannot)
    shown   the state text inside jev's prompt, for the cases jev accepts: a
            string state is its value, anything else the dumps text; then
            jev's documented rules for caller text (docs/decide.md section 5):
            trimmed of " \\t\\r\\n" at both ends, "<|" -> "<\u00a6", "|>" -> "\u00a6>"

Usage (from the repository root; standard library only):
    python3 scripts/reference/state_render_goldens.py tests/data/state-cases.json tests/golden/state-render.json

Each input case is the JSON text of a state, read by json.loads (object key
order kept, the last of repeated keys wins at the first one's place; integers
of any size; 1E400 is inf). A case marked `refused` is one jev refuses (the C
test checks status and message); it gets no `shown`.
"""
import json
import platform
import sys


def dumps(state):
    return json.dumps(state, indent=2, ensure_ascii=False)


def shown(state):
    text = state if isinstance(state, str) else dumps(state)
    text = text.strip(" \t\r\n")
    # left to right, "<|" first: the same pairs the C scan replaces
    return text.replace("<|", "<\u00a6").replace("|>", "\u00a6>")


def utf8_or_none(text):
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return None


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, dst = sys.argv[1], sys.argv[2]
    with open(src, encoding="utf-8") as f:
        cases = json.load(f)["cases"]
    out = []
    for c in cases:
        state = json.loads(c["json"])
        g = {"name": c["name"]}
        d = utf8_or_none(dumps(state))
        if d is not None:
            g["dumps"] = d
        if "refused" not in c:
            g["shown"] = shown(state)
        out.append(g)
    with open(dst, "w", encoding="utf-8") as f:
        json.dump({"python_version": platform.python_version(),
                   "command": "python3 scripts/reference/state_render_goldens.py %s %s" % (src, dst),
                   "cases": out}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print("wrote", dst)


if __name__ == "__main__":
    main()
