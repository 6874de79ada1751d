# lit configuration of the mla tests.
import os
import shutil

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "MLA"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.mla_obj_root, "test")

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%mla_src_root", config.mla_src_root))
# The sweeps run one combination in three under ASan (split_matrix.py).
config.substitutions.append(
    ("%{sweep-stride}", "3" if "asan" in config.available_features else "1"))

# A CUDA toolkit's ptxas, where one is installed (not on CI's machine): the
# sm_90a kernels' registers and spills by the kernel report.
ptxas = shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas"
if os.access(ptxas, os.X_OK):
    config.available_features.add("ptxas")
    config.substitutions.append(("%{ptxas}", ptxas))

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)

tools = [
    ToolSubst("mla-compile", unresolved="fatal"),
    ToolSubst("mla-opt", unresolved="fatal"),
    ToolSubst("mla-run", unresolved="fatal"),
    ToolSubst("mla-translate", unresolved="fatal"),
]
llvm_config.add_tool_substitutions(tools, [config.mla_tools_dir])
config.substitutions.append(
    ("%{mla-translate-path}", os.path.join(config.mla_tools_dir, "mla-translate")))
