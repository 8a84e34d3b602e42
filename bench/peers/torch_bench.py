"""The kiln bench workloads under PyTorch: eager and torch.compile (Inductor's C++ backend) in
kiln's modes, with the same shapes, thread count, warm-up and interleaved repetitions as
`kiln bench`, and the same JSON schema (kiln.bench/1, runner "torch"). Run by bench/peers/run.

    python torch_bench.py [WORKLOAD ...] [--modes M,M,...] [--reps N] [--warmup N]
                          [--threads N] [--json FILE] [--chain N,N,...] [--device D]

--device cuda runs the workloads on the GPU as `kiln bench --device cuda` does: every timed call
ends with torch.cuda.synchronize(), there is no oneDNN-alone row, `compile` is not run, and the
bandwidth reference is a device-to-device copy of 256 MiB measured in the same run.

--modes takes kiln's names (default: all three):
  default          torch.compile(mode="default"), row mode "torch.compile" (bench/compare's peer)
  reduce_overhead  torch.compile(mode="reduce-overhead"), row mode "reduce_overhead"; CUDA graphs
                   are CUDA-only, so on CPU Inductor skips them (the row's cudagraph_skips)
  max_autotune     torch.compile(mode="max-autotune"), row mode "max_autotune", with Inductor's
                   GEMM backends set to CPP,ATEN (its C++ GEMM template against the library
                   call) and freezing on: the template only takes constant weights
Each mode compiles after torch._dynamo.reset() (no graph shared between modes), so the modes
are timed in blocks: each block interleaves eager (and onednn-alone) with one mode, and the
eager row pools all blocks' samples. A mode that fails gets a row in "failed", with "error".
"""

import argparse
import json
import logging
import os
import re
import statistics
import sys
import time
import warnings
from unittest import mock

import torch
import torch._dynamo
import torch.nn as nn
import torch.nn.functional as F


# ---- the models, as kiln's (models/gpt.cpp, models/cnn.cpp, models/mlp.cpp) ----


class Attention(nn.Module):
    def __init__(self, embed, heads):
        super().__init__()
        self.heads = heads
        self.embed = embed
        self.c_attn = nn.Linear(embed, 3 * embed)
        self.c_proj = nn.Linear(embed, embed)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(self.embed, dim=2)

        def heads(y):
            return y.reshape(b, t, self.heads, c // self.heads).transpose(1, 2)

        y = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().reshape(b, t, c))


class Mlp(nn.Module):
    def __init__(self, embed):
        super().__init__()
        self.c_fc = nn.Linear(embed, 4 * embed)
        self.c_proj = nn.Linear(4 * embed, embed)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, embed, heads):
        super().__init__()
        self.ln_1 = nn.LayerNorm(embed)
        self.attn = Attention(embed, heads)
        self.ln_2 = nn.LayerNorm(embed)
        self.mlp = Mlp(embed)

    def forward(self, x):
        h = x + self.attn(self.ln_1(x))
        return h + self.mlp(self.ln_2(h))


class Gpt(nn.Module):
    def __init__(self, vocab=4096, block=256, layers=4, heads=12, embed=768):
        super().__init__()
        self.wte = nn.Embedding(vocab, embed)
        self.wpe = nn.Embedding(block, embed)
        self.h = nn.ModuleList([Block(embed, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(embed)

    def forward(self, idx):
        pos = torch.arange(idx.shape[1], dtype=torch.long)
        x = self.wte(idx) + self.wpe(pos)
        for blk in self.h:
            x = blk(x)
        return F.linear(self.ln_f(x), self.wte.weight)


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, 0, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        identity = self.downsample(x) if self.downsample is not None else x
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + identity)


class ResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.layer1 = nn.Sequential(BasicBlock(16, 16, 1))
        self.layer2 = nn.Sequential(BasicBlock(16, 32, 2))
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        h = F.relu(self.bn1(self.conv1(x)))
        h = self.layer2(self.layer1(h))
        h = F.max_pool2d(h, 2)
        h = F.adaptive_avg_pool2d(h, 1)
        return self.fc(h.flatten(1))


class ZooMlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 256)
        self.norm = nn.LayerNorm(256)
        self.fc2 = nn.Linear(256, 128)
        self.fc3 = nn.Linear(128, 10)

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.relu(self.norm(self.fc1(x))))))


# ---- the workloads (tools/bench.cpp) ----


def workloads():
    n = 16 << 20
    w = {}

    def pw_chain():
        x, y = torch.randn(n), torch.randn(n)
        return (lambda a, b: torch.relu(a * 2 + b).sigmoid() * b), (x, y), None

    def softmax():
        return (lambda a: torch.softmax(a, -1)), (torch.randn(4096, 4096),), None

    def layernorm():
        x, g, b = torch.randn(4096, 4096), torch.randn(4096), torch.randn(4096)
        return (lambda a, w_, b_: F.layer_norm(a, (4096,), w_, b_)), (x, g, b), None

    def mlp_gelu():
        m = nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024)).eval()
        x = torch.randn(512, 1024)
        w1, w2 = m[0].weight, m[2].weight
        return m, (x,), (lambda: (x @ w1.t()) @ w2.t())

    def attention():
        q, k, v = (torch.randn(4, 12, 256, 64) for _ in range(3))
        return ((lambda q_, k_, v_: F.scaled_dot_product_attention(q_, k_, v_, is_causal=True)),
                (q, k, v), (lambda: (q @ k.transpose(-2, -1)) @ v))

    def gpt_block():
        return Block(768, 12).eval(), (torch.randn(4, 256, 768),), None

    def gpt():
        return Gpt().eval(), (torch.randint(0, 4096, (4, 256)),), None

    def cnn():
        return ResNet().eval(), (torch.randn(16, 3, 64, 64),), None

    def latency():
        return ZooMlp().eval(), (torch.randn(1, 784),), None

    def train_step(model, make_loss, lr):
        # kiln's zoo::train_step with make_optimizer("adamw"): zero_grad, forward, loss,
        # backward, AdamW (weight decay 0.01) on the task's batch.
        opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)

        def step(x, y):
            opt.zero_grad(set_to_none=True)
            loss = make_loss(model(x), y)
            loss.backward()
            opt.step()
            return loss
        return step

    def train_mlp():
        x, y = torch.randn(64, 784), torch.randint(0, 10, (64,))
        return train_step(ZooMlp().train(), F.cross_entropy, 1e-3), (x, y), None

    def train_gpt():
        # The zoo gpt on `kiln train gpt`'s batches: 16 sequences of 15 tokens below 16, the
        # first 7 targets ignored.
        idx, y = torch.randint(0, 16, (16, 15)), torch.randint(0, 16, (16, 15))
        y[:, :7] = -100
        model = Gpt(vocab=512, block=64, layers=2, heads=4, embed=128).train()
        return (train_step(model, lambda out, t: F.cross_entropy(out.reshape(-1, 512),
                                                                t.reshape(-1)), 3e-3),
                (idx, y), None)

    w["pw-chain"] = ("bandwidth", 3.0 * 4 * n, pw_chain)
    w["softmax"] = ("bandwidth", 2.0 * 4 * 4096 * 4096, softmax)
    w["layernorm"] = ("bandwidth", 2.0 * 4 * 4096 * 4096, layernorm)
    w["mlp-gelu"] = ("gemm", 0, mlp_gelu)
    w["attention"] = ("gemm", 0, attention)
    w["gpt-block"] = ("mixed", 0, gpt_block)
    w["gpt"] = ("mixed", 0, gpt)
    w["cnn"] = ("mixed", 0, cnn)
    w["latency-b1"] = ("overhead", 0, latency)
    w["train-mlp"] = ("mixed", 0, train_mlp)
    w["train-gpt"] = ("mixed", 0, train_gpt)
    return w


# Workloads that record gradients: made and run outside inference mode.
TRAINING = {"train-mlp", "train-gpt"}


DEVICE = "cpu"  # --device


def ms(f):
    if DEVICE != "cpu":
        torch.cuda.synchronize()
    t = time.perf_counter()
    f()
    if DEVICE != "cpu":
        torch.cuda.synchronize()
    return (time.perf_counter() - t) * 1e3


def device_copy_gbs(reps=10):
    """A device-to-device copy of 256 MiB: the best of reps, in GB/s (read once, written once)."""
    src = torch.ones((256 << 20) // 4, device=DEVICE)
    dst = torch.empty_like(src)
    dst.copy_(src)
    best = min(ms(lambda: dst.copy_(src)) for _ in range(reps))
    return 2.0 * src.numel() * 4 / (best * 1e6)


def summarize(samples):
    return {"median_ms": statistics.median(samples), "min_ms": min(samples),
            "max_ms": max(samples), "reps": len(samples)}


# kiln's mode name -> torch.compile's mode, the row's mode label, and Inductor config patches.
MAX_AUTOTUNE_GEMM_BACKENDS = "CPP,ATEN"
MODES = {
    # The default mode keeps the label bench/compare pairs kiln's modes with.
    "default": ("default", "torch.compile", {}),
    "reduce_overhead": ("reduce-overhead", "reduce_overhead", {}),
    # The C++ GEMM template (torch/_inductor/utils.py use_cpp_gemm_template) needs the
    # weights to be graph constants, which only freezing makes them; without it every
    # linear stays an ATen addmm and the template is never tried.
    "max_autotune": ("max-autotune", "max_autotune",
                     {"max_autotune_gemm_backends": MAX_AUTOTUNE_GEMM_BACKENDS,
                      "freezing": True}),
}


def parse_modes(v):
    modes = []
    for m in (x.strip() for x in v.split(",")):
        if not m or m == "eager":  # eager always runs, as the baseline
            continue
        if m not in MODES:
            raise argparse.ArgumentTypeError(
                f"unknown mode {m!r} (eager, default, reduce_overhead, max_autotune)")
        if m not in modes:
            modes.append(m)
    return modes


def reason(e):
    """The exception's type and the first non-empty line of its message."""
    lines = [line for line in str(e).splitlines() if line.strip()]
    return f"{type(e).__name__}: {lines[0].strip()}" if lines else type(e).__name__


class Capture(logging.Handler):
    """PyTorch's warnings while a mode compiles: Python warnings and WARNING log records (the
    cudagraphs artifact log does not propagate, so it gets the handler itself)."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []
        self.loggers = [logging.getLogger("torch")]
        try:
            import torch._inductor.cudagraph_utils as cudagraph_utils
            self.loggers.append(cudagraph_utils.cudagraphs_log)
        except (ImportError, AttributeError):
            pass
        self.caught = warnings.catch_warnings(record=True)

    def emit(self, record):
        message = f"{record.name}: {record.getMessage()}".splitlines()[0]
        if message not in self.messages:
            self.messages.append(message)

    def __enter__(self):
        self.recorded = self.caught.__enter__()
        warnings.simplefilter("always")
        for lg in self.loggers:
            lg.addHandler(self)
        return self

    def __exit__(self, *exc):
        for lg in self.loggers:
            lg.removeHandler(self)
        self.caught.__exit__(*exc)
        for w in self.recorded:
            message = f"{w.category.__name__}: {w.message}".splitlines()[0]
            if message not in self.messages:
                self.messages.append(message)
        return False


def gemm_kernels(codes):
    """In Inductor's output code: C++ GEMM template kernels (each defines a micro-GEMM) and
    GEMMs left to a library call."""
    text = "\n".join(codes)
    template = len(re.findall(r"inline void \w*micro_gemm\(", text))
    extern = len(re.findall(r"extern_kernels\.(?:mm|addmm|bmm|baddbmm)\(|mkldnn\._linear_pointwise"
                            r"|mkl\._mkl_linear", text))
    return template, extern


def compile_mode(mode, fn, inputs, warmup):
    """Compiles fn in one of kiln's modes after a dynamo reset and runs its first call and the
    warm-up: returns (call, row fields)."""
    from torch._dynamo.utils import counters
    from torch._inductor import config as inductor_config
    from torch._inductor.graph import GraphLowering

    torch_mode, _, patches = MODES[mode]
    torch._dynamo.reset()
    codes, tuned = [], []

    def feedback(timings, name, *_):
        ms_of = {getattr(c, "name", str(c)): round(t, 4) if t < float("inf") else None
                 for c, t in timings.items()}  # a choice that failed times as inf
        timed = {c: t for c, t in ms_of.items() if t is not None}
        best = min(timed, key=timed.get) if timed else None
        tuned.append({"op": name, "best": best, "choices_ms": ms_of})

    selector = None
    if mode == "max_autotune":
        try:
            from torch._inductor import select_algorithm
            selector = select_algorithm.get_algorithm_selector_cache()
            selector.add_feedback_saver(feedback)
        except (ImportError, AttributeError):
            selector = None
    before = {k: counters["inductor"][k] for k in
              ("fxgraph_cache_hit", "fxgraph_cache_miss", "fxgraph_cache_bypass",
               "cudagraph_skips")}
    fields = {"compile_mode": mode, "torch_mode": torch_mode}
    if patches:
        fields["inductor_config"] = dict(patches)
    if "max_autotune_gemm_backends" in patches:
        fields["gemm_backends"] = patches["max_autotune_gemm_backends"]
    capture = Capture()
    try:
        with capture, inductor_config.patch(patches), \
                mock.patch.object(GraphLowering, "save_output_code", codes.append):
            compiled = torch.compile(fn, mode=torch_mode)
            call = lambda: compiled(*inputs)  # noqa: E731
            fields["first_call_ms"] = ms(call)
            for _ in range(max(warmup - 1, 0)):
                call()
    finally:
        if selector is not None:
            try:
                selector.feedback_saver_fns.remove(feedback)
            except (AttributeError, ValueError):
                pass
        fields["warnings"] = capture.messages
    for k, v in before.items():
        if counters["inductor"][k] - v:
            fields[k] = counters["inductor"][k] - v
    fields["cpp_gemm_template_kernels"], fields["extern_gemm_calls"] = gemm_kernels(codes)
    if tuned:
        fields["autotune"] = tuned
    return call, fields


def run(args):
    global DEVICE
    DEVICE = args.device
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    table = workloads()
    names = args.workloads or list(table) + (["compile"] if DEVICE == "cpu" else [])
    results, failed, notes = [], [], []
    compile_info = None

    def fail(name, label, e, **fields):
        row = {"workload": name, "mode": label, "error": reason(e)}
        row.update(fields)
        failed.append(row)
        notes.append(f"{name} {label}: {row['error']}")
        print(f"{name:<12}{label:<16}failed: {row['error']}", flush=True)

    for name in names:
        if name == "compile":
            continue
        if name not in table:
            sys.exit(f"torch_bench: unknown workload {name!r}")
        with torch.inference_mode(name not in TRAINING):
            bound, nbytes, make = table[name]
            fn, inputs, reference = make()
            if DEVICE != "cpu":  # the same numbers, moved; the reference is oneDNN's (CPU)
                fn = fn.to(DEVICE) if isinstance(fn, nn.Module) else fn
                inputs = tuple(t.to(DEVICE) for t in inputs)
                reference = None
            base = [("eager", lambda: fn(*inputs))]
            if reference is not None:
                base.append(("onednn-alone", reference))
            first, extra, samples = {}, {}, {}
            good_base = []
            for label, call in base:
                try:
                    first[label] = ms(call)
                    for _ in range(max(args.warmup - 1, 0)):
                        call()
                    good_base.append((label, call))
                    samples[label] = []
                except Exception as e:  # noqa: BLE001 - report why, keep measuring the rest
                    fail(name, label, e)
            # One block per mode, each after its own dynamo reset (which drops every compiled
            # graph, so modes cannot be interleaved with each other); eager runs in each block.
            blocks = list(args.modes) or [None]
            order = [label for label, _ in good_base]
            dead = set()
            for mode in blocks:
                calls = [(label, call) for label, call in good_base if label not in dead]
                if mode is not None:
                    label = MODES[mode][1]
                    try:
                        call, fields = compile_mode(mode, fn, inputs, args.warmup)
                    except Exception as e:  # noqa: BLE001
                        fail(name, label, e, compile_mode=mode, torch_mode=MODES[mode][0])
                        continue
                    for w in fields["warnings"]:
                        print(f"{name:<12}{label:<16}warning: {w}", flush=True)
                    first[label], extra[label] = fields.pop("first_call_ms"), fields
                    samples[label] = []
                    order.append(label)
                    calls.append((label, call))
                start = len(samples.get("eager", []))
                for rep in range(args.reps):
                    # Each repetition starts one further along, as kiln's bench: no call
                    # always runs right after the same other one.
                    shift = rep % max(len(calls), 1)
                    for label, call in calls[shift:] + calls[:shift]:
                        try:
                            samples[label].append(ms(call))
                        except Exception as e:  # noqa: BLE001
                            fail(name, label, e, after_reps=len(samples[label]))
                            calls.remove((label, call))
                            dead.add(label)
                if mode is not None and samples.get("eager", [])[start:]:
                    # eager in this mode's block alone: the pair timed side by side
                    extra[MODES[mode][1]]["block_eager_median_ms"] = statistics.median(
                        samples["eager"][start:])
            for label in order:
                if label in dead or not samples.get(label):
                    continue
                row = {"workload": name, "mode": label, "bound": bound, "bytes": nbytes,
                       "first_call_ms": first[label]}
                row.update(summarize(samples[label]))
                row.update(extra.get(label, {}))
                results.append(row)
                gemm = ""
                if label in extra and (row["cpp_gemm_template_kernels"] or
                                       row["extern_gemm_calls"]):
                    gemm = (f"  (GEMMs: {row['cpp_gemm_template_kernels']} C++ template, "
                            f"{row['extern_gemm_calls']} library)")
                print(f"{name:<12}{label:<16}{row['median_ms']:10.3f} ms  first call "
                      f"{row['first_call_ms']:.1f} ms{gemm}", flush=True)
    with torch.inference_mode():
        if "compile" in names:
            # Cold: caches disabled (Inductor's FX graph and kernel caches would otherwise
            # hold the gpt compiled above); warm: a fresh compile with the on-disk caches on.
            try:
                import torch._inductor.config as inductor_config
                model = Gpt().eval()
                tokens = torch.randint(0, 4096, (4, 256))
                steady = statistics.median(ms(lambda: model(tokens)) for _ in range(3))
                torch._dynamo.reset()
                with inductor_config.patch(force_disable_caches=True):
                    compiled = torch.compile(model)
                    cold = ms(lambda: compiled(tokens))
                torch._dynamo.reset()
                compiled = torch.compile(model)
                compiled(tokens)  # fills the caches
                torch._dynamo.reset()
                compiled = torch.compile(model)
                warm = ms(lambda: compiled(tokens))
                compile_info = {"model": "gpt", "cold_ms": cold, "warm_ms": warm,
                                "eager_call_ms": steady}
                print(f"compile     gpt first call cold {cold:.1f} ms, warm {warm:.1f} ms"
                      f" (an eager call: {steady:.1f} ms)", flush=True)
            except Exception as e:  # noqa: BLE001
                notes.append(f"compile: torch.compile failed: {e!r}")
    chain_info = None
    if "compile" in names and args.chain:
        # kiln bench compile's chain: tanh and softmax(-1) alternately, n calls on 64x64 f32,
        # each length compiled with Inductor's caches disabled.
        import torch._inductor.config as inductor_config

        def chain(x, n):
            for i in range(n):
                x = torch.tanh(x) if i % 2 == 0 else torch.softmax(x, -1)
            return x

        x = torch.randn(64, 64)
        points = []
        for n in args.chain:
            try:
                torch._dynamo.reset()
                with torch.inference_mode(), inductor_config.patch(force_disable_caches=True):
                    compiled = torch.compile(lambda t, n=n: chain(t, n))
                    first = ms(lambda: compiled(x))
                    call = statistics.median(ms(lambda: compiled(x)) for _ in range(5))
                points.append({"n": n, "first_call_ms": first, "call_ms": call})
                print(f"compile     chain n={n} first call {first:.1f} ms, call {call:.3f} ms",
                      flush=True)
            except Exception as e:  # noqa: BLE001
                notes.append(f"compile chain {n}: torch.compile failed: {e!r}")
        chain_info = {"points": points}
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    machine = {"cpu": cpu, "threads": args.threads}
    out = {"schema": "kiln.bench/1", "runner": "torch", "version": torch.__version__,
           "machine": machine, "results": results, "notes": notes}
    if DEVICE != "cpu":
        machine["device"] = torch.cuda.get_device_name(torch.device(DEVICE))
        out["reference"] = {"device_copy_gbs": device_copy_gbs()}
        print(f"reference: device-to-device copy {out['reference']['device_copy_gbs']:.1f} GB/s",
              flush=True)
    if failed:
        out["failed"] = failed
    try:
        import torch._inductor.config as inductor_config
        # first_call_ms of a compiled mode is a cold compile only with Inductor's caches off
        # (TORCHINDUCTOR_FORCE_DISABLE_CACHES=1); each row's fxgraph_cache_* counts say which.
        out["inductor_caches_disabled"] = bool(inductor_config.force_disable_caches)
    except (ImportError, AttributeError):
        pass
    if compile_info:
        out["compile"] = compile_info
    if chain_info:
        out["compile_chain"] = chain_info
    for n in notes:
        print("note:", n, flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
        print("wrote", args.json)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("workloads", nargs="*")
    p.add_argument("--modes", type=parse_modes, default=list(MODES),
                   help="compiled modes, kiln's names: default,reduce_overhead,max_autotune "
                        "(default: all three); eager always runs")
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--json")
    p.add_argument("--device", default="cpu", help="cpu (the default) or cuda[:N]")
    p.add_argument("--chain", type=lambda v: [int(n) for n in v.split(",") if n],
                   default=[100, 200, 400, 800, 1600, 3200],
                   help="chain lengths for `compile` (kiln bench compile's chain)")
    run(p.parse_args())


if __name__ == "__main__":
    main()
