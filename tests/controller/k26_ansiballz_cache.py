"""`make test`'s cache of the module_utils that Ansible puts into each module's payload (AnsiballZ), for one run.

Before it sends a module, ansible-playbook walks the imports of the module and of every module_util it reaches
(`recursive_finder` in ansible/executor/module_common.py: an AST of `ansible.module_utils.basic` and the ~40 files
it imports), about 0.16 s of CPU, and keeps the result only for its own process: a deploy pays it for each of the
~18 modules it runs, some 3 of its 17 CPU-seconds, and the suite starts hundreds of ansible-playbook processes.
scripts/setup.sh installs this file in .venv with a ``.pth`` line that imports it; it does nothing unless
K26_ANSIBALLZ_CACHE names a directory, which scripts/test.sh sets to a fresh one for each run (the checkout does
not change during a run). There the walk's result (the files it adds to the payload, and the module's metadata)
is kept under the hash of what decides it: the module's source and name, Ansible's version, the module_utils
search path. The payload is the same; only the walk is not repeated. Any failure walks as before, and a debugger
or coverage extension is never cached. Nothing of the package depends on it: an operator's Ansible walks each time.
"""

import os
import sys

ENV = "K26_ANSIBALLZ_CACHE"
MODULE = "ansible.executor.module_common"


def _as_bytes(data):
    """Source as Ansible hands it over (text, bytes, or either tagged with its origin), as plain bytes."""
    return data.encode("utf-8") if isinstance(data, str) else bytes(data)


class _Recorder:
    """A stand-in for the payload's ZipFile that also keeps what is written into it."""

    def __init__(self, zf):
        self._zf = zf
        self.members = []

    def __getattr__(self, name):
        return getattr(self._zf, name)

    def writestr(self, zinfo, data, *args, **kwargs):
        self.members.append((zinfo.filename, _as_bytes(data)))
        return self._zf.writestr(zinfo, data, *args, **kwargs)


def _key(module_common, module_fqn, module_data):
    import hashlib
    paths = module_common.module_utils_loader._get_paths(subdirs=False)
    source = hashlib.sha256(_as_bytes(module_data)).hexdigest()
    parts = [module_common.__version__, module_fqn, "\0".join(paths), source]
    return hashlib.sha256("\n".join(parts).encode("utf-8", "surrogateescape")).hexdigest()


def _load(path):
    import pickle
    try:
        with open(path, "rb") as kept:
            return pickle.load(kept)
    except Exception:  # missing, half-written by nobody (writes are atomic), or from another Ansible: walked again
        return None


def _store(path, value):
    import pickle
    import tempfile
    directory = os.path.dirname(path)
    try:
        os.makedirs(directory, exist_ok=True)
        fd, scratch = tempfile.mkstemp(dir=directory)
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as out:
            pickle.dump(value, out)
        os.replace(scratch, path)
    except Exception:  # keeping it is an optimisation: never a failure
        os.unlink(scratch)


def cached(module_common, recursive_finder, directory):
    """`recursive_finder` with its result kept in `directory`."""

    def recursive_finder_cached(name, module_fqn, module_data, zf, date_time, extension_manager):
        if extension_manager.extension_names or extension_manager.debugger_enabled:
            return recursive_finder(name, module_fqn, module_data, zf, date_time, extension_manager)
        try:
            path = os.path.join(directory, _key(module_common, module_fqn, module_data))
        except Exception:
            return recursive_finder(name, module_fqn, module_data, zf, date_time, extension_manager)
        kept = _load(path)
        if kept is not None:
            members, metadata = kept
            for filename, data in members:
                zf.writestr(module_common._make_zinfo(filename, date_time, zf=zf), data)
            return metadata
        recorder = _Recorder(zf)
        metadata = recursive_finder(name, module_fqn, module_data, recorder, date_time, extension_manager)
        _store(path, (recorder.members, metadata))
        return metadata

    return recursive_finder_cached


def _patch(module):
    directory = os.environ.get(ENV)
    if directory and hasattr(module, "recursive_finder") and hasattr(module, "_make_zinfo"):
        module.recursive_finder = cached(module, module.recursive_finder, directory)


class _Finder:
    """Patches module_common once Python has run it (a meta path finder that only wraps the normal loader)."""

    @staticmethod
    def find_spec(fullname, path=None, target=None):
        if fullname != MODULE:
            return None
        from importlib.machinery import PathFinder
        spec = PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_patch(module):
            exec_module(module)
            _patch(module)

        spec.loader.exec_module = exec_and_patch
        return spec


def install():
    """Hook module_common's import when K26_ANSIBALLZ_CACHE is set (the .pth line calls this at every start)."""
    if os.environ.get(ENV) and not any(isinstance(finder, _Finder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


install()
