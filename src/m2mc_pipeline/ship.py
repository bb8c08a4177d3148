"""Ship the m2mc code to a cluster's executors, so that they need only Python and Java.

A sweep runs ``run_task`` in the executors' Python and ``m2mc sim`` in a child
process of it. On a cluster those Pythons are the nodes' own (``spark.pyspark.python``,
default ``python3``), which need not have m2mc installed. Before the sweep's job,
the driver zips the packages it imported itself (m2mc, m2mc_pipeline, and their
pure-Python dependencies msgpack and tomli_w) and adds the zip with
``SparkContext.addPyFile``: every executor fetches it and puts it on its Python's
``sys.path``. The child ``m2mc sim`` finds it through :func:`child_pythonpath`.

The zip holds sources only (no ``.pyc``, no compiled extension), so any Python of
the driver's minor version can import it; msgpack then uses its pure-Python
implementation unless the executor has msgpack installed, which is preferred.
The zip's name carries a hash of its content: Spark refuses a second file of one
name with other content, and an unchanged package is added (and fetched) once.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import os
import sys
import tempfile
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # this module is imported in executors too (sweep.py): no pyspark there
    from pyspark import SparkContext

# m2mc's own packages: they come first on the executors' path.
OWN = ("m2mc", "m2mc_pipeline")
# Their pure-Python dependencies (pyproject.toml): used only where the executor's
# Python has none of its own (the child ``m2mc sim`` puts them last on its path).
DEPENDENCIES = ("msgpack", "tomli_w")
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # fixed: the same sources give the same bytes
_SKIP_DIRS = {"__pycache__"}
_SKIP_SUFFIXES = (".pyc", ".pyo", ".so", ".pyd", ".dylib")
# The child ``m2mc sim`` appends these (the shipped dependencies) to its sys.path.
FALLBACK_PATH = "M2MC_FALLBACK_PATH"


def _package_dir(name: str) -> Path | None:
    """Where the driver imports package ``name`` from; None when it is not a plain
    directory (already inside a zip, e.g. ``spark-submit --py-files``: Spark ships it)."""
    spec = importlib.util.find_spec(name)
    if spec is None:
        return None
    if spec.submodule_search_locations:
        where = Path(next(iter(spec.submodule_search_locations)))
    elif spec.origin:  # a single-module distribution
        where = Path(spec.origin)
    else:
        return None
    return where if where.exists() else None


def _files(root: Path) -> Iterator[tuple[Path, str]]:
    """(file, name in the zip) for a package directory or a single module."""
    if root.is_file():
        yield root, root.name
        return
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
        for f in sorted(filenames):
            if f.endswith(_SKIP_SUFFIXES):
                continue
            path = Path(dirpath) / f
            yield path, str(path.relative_to(root.parent))


def build_zip(packages: Sequence[str], directory: Path | None = None,
              prefix: str = "m2mc") -> Path | None:
    """A zip of ``packages`` as the driver imports them; None when none is a directory.

    Written once per content under ``directory`` (default: the temp directory) as
    ``<prefix>-<hash>.zip``.
    """
    buf = io.BytesIO()
    found = 0
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in packages:
            root = _package_dir(name)
            if root is None:
                continue
            found += 1
            for path, arcname in _files(root):
                info = zipfile.ZipInfo(arcname, _ZIP_TIME)
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = 0o644 << 16
                zf.writestr(info, path.read_bytes())
    if not found:
        return None
    data = buf.getvalue()
    digest = hashlib.sha256(data).hexdigest()[:16]
    where = directory or Path(tempfile.gettempdir()) / "m2mc-ship"
    where.mkdir(parents=True, exist_ok=True)
    target = where / f"{prefix}-{digest}.zip"
    if not target.exists():
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(data)
        tmp.replace(target)
    return target


def ship(sc: SparkContext, directory: Path | None = None) -> list[Path]:
    """Add the m2mc packages and their dependencies to ``sc`` for its executors.

    Returns the zips added (none in local mode: the embedded executors run the
    driver's own Python, which imports m2mc already).
    """
    if (sc.master or "").startswith("local"):
        return []
    added = []
    for packages, prefix in ((OWN, "m2mc"), (DEPENDENCIES, "m2mc-deps")):
        z = build_zip(packages, directory, prefix)
        if z is not None:
            sc.addPyFile(str(z))
            added.append(z)
    return added


def child_pythonpath(env: dict[str, str]) -> dict[str, str]:
    """The environment for a child Python that must import m2mc as this one does.

    In an executor, m2mc may come from the shipped zip (on this process's
    ``sys.path`` only): its place goes on the child's PYTHONPATH, and the shipped
    dependencies' place in :data:`FALLBACK_PATH` (appended after site-packages,
    so an installed msgpack wins). With m2mc installed, nothing changes.
    """
    out = dict(env)
    own = _import_root("m2mc")
    if own is not None and _in_zip(own):
        out["PYTHONPATH"] = os.pathsep.join(p for p in (own, env.get("PYTHONPATH")) if p)
        deps = [r for r in (_import_root(d) for d in DEPENDENCIES)
                if r is not None and _in_zip(r) and r != own]
        if deps:
            out[FALLBACK_PATH] = os.pathsep.join(dict.fromkeys(deps))
    return out


def _import_root(module: str) -> str | None:
    """The ``sys.path`` entry ``module`` was (or would be) imported from."""
    loaded = sys.modules.get(module)
    origin = getattr(loaded, "__file__", None)
    if origin is None:
        spec = importlib.util.find_spec(module)
        origin = spec.origin if spec is not None else None
    if not origin:
        return None
    path = Path(origin)
    root = path.parent.parent if path.name == "__init__.py" else path.parent
    return str(root)


def _in_zip(root: str) -> bool:
    return root.endswith(".zip") and Path(root).is_file()
