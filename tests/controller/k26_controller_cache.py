"""`make test`'s caches of what every ansible-playbook process works out again for itself, kept for one run.

The suite starts hundreds of ansible-playbook processes, and each forks a worker per task that starts from the same
state. Three results they would all compute anew are kept on disk instead, each under the hash of all that decides
it, so a second process gets what the first one computed:
- `payload`: the walk of a module's imports for its payload (`recursive_finder` in ansible/executor/module_common.py:
  an AST of `ansible.module_utils.basic` and the ~40 files it imports, about 0.16 s of CPU per module per process).
  Kept: the files it adds and the module's metadata; the payload is the same.
- `code`: the code objects of collections' Python (Ansible's collection loader compiles every plugin and module_util
  from its source in every process, and writes no bytecode: about 1 s of a deploy's CPU).
- `jinja`: Jinja's compiled templates and expressions (each worker parses and compiles the templates of its task
  again: about 1.4 of the 19 CPU-seconds of a deploy that changes nothing).
scripts/setup.sh installs this file in .venv with a ``.pth`` line that imports it; it does nothing unless
K26_CONTROLLER_CACHE names a directory, which scripts/test.sh sets to a fresh one for each run (the checkout does not
change during a run). Any failure computes as before; the payload of a module run with a debugger or coverage
extension is never cached. Nothing of the package depends on it: an operator's Ansible computes each time.
"""

import os
import sys

ENV = "K26_CONTROLLER_CACHE"
# the environment a template's filters and tests are looked up in (Jinja decides at compile time what to pass them)
PLUGIN_SETTINGS = ("ANSIBLE_CONFIG", "ANSIBLE_COLLECTIONS_PATH", "ANSIBLE_COLLECTIONS_PATHS", "ANSIBLE_FILTER_PLUGINS",
                   "ANSIBLE_TEST_PLUGINS")


def _as_bytes(data):
    """Source as Ansible hands it over (text, bytes, or either tagged with its origin), as plain bytes."""
    return data.encode("utf-8", "surrogateescape") if isinstance(data, str) else bytes(data)


def _digest(*parts):
    import hashlib
    return hashlib.sha256(b"\0".join(_as_bytes(part) for part in parts)).hexdigest()


class Store:
    """Values kept as files in `directory` (atomic writes), and in memory for this process."""

    def __init__(self, directory, dump, load):
        self.directory = directory
        self._dump = dump
        self._load = load
        self._memory = {}

    def get(self, key):
        if key in self._memory:
            return self._memory[key]
        try:
            with open(os.path.join(self.directory, key), "rb") as kept:
                value = self._load(kept)
        except Exception:  # missing, or from another Python: computed again
            return None
        self._memory[key] = value
        return value

    def put(self, key, value):
        import tempfile
        self._memory[key] = value
        try:
            os.makedirs(self.directory, exist_ok=True)
            fd, scratch = tempfile.mkstemp(dir=self.directory)
        except OSError:
            return
        try:
            with os.fdopen(fd, "wb") as out:
                self._dump(value, out)
            os.replace(scratch, os.path.join(self.directory, key))
        except Exception:  # keeping it is an optimisation: never a failure
            os.unlink(scratch)


def _pickled(directory):
    import pickle
    return Store(directory, pickle.dump, pickle.load)


def _marshalled(directory):
    import marshal
    return Store(directory, marshal.dump, marshal.load)


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


def _payload_key(module_common, module_fqn, module_data):
    paths = module_common.module_utils_loader._get_paths(subdirs=False)
    return _digest(module_common.__version__, module_fqn, "\0".join(paths), _digest(module_data))


def cached(module_common, recursive_finder, directory):
    """`recursive_finder` with its result kept in `directory`."""
    store = _pickled(directory)

    def recursive_finder_cached(name, module_fqn, module_data, zf, date_time, extension_manager):
        if extension_manager.extension_names or extension_manager.debugger_enabled:
            return recursive_finder(name, module_fqn, module_data, zf, date_time, extension_manager)
        try:
            key = _payload_key(module_common, module_fqn, module_data)
        except Exception:
            return recursive_finder(name, module_fqn, module_data, zf, date_time, extension_manager)
        kept = store.get(key)
        if kept is not None:
            members, metadata = kept
            for filename, data in members:
                zf.writestr(module_common._make_zinfo(filename, date_time, zf=zf), data)
            return metadata
        recorder = _Recorder(zf)
        metadata = recursive_finder(name, module_fqn, module_data, recorder, date_time, extension_manager)
        store.put(key, (recorder.members, metadata))
        return metadata

    return recursive_finder_cached


def cached_get_code(get_code, directory):
    """The collection loader's `get_code` with its code objects kept in `directory`."""
    store = _marshalled(directory)

    def get_code_cached(loader, fullname):
        if loader._compiled_code:
            return loader._compiled_code
        try:
            filename = loader.get_filename(fullname) or "<string>"
            source = loader.get_source(fullname)
        except Exception:
            return get_code(loader, fullname)
        if source is None:
            return get_code(loader, fullname)
        key = _digest(sys.version, filename, source)
        code = store.get(key)
        if code is None:
            code = get_code(loader, fullname)
            store.put(key, code)
        loader._compiled_code = code
        return code

    return get_code_cached


def _jinja_settings(environment):
    """What decides the code Jinja compiles a template to, other than its source."""
    import jinja2
    parts = [jinja2.__version__, sys.version, type(environment).__qualname__,
             environment.code_generator_class.__qualname__, sorted(environment.extensions)]
    parts += [getattr(environment, name) for name in (
        "block_start_string", "block_end_string", "variable_start_string", "variable_end_string",
        "comment_start_string", "comment_end_string", "line_statement_prefix", "line_comment_prefix",
        "trim_blocks", "lstrip_blocks", "newline_sequence", "keep_trailing_newline", "optimized", "autoescape",
        "is_async")]
    parts += [os.environ.get(name) for name in PLUGIN_SETTINGS] + [os.getcwd()]
    templating = sys.modules.get("ansible._internal._templating._jinja_bits")
    if templating is not None:  # Ansible's own compile-time switches
        context = templating._TemplateCompileContext.current(optional=True)
        parts += [context.escape_backslashes if context else None, templating._TemplateConfig.allow_embedded_templates,
                  templating.AnsibleEnvironment._debuggable_template_source]
    return repr(parts)


def cached_jinja(environment_class, directory):
    """Patch `environment_class` (jinja2.Environment) to keep its compiled templates and expressions in
    `directory`: a template's source is compiled once per run, whichever process asks first."""
    import contextvars
    from jinja2.environment import TemplateExpression
    store = _marshalled(directory)
    compile_source = environment_class.compile
    compile_expression = environment_class.compile_expression
    compiled = contextvars.ContextVar("k26_compiled", default=None)

    def compile_cached(environment, source, name=None, filename=None, raw=False, defer_init=False):
        if raw or not isinstance(source, str):  # an expression's tree (below), or Python source asked for
            code = compile_source(environment, source, name, filename, raw, defer_init)
            seen = compiled.get()
            if seen is not None and not raw:
                seen.append(code)
            return code
        key = _digest("template", _jinja_settings(environment), repr((name, filename, defer_init)), source)
        code = store.get(key)
        if code is None:
            code = compile_source(environment, source, name, filename, raw, defer_init)
            store.put(key, code)
        return code

    def compile_expression_cached(environment, source, undefined_to_none=True):
        key = _digest("expression", _jinja_settings(environment), source)
        code = store.get(key)
        if code is not None:
            template = environment.template_class.from_code(environment, code, environment.make_globals(None), None)
            return TemplateExpression(template, undefined_to_none)
        token = compiled.set([])
        try:
            expression = compile_expression(environment, source, undefined_to_none)
            seen = compiled.get()
        finally:
            compiled.reset(token)
        if len(seen) == 1:
            store.put(key, seen[0])
        return expression

    environment_class.compile = compile_cached
    environment_class.compile_expression = compile_expression_cached


def _patch_module_common(module, directory):
    if hasattr(module, "recursive_finder") and hasattr(module, "_make_zinfo"):
        module.recursive_finder = cached(module, module.recursive_finder, os.path.join(directory, "payload"))


def _patch_collection_finder(module, directory):
    base = getattr(module, "_AnsibleCollectionPkgLoaderBase", None)
    if base is not None and hasattr(base, "get_code"):
        base.get_code = cached_get_code(base.get_code, os.path.join(directory, "code"))


def _patch_jinja(module, directory):
    environment = getattr(module, "Environment", None)
    if environment is not None and hasattr(environment, "compile_expression"):
        cached_jinja(environment, os.path.join(directory, "jinja"))


PATCHES = {
    "ansible.executor.module_common": _patch_module_common,
    "ansible.utils.collection_loader._collection_finder": _patch_collection_finder,
    "jinja2.environment": _patch_jinja,
}


class _Finder:
    """Patches a module of PATCHES once Python has run it (a meta path finder that only wraps the normal loader)."""

    @staticmethod
    def find_spec(fullname, path=None, target=None):
        patch = PATCHES.get(fullname)
        if patch is None:
            return None
        from importlib.machinery import PathFinder
        spec = PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_patch(module):
            exec_module(module)
            directory = os.environ.get(ENV)
            if directory:
                patch(module, directory)

        spec.loader.exec_module = exec_and_patch
        return spec


def install():
    """Hook the imports of PATCHES when K26_CONTROLLER_CACHE is set (the .pth line calls this at every start)."""
    if os.environ.get(ENV) and not any(isinstance(finder, _Finder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


install()
