"""Build of the optional compiled loops (m2mc.native._speedups); everything else is in
pyproject.toml.

The extension is optional: where it does not build (no C compiler, no Python headers)
the install goes on and m2mc runs its pure-Python path (m2mc.native says which).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("m2mc.native._speedups", ["src/m2mc/native/_speedups.c"],
                             optional=True, extra_compile_args=["-O2"])])
