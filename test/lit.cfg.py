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
# Deterministic output regardless of the caller's logging settings.
config.environment.pop("KILN_LOGS", None)
if config.mlir_opt:
    config.available_features.add("mlir-opt")
    config.substitutions.append(("%mlir-opt", config.mlir_opt))
