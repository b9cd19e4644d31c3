"""The install's one step beyond pyproject.toml: g10fast's kernels compiled ahead of time.

After the package's files are in place, `g10fast.warm.build_aot` compiles the kernels a run
calls from Python into `g10fast/_aot*.so` (g10fast/aot.py says which, and when a run uses
them), on this machine, for its CPU: a first run without a compile. An editable install
(`pip install -e .`) builds them in the checkout, any other into the package it installs.
Anything that fails leaves a warning and an install whose kernels compile on first use, as
they would without this step; G10FAST_NO_AOT=1 skips it.
"""

import os
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = Path(__file__).resolve().parent


class BuildWithKernels(build_py):
    def run(self):
        super().run()
        if os.environ.get("G10FAST_NO_AOT", "") not in ("", "0"):
            return
        root = HERE if getattr(self, "editable_mode", False) else Path(self.build_lib).resolve()
        path = [str(root)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(path))
        code = (
            "import sys; from g10fast.warm import build_aot; r = build_aot(); "
            "sys.stdout.write(r.stdout); sys.stderr.write(r.stderr[-4000:]); sys.exit(r.returncode)"
        )
        try:
            cmd = [sys.executable, "-c", code]
            p = subprocess.run(cmd, env=env, cwd=str(root), capture_output=True, text=True)
        except OSError as e:
            self.warn(f"g10fast: kernels not compiled ahead of time ({e}); they compile on first use")
            return
        if p.returncode != 0:
            self.warn(f"g10fast: kernels not compiled ahead of time; they compile on first use:\n{p.stderr}")
        else:
            self.announce(p.stdout.strip(), level=2)


class WithCompiledKernels(Distribution):
    def has_ext_modules(self):
        return True  # (a wheel with the compiled kernels is for this platform only)


setup(cmdclass={"build_py": BuildWithKernels}, distclass=WithCompiledKernels)
