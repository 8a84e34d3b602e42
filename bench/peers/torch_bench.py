"""The kiln bench workloads under PyTorch: eager and torch.compile (Inductor's C++ backend),
with the same shapes, thread count, warm-up and interleaved repetitions as `kiln bench`, and
the same JSON schema (kiln.bench/1, runner "torch"). Run by bench/peers/run.

    python torch_bench.py [WORKLOAD ...] [--reps N] [--warmup N] [--threads N] [--json FILE]
                          [--chain N,N,...]
"""

import argparse
import json
import os
import statistics
import sys
import time

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

    def gpt_block():
        return Block(768, 12).eval(), (torch.randn(4, 256, 768),), None

    def gpt():
        return Gpt().eval(), (torch.randint(0, 4096, (4, 256)),), None

    def cnn():
        return ResNet().eval(), (torch.randn(16, 3, 64, 64),), None

    def latency():
        return ZooMlp().eval(), (torch.randn(1, 784),), None

    w["pw-chain"] = ("bandwidth", 3.0 * 4 * n, pw_chain)
    w["softmax"] = ("bandwidth", 2.0 * 4 * 4096 * 4096, softmax)
    w["layernorm"] = ("bandwidth", 2.0 * 4 * 4096 * 4096, layernorm)
    w["mlp-gelu"] = ("gemm", 0, mlp_gelu)
    w["gpt-block"] = ("mixed", 0, gpt_block)
    w["gpt"] = ("mixed", 0, gpt)
    w["cnn"] = ("mixed", 0, cnn)
    w["latency-b1"] = ("overhead", 0, latency)
    return w


def ms(f):
    t = time.perf_counter()
    f()
    return (time.perf_counter() - t) * 1e3


def summarize(samples):
    return {"median_ms": statistics.median(samples), "min_ms": min(samples),
            "max_ms": max(samples), "reps": len(samples)}


def run(args):
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    table = workloads()
    names = args.workloads or list(table) + ["compile"]
    results, notes = [], []
    compile_info = None
    with torch.inference_mode():
        for name in names:
            if name == "compile":
                continue
            if name not in table:
                sys.exit(f"torch_bench: unknown workload {name!r}")
            bound, nbytes, make = table[name]
            fn, inputs, reference = make()
            calls = [("eager", lambda: fn(*inputs))]
            if reference is not None:
                calls.append(("onednn-alone", reference))
            first = {}
            try:
                compiled = torch.compile(fn)
                calls.append(("torch.compile", lambda: compiled(*inputs)))
            except Exception as e:  # noqa: BLE001 - report why, keep measuring eager
                notes.append(f"{name}: torch.compile failed: {e!r}")
            good = []
            for label, call in calls:
                try:
                    first[label] = ms(call)
                    for _ in range(max(args.warmup - 1, 0)):
                        call()
                    good.append((label, call))
                except Exception as e:  # noqa: BLE001
                    notes.append(f"{name} {label}: {type(e).__name__}: {e}".splitlines()[0])
            samples = {label: [] for label, _ in good}
            for _ in range(args.reps):
                for label, call in good:
                    samples[label].append(ms(call))
            for label, _ in good:
                row = {"workload": name, "mode": label, "bound": bound, "bytes": nbytes,
                       "first_call_ms": first[label]}
                row.update(summarize(samples[label]))
                results.append(row)
                print(f"{name:<12}{label:<16}{row['median_ms']:10.3f} ms", flush=True)
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
    out = {"schema": "kiln.bench/1", "runner": "torch", "version": torch.__version__,
           "machine": {"cpu": cpu, "threads": args.threads}, "results": results,
           "notes": notes}
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
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--json")
    p.add_argument("--chain", type=lambda v: [int(n) for n in v.split(",") if n],
                   default=[100, 200, 400, 800, 1600, 3200],
                   help="chain lengths for `compile` (kiln bench compile's chain)")
    run(p.parse_args())


if __name__ == "__main__":
    main()
