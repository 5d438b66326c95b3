# lit configuration of spark-compile's FileCheck tests.
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "spark"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["lit.cfg.py", "lit.site.cfg.py", "CMakeLists.txt", "unit", "reference"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.spark_obj_root, "test")

config.substitutions.append(("%PATH%", config.environment["PATH"]))
llvm_config.with_system_environment(["HOME", "TMPDIR"])
llvm_config.use_default_substitutions()

# Our tools first, then LLVM's FileCheck, not, count.
llvm_config.with_environment("PATH", config.spark_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
config.substitutions.append(("%python", config.python_executable))
config.substitutions.append(("%spark_src", config.spark_src_root))
config.substitutions.append(("%reference",
                             config.python_executable + " " +
                             os.path.join(config.spark_src_root, "tools", "reference",
                                          "spark_reference.py")))

# Cross targets: spark-compile was configured with the AArch64 cross compiler.
if getattr(config, "spark_arm64_cc", ""):
    config.available_features.add("arm64-cross")
if getattr(config, "spark_hexagon_ld", ""):
    config.available_features.add("hexagon-cross")
import shutil
if shutil.which("qemu-aarch64-static") and shutil.which("qemu-hexagon-static"):
    config.available_features.add("qemu")

# spark-kernelbench is built on x86-64 hosts only.
import platform
if platform.machine() in ("x86_64", "AMD64"):
    config.available_features.add("x86-host")
