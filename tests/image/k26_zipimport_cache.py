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


# The imports are inside the functions: the .pth line imports this file in every interpreter the image starts,
# and only one that imports from a zip needs them.
def _cache_path(source):
    import hashlib
    import os
    from importlib.util import MAGIC_NUMBER
    return os.path.join(CACHE_DIR, hashlib.sha256(MAGIC_NUMBER + source).hexdigest())


def _load(path, pathname):
    """The code kept at `path`, as compiled from `pathname`; None when there is none or it cannot be read."""
    import marshal
    try:
        with open(path, "rb") as cached:
            return _with_filename(marshal.load(cached), pathname)
    except Exception:  # missing, damaged or from elsewhere: compiled again
        return None


def _store(path, code):
    """Keep `code` at `path` when root runs this (others only read the cache); a failure keeps nothing."""
    import marshal
    import os
    if os.geteuid() != 0 or not os.path.isdir(CACHE_DIR):
        return
    scratch = "%s.%d" % (path, os.getpid())
    try:
        with open(scratch, "wb") as out:
            marshal.dump(code, out)
        os.replace(scratch, path)
    except OSError:
        try:
            os.unlink(scratch)
        except OSError:
            pass


def _cached_compile_source(pathname, source):
    """zipimport's _compile_source, from the cache when the same source was compiled before."""
    path = _cache_path(source)
    code = _load(path, pathname)
    if code is None:
        code = _compile_source(pathname, source)
        _store(path, code)
    return code


zipimport._compile_source = _cached_compile_source
