#!/usr/bin/env python3
"""State-rendering goldens: CPython's json.dumps(indent=2, ensure_ascii=False),
the rendering jev_prompt_render_state reproduces (a JSON string state is its
value as is).

Usage (from the repository root; standard library only):
    python3 scripts/reference/state_render_goldens.py tests/data/state-cases.json tests/golden/state-render.json

Each input case is the JSON text of a state; json.loads reads it (object key
order kept, the last of repeated keys wins at the first one's place) and the
golden records the rendered text.
"""
import json
import platform
import sys


def render(state):
    if isinstance(state, str):
        return state
    return json.dumps(state, indent=2, ensure_ascii=False)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, dst = sys.argv[1], sys.argv[2]
    with open(src, encoding="utf-8") as f:
        cases = json.load(f)["cases"]
    out = [{"name": c["name"], "rendered": render(json.loads(c["json"]))} for c in cases]
    with open(dst, "w", encoding="utf-8") as f:
        json.dump({"python_version": platform.python_version(),
                   "command": "python3 scripts/reference/state_render_goldens.py %s %s" % (src, dst),
                   "cases": out}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print("wrote", dst)


if __name__ == "__main__":
    main()
