"""
bench/peers/fla_kernels.py - the transformers peer on flash-linear-attention's kernels (`--kernels fla`).

What it is: the parts of `transformers.py --kernels fla` that concern fla-org/flash-linear-attention
(the `fla` package, pure Python + Triton): putting the copy packed by scripts/device/fla-carry.sh
on sys.path before transformers is imported, importing it the way transformers will (so that a
failure is an error here, not transformers' silent fallback to its torch delta rule), checking
after the model is built that every Gated DeltaNet layer calls fla's chunk and recurrent delta
rule, counting during the warm-up which delta-rule functions really ran, and the facts that the
record carries (docs/bench-peers.md).

How transformers 5.17 binds fla (integrations/hub_kernels.py, models/qwen3_5/modeling_qwen3_5.py):
the module-level `torch_chunk_gated_delta_rule` and `torch_recurrent_gated_delta_rule` are wrapped
by `use_kernel_func_from_hub_with_fallback(name, "fla")`, which imports
`fla.ops.gated_delta_rule` when the modeling module is first imported and captures its function in
the wrapper's closure (`implementation`); any exception there silently leaves the torch body in
place. The gated RMSNorm stays transformers' own module (a hub-kernel hook that is inert without
the `kernels` package), and the causal convolution falls back to torch's conv1d unless the
causal-conv1d CUDA extension is installed (it is not: it needs compiling). Older transformers 5
releases stored fla's functions on each layer (`layer.chunk_gated_delta_rule`); both are read.

What it is not: a kernel of ours, or a change of transformers. Nothing is patched: the warm-up's
call counting uses sys.setprofile, which observes calls without replacing any function.

Constraints: the stdlib part (activate, check_args, the `check-carry` entry) runs without torch,
so the self-test exercises it here; everything that needs torch receives it as an argument.
"""

import importlib
import importlib.metadata
import importlib.util
import inspect
import json
import os
import sys

sys.dont_write_bytecode = True  # as transformers.py: no __pycache__ beside the sources
from jevbench import PeerError  # noqa: E402

PEER_NAME = "transformers + flash-linear-attention"  # environment.peer.name: the report's label
DISTRIBUTION = "flash-linear-attention"
REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
CARRY_DEFAULT = os.path.join(REPO, ".carry-fla")


# ---- the carry (standard library) ----

def check_args(kernels, device, dtype, probe):
    """None, or why these options do not go together (parse_args reports it)."""
    if kernels != "fla":
        return "--probe-kernels needs --kernels fla" if probe else None
    if device != "cuda":
        return "--kernels fla: fla's kernels are Triton kernels for the GPU (--device cuda)"
    if dtype != "bfloat16" and not probe:
        # an f32 record promises f32 products (TF32 off); fla's Triton dots choose their own precision
        return "--kernels fla: runs in bf16 only (--dtype bfloat16): fla's Triton products take their own precision"
    return None


def read_source(carry):
    """DEST/SOURCE of fla-carry.sh as {key: value}."""
    path = os.path.join(carry, "SOURCE")
    try:
        with open(path, "r", encoding="utf-8") as f:
            pairs = [line.rstrip("\n").split(" ", 1) for line in f if line.strip()]
    except OSError as e:
        raise PeerError(f"{path}: {e.strerror}: pack fla with scripts/device/fla-carry.sh and carry .carry-fla")
    src = {p[0]: (p[1] if len(p) > 1 else "") for p in pairs}
    for k in ("commit", "version"):
        if not src.get(k):
            raise PeerError(f"{path}: no '{k}' line (not written by scripts/device/fla-carry.sh?)")
    return src


def activate(carry):
    """Puts the carried fla first on sys.path and its einops last (an installed einops wins), before
    transformers is imported: transformers maps import names to distributions once, when it is
    imported, and binds fla when the Qwen3.5 modeling module is. Returns the carry's facts."""
    carry = os.path.abspath(carry)
    src = read_source(carry)
    site, deps = os.path.join(carry, "site"), os.path.join(carry, "deps")
    if not os.path.isfile(os.path.join(site, "fla", "__init__.py")):
        raise PeerError(f"{site}: no fla package (pack it with scripts/device/fla-carry.sh)")
    early = sorted(m for m in sys.modules if m.split(".")[0] in ("fla", "transformers"))
    if early:
        raise PeerError(f"{early[0]} was imported before the fla carry was put on sys.path")
    sys.path.insert(0, site)
    if os.path.isdir(deps):
        sys.path.append(deps)
    importlib.invalidate_caches()
    spec = importlib.util.find_spec("fla")
    if spec is None or not os.path.abspath(spec.origin or "").startswith(site + os.sep):
        raise PeerError(f"import fla resolves to {spec and spec.origin}, not the carry in {site}")
    try:  # the distribution transformers looks up; the first on sys.path is the carry's
        version = importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise PeerError(f"{site}: no {DISTRIBUTION} dist-info (pack it with scripts/device/fla-carry.sh)")
    if version != src["version"]:
        raise PeerError(f"{site}: the dist-info says {DISTRIBUTION} {version}, SOURCE says {src['version']}")
    return {"carry": carry, "version": version, "commit": src["commit"], "tag": src.get("tag"),
            "date": src.get("date"), "einops_package": src.get("einops")}


# ---- import and binding (torch) ----

def preflight(torch):
    """Imports fla as transformers will and checks that Triton reached the GPU; returns the
    delta-rule functions and the code objects to count. Call after activate, before the model."""
    try:
        gdr = importlib.import_module("fla.ops.gated_delta_rule")
        futils = importlib.import_module("fla.utils")
        import triton
    except Exception as e:  # noqa: BLE001 - transformers would swallow this and run its torch path
        raise PeerError(f"importing the carried fla failed ({type(e).__name__}: {e}); transformers would "
                        "silently use its torch delta rule")
    if getattr(futils, "device", None) != "cuda":
        raise PeerError(f"fla's device is {getattr(futils, 'device', None)!r}, not 'cuda': Triton could not start its "
                        "CUDA driver (it compiles a small C module at first use: gcc and the Python headers, "
                        "python3-dev, must be there)")
    fns = {"chunk": gdr.chunk_gated_delta_rule, "recurrent": gdr.fused_recurrent_gated_delta_rule}
    codes = {"fla.chunk_gated_delta_rule": inspect.unwrap(fns["chunk"]).__code__,
             "fla.fused_recurrent_gated_delta_rule": inspect.unwrap(fns["recurrent"]).__code__}
    # the Triton forward itself (fla's dispatcher could route to another backend first)
    for mod, name in (("chunk", "chunk_gated_delta_rule_fwd"), ("fused_recurrent", "fused_recurrent_gated_delta_rule_fwd")):
        f = getattr(sys.modules.get(f"fla.ops.gated_delta_rule.{mod}"), name, None)
        if f is not None:
            codes[f"fla.{name}"] = inspect.unwrap(f).__code__
    einops = sys.modules.get("einops")  # fla imports it; the carry's, unless one was installed
    return {"fns": fns, "codes": codes, "triton": triton.__version__,
            "einops": einops and f"{getattr(einops, '__version__', '?')} ({os.path.dirname(einops.__file__)})"}


def _cells(fn):
    code = getattr(fn, "__code__", None)
    if code is None or not fn.__closure__:
        return {}
    out = {}
    for name, cell in zip(code.co_freevars, fn.__closure__):
        try:
            out[name] = cell.cell_contents
        except ValueError:  # an empty cell
            pass
    return out


def bound_impl(fn):
    """What a transformers delta-rule name calls: the implementation captured by the hub-kernel
    wrapper (transformers >= 5.15; possibly under one more wrapper), else the function itself."""
    f = fn
    for _ in range(3):
        cells = _cells(f)
        if "implementation" in cells:
            return cells["implementation"]
        f = getattr(f, "__wrapped__", None)
        if f is None:
            break
    return fn


def qualname(fn):
    if fn is None:
        return None
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', type(fn).__name__)}"


def check_binding(model, pre):
    """Every Gated DeltaNet layer's chunk and recurrent delta rule must be fla's; PeerError otherwise.
    Returns the facts of the record (environment.extra.kernels) and the torch bodies to count."""
    layers = [m for m in model.modules() if type(m).__name__.endswith("GatedDeltaNet")]
    if not layers:
        raise PeerError("the model has no GatedDeltaNet layer: nothing for fla to run")
    modeling = sys.modules[type(layers[0]).__module__]
    names = {"chunk": ("chunk_gated_delta_rule", "torch_chunk_gated_delta_rule"),
             "recurrent": ("recurrent_gated_delta_rule", "torch_recurrent_gated_delta_rule")}
    bound, torch_codes = {}, {}
    for role, (layer_attr, module_attr) in names.items():
        wrapper = getattr(modeling, module_attr, None)
        if wrapper is not None:  # transformers' own torch body, to count (it must never run)
            torch_codes[f"transformers.{module_attr}"] = inspect.unwrap(wrapper).__code__
        for i, layer in enumerate(layers):
            impl = getattr(layer, layer_attr, None)
            if impl is None:
                if wrapper is None:
                    raise PeerError(f"{modeling.__name__}: neither layer.{layer_attr} nor {module_attr}: this "
                                    "transformers binds the delta rule in a way the peer does not know")
                impl = bound_impl(wrapper)
            if impl is not pre["fns"][role]:
                raise PeerError(f"GatedDeltaNet layer {i}: the {role} delta rule is {qualname(impl)}, not fla's "
                                f"{qualname(pre['fns'][role])}: transformers did not bind flash-linear-attention")
        bound[role] = qualname(pre["fns"][role])
    conv = getattr(layers[0], "causal_conv1d_fn", None)
    if conv is None and getattr(modeling, "causal_conv1d_fn", None) is not None:
        conv = bound_impl(modeling.causal_conv1d_fn)
    facts = {"delta_rule_chunk": bound["chunk"], "delta_rule_recurrent": bound["recurrent"],
             "gated_rmsnorm": qualname(type(layers[0].norm)),
             "causal_conv1d": qualname(conv) or "torch conv1d (no causal-conv1d)",
             "deltanet_layers": len(layers), "triton": pre["triton"], "einops": pre["einops"]}
    return facts, torch_codes


class CallCounter:
    """Counts calls of given code objects while active (sys.setprofile: observed, not patched;
    it slows every Python call, so it is on during the warm-up only)."""

    def __init__(self, codes):
        self.names = {c: n for n, c in codes.items()}
        self.counts = dict.fromkeys(codes, 0)
        self._prev = None

    def _hook(self, frame, event, arg):
        if event == "call":
            n = self.names.get(frame.f_code)
            if n is not None:
                self.counts[n] += 1

    def __enter__(self):
        self._prev = sys.getprofile()
        sys.setprofile(self._hook)
        return self

    def __exit__(self, *exc):
        sys.setprofile(self._prev)
        return False


def check_calls(counts):
    """After the warm-up: fla's chunk rule ran (every prefill goes through it) and transformers'
    torch delta rule never did."""
    if not counts.get("fla.chunk_gated_delta_rule"):
        raise PeerError(f"the warm-up never called fla's chunk_gated_delta_rule ({counts})")
    ran = {n: c for n, c in counts.items() if n.startswith("transformers.") and c}
    if ran:
        raise PeerError(f"the warm-up called transformers' torch delta rule: {ran}")


def probe(torch, pre):
    """fla's chunk and recurrent delta rule against transformers' torch bodies on random bf16 inputs
    of the 0.8B model's DeltaNet shapes (16 heads of 128), with a carried-in state: times the first
    call (Triton compiles and autotunes) and the next, and the relative error of outputs and states.
    Returns 0 when both agree within 5e-2 (bf16 inputs; a wrong binding or kernel is far off)."""
    import transformers.models.qwen3_5.modeling_qwen3_5 as m
    import time
    ref = {"chunk": inspect.unwrap(m.torch_chunk_gated_delta_rule),
           "recurrent": inspect.unwrap(m.torch_recurrent_gated_delta_rule)}
    gen = torch.Generator(device="cuda").manual_seed(0)
    worst = 0.0
    for role, T in (("chunk", 200), ("recurrent", 1)):
        B, H, K = 2, 16, 128
        q, k, v = (torch.randn(B, T, H, K, device="cuda", generator=gen).to(torch.bfloat16) for _ in range(3))
        g = -torch.nn.functional.softplus(torch.randn(B, T, H, device="cuda", generator=gen))
        beta = torch.rand(B, T, H, device="cuda", generator=gen).to(torch.bfloat16)
        h0 = 0.1 * torch.randn(B, H, K, K, device="cuda", generator=gen)
        kw = dict(g=g, beta=beta, initial_state=h0, output_final_state=True, use_qk_l2norm_in_kernel=True)
        times = []
        for _ in range(2):
            torch.cuda.synchronize()
            t = time.perf_counter()
            o, h = pre["fns"][role](q, k, v, **kw)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t)
        ro, rh = ref[role](q, k, v, **kw)

        def rel(a, b):
            a, b = a.float(), b.float()
            return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()
        eo, eh = rel(o, ro), rel(h, rh)
        worst = max(worst, eo, eh)
        print(f"probe {role:9s} T={T:3d}: first call {times[0]:7.2f} s, next {times[1] * 1000:8.2f} ms, "
              f"rel. error vs transformers' torch: output {eo:.2e}, state {eh:.2e}")
    print(f"probe: {'ok' if worst < 5e-2 else 'FAILED'} (worst {worst:.2e}, bound 5e-2); triton {pre['triton']}")
    return 0 if worst < 5e-2 else 1


# ---- check-carry: what the self-test and tests/test-peer.c run (no torch) ----

def main(argv):
    """`fla_kernels.py check-carry DIR`: activate DIR and print, as JSON, what Python then resolves."""
    if len(argv) != 2 or argv[0] != "check-carry":
        print("usage: fla_kernels.py check-carry DIR", file=sys.stderr)
        return 2
    try:
        facts = activate(argv[1])
    except PeerError as e:
        print(f"fla carry: {e}", file=sys.stderr)
        return 1
    einops = importlib.util.find_spec("einops")
    facts.update(fla_origin=importlib.util.find_spec("fla").origin,
                 distributions=importlib.metadata.packages_distributions().get("fla"),
                 einops_origin=einops.origin if einops else None,
                 site_index=sys.path.index(os.path.join(facts["carry"], "site")),
                 deps_last=sys.path[-1] == os.path.join(facts["carry"], "deps"))
    print(json.dumps(facts, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
