"""The test image's compile cache for what Python imports from zip files: Ansible's modules.

Every Ansible module run sends its module and ``ansible.module_utils`` as a zip (AnsiballZ) that Python imports
with ``zipimport``, which never keeps bytecode: each run compiles the same ~20,000 lines again, about 0.05 s of
the 0.15 s a module costs on the host, and the suite runs tens of thousands of modules. scripts/build_image.sh
installs this file in the image with a ``.pth`` line that imports it: a compiled module is kept here under the
hash of its source (and of Python's bytecode version), so that the same source is compiled once per container.
The code run is the same; only its compilation is reused, with each function's file name set to the zip it came
from this time (tracebacks stay true). Only root writes the cache; any failure falls back to compiling.
Nothing of the package depends on it: a real host runs the same modules without it.
"""

import zipimport

CACHE_DIR = "/var/cache/k26-zipimport"
_compile_source = zipimport._compile_source


def _with_filename(code, filename):
    """`code` and every code object inside it, as compiled from `filename`."""
    consts = tuple(_with_filename(const, filename) if isinstance(const, type(code)) else const
                   for const in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)


def _cached_compile_source(pathname, source):
    """zipimport's _compile_source, from the cache when the same source was compiled before."""
    try:
        import hashlib
        import marshal
        import os
        from importlib.util import MAGIC_NUMBER

        path = os.path.join(CACHE_DIR, hashlib.sha256(MAGIC_NUMBER + source).hexdigest())
        try:
            with open(path, "rb") as cached:
                return _with_filename(marshal.load(cached), pathname)
        except (OSError, EOFError, ValueError, TypeError):
            pass
        code = _compile_source(pathname, source)
        if os.geteuid() == 0 and os.path.isdir(CACHE_DIR):
            scratch = "%s.%d" % (path, os.getpid())
            with open(scratch, "wb") as out:
                marshal.dump(code, out)
            os.replace(scratch, path)
        return code
    except Exception:  # a cache must never be why an import fails
        return _compile_source(pathname, source)


zipimport._compile_source = _cached_compile_source
