# lit configuration for kiln's text-IR tests: every .kir file under test/ runs its RUN lines
# with `kiln` and LLVM's FileCheck/not on PATH.
import os

import lit.formats

config.name = "kiln"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".kir"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.kiln_binary_dir, "test", "lit")
config.excludes = ["runtime", "install", "fuzz"]

config.environment["PATH"] = os.pathsep.join(
    [config.kiln_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")])
# oneDNN's ISA cap, so that one host can run the tests as an AVX2 host would.
if "ONEDNN_MAX_CPU_ISA" in os.environ:
    config.environment["ONEDNN_MAX_CPU_ISA"] = os.environ["ONEDNN_MAX_CPU_ISA"]
# Deterministic output regardless of the caller's logging settings.
config.environment.pop("KILN_LOGS", None)
if config.mlir_opt:
    config.available_features.add("mlir-opt")
    config.substitutions.append(("%mlir-opt", config.mlir_opt))

# `onednn-nhwc`: this host's oneDNN runs a 16-channel 3x3 conv on NHWC when left to choose,
# so the layout pass (which follows that choice: passes/layout.h) forms channels-last regions.
# oneDNN chooses per CPU (AVX-512 hosts: NHWC; AVX2 hosts: blocked nChw8c).
import subprocess

_probe = """graph @probe {
  %x : f32[2,16,32,32] = input "x"
  %w : f32[16,16,3,3] = param "w"
  %c : f32[2,16,32,32] = conv2d(%x, %w) {stride = [1, 1], padding = [1, 1], dilation = [1, 1], groups = 1}
  %r : f32[2,16,32,32] = relu(%c)
  %d : f32[2,16,32,32] = conv2d(%r, %w) {stride = [1, 1], padding = [1, 1], dilation = [1, 1], groups = 1}
  return %d
}
"""
try:
    _out = subprocess.run([os.path.join(config.kiln_tools_dir, "kiln"), "opt", "-",
                           "--passes=channels-last"], input=_probe, capture_output=True,
                          text=True, env=config.environment, timeout=60).stdout
    if "copy(" in _out:
        config.available_features.add("onednn-nhwc")
except (OSError, subprocess.SubprocessError):
    pass
