"""Filters that turn the sglang_service role's structured variables into SGLang's option mapping.

The mapping is what `python -m sglang.launch_server --config FILE` reads: keys are flag names
without the leading dashes. Layers are merged in order (role defaults, model profile, the user's
overrides); a value of None removes the option.
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.k26.deploy.plugins.module_utils import sglang_deepgemm, sglang_layout
from ansible_collections.k26.deploy.plugins.module_utils import sglang_options as options_knowledge
from ansible_collections.k26.deploy.plugins.module_utils.sglang_options import (
    ATTENTION_BACKENDS,
    SECRET_OPTION_KEYS,
    api_key_problem,
    client_host,
    default_attention_backend,
    open_endpoint_problem,
    redact_log_line,
)

# Options that must not be set through the free-form mapping, with what to use instead: the role's readiness
# gate, status and rollback read the structured variables, and secrets must stay out of printed mappings.
RESERVED_OPTIONS = {key: "a secret this role does not manage (keep it out of printed options)"
                    for key in SECRET_OPTION_KEYS}
RESERVED_OPTIONS.update({
    "api-key": "sglang_service_api_key",
    "config": "the role (it owns the config file)",
    "model-path": "sglang_service_model_path",
    "served-model-name": "sglang_service_served_model_name",
    "host": "sglang_service_host",
    "port": "sglang_service_port",
    "tp-size": "sglang_service_tp_size",
    "pp-size": "sglang_service_pp_size",
    "ssl-certfile": "sglang_service_tls_cert",
    "ssl-keyfile": "sglang_service_tls_key",
})


def option_key(name):
    """`--pp_size` / `pp_size` / `pp-size` -> `pp-size`, refusing what is no option name."""
    if not isinstance(name, str) or not name.strip("-_ "):
        raise AnsibleFilterError("SGLang option names must be non-empty strings, got %r" % (name,))
    return options_knowledge.option_key(name)


def merge_options(base, *layers):
    """Merge option mappings left to right; later layers win, None deletes.

    `base` holds the options the role derives from its structured variables; the later layers (profile, user)
    may not set the reserved ones.
    """
    merged = {option_key(name): value for name, value in (base or {}).items() if value is not None}
    for layer in layers:
        if layer is None:
            continue
        if not isinstance(layer, dict):
            raise AnsibleFilterError("SGLang options must be a mapping, got %s" % type(layer).__name__)
        for name, value in layer.items():
            key = option_key(name)
            if key in RESERVED_OPTIONS:
                # Refused here, before the merged mapping (which would carry a secret) can be shown anywhere.
                raise AnsibleFilterError("SGLang option '%s' cannot be set in the options: use %s instead"
                                         % (key, RESERVED_OPTIONS[key]))
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = value
    return dict(sorted(merged.items()))


def attention_backend_for(compute_capability, mla=True):
    """The attention backend SGLang picks for an MLA model on this GPU generation, or '' to let SGLang decide."""
    if compute_capability and options_knowledge.compute_capability_major(compute_capability) is None:
        raise AnsibleFilterError("compute capability %r is not like '12.0'" % (compute_capability,))
    return default_attention_backend(compute_capability, mla)


def loader_config(setting, profile_choice, cpus, gpus):
    """model-loader-extra-config for the threads module_utils/sglang_options.load_threads chooses (None: SGLang's)."""
    try:
        return options_knowledge.loader_extra_config(
            options_knowledge.load_threads(setting, profile_choice, cpus, gpus))
    except options_knowledge.LoadThreadsError as exc:
        raise AnsibleFilterError(str(exc))


def redact_log_lines(lines, secrets=()):
    """Log lines with the values of every secret option (SGLang's server_args line, flags) and the given secrets
    masked."""
    return options_knowledge.redact([redact_log_line(str(line)) for line in lines or []], list(secrets or []))


def _int(options, key, default):
    value = options.get(key, default)
    try:
        return int(value)
    except (TypeError, ValueError):
        raise AnsibleFilterError("SGLang option %s must be an integer, got %r" % (key, value))


def option_problems(options, gpu_count, api_key_set=False, allow_public_without_key=False):
    """Every reason the effective options cannot work, as messages that say what to change. Empty = fine."""
    problems = []
    model_path = options.get("model-path")
    if not model_path or not str(model_path).strip():
        problems.append("no model path: set sglang_service_model_path to the model directory (or hub id)")
    port = _int(options, "port", 30000)
    if not 1 <= port <= 65535:
        problems.append("port %d is out of range: choose 1-65535" % port)
    tp, pp, nnodes = _int(options, "tp-size", 1), _int(options, "pp-size", 1), _int(options, "nnodes", 1)
    for key, value in (("tp-size", tp), ("pp-size", pp), ("nnodes", nnodes)):
        if value < 1:
            problems.append("%s must be >= 1, got %d" % (key, value))
    gpus = int(gpu_count)
    if gpus < 1:
        problems.append("sglang_service_gpu_count must be >= 1 (GPUs per node the server uses), got %d" % gpus)
    elif tp >= 1 and pp >= 1 and nnodes >= 1:
        per_node = tp * pp / nnodes
        if gpus % pp != 0 and nnodes == 1:
            problems.append("pp-size %d does not divide the %d GPUs: choose a pp-size among %s"
                            % (pp, gpus, [d for d in range(1, gpus + 1) if gpus % d == 0]))
        if (tp * pp) % nnodes != 0:
            problems.append("tp-size %d x pp-size %d = %d is not divisible by nnodes %d (SGLang asserts this)"
                            % (tp, pp, tp * pp, nnodes))
        elif per_node > gpus:
            problems.append("tp-size %d x pp-size %d needs %d GPUs per node but the node has %d"
                            % (tp, pp, int(per_node), gpus))
    fraction = options.get("mem-fraction-static")
    if fraction is not None:
        try:
            fraction = float(fraction)
        except (TypeError, ValueError):
            fraction = -1.0
        if not 0.0 < fraction < 1.0:
            problems.append("mem-fraction-static %s is not a fraction: choose a value between 0 and 1 (e.g. 0.88)"
                            % options.get("mem-fraction-static"))
    backend = options.get("attention-backend")
    if backend and backend not in ATTENTION_BACKENDS:
        problems.append("unknown attention backend '%s': choose one of %s" % (backend, ", ".join(ATTENTION_BACKENDS)))
    open_endpoint = open_endpoint_problem(options.get("host", "127.0.0.1"), api_key_set, allow_public_without_key,
                                          "sglang_service_api_key", "sglang_service_allow_public_without_key")
    return problems + ([open_endpoint] if open_endpoint else [])


def key_problems(key, variable):
    """[why KEY may not be the API key] or [] (the key is never quoted)."""
    problem = api_key_problem(key, variable)
    return [problem] if problem else []


def layout_for(gpu_facts, gpus, nnodes=1, tp=sglang_layout.AUTO, pp=sglang_layout.AUTO):
    """The layout (tp_size, pp_size, source, interconnect, reason) for a node's nvidia_gpu facts: tp/pp as the
    inventory set them, or chosen from the facts' topology where they are "auto"."""
    try:
        return sglang_layout.choose((gpu_facts or {}).get("topology"), gpus, nnodes, tp, pp)
    except (TypeError, ValueError) as error:
        raise AnsibleFilterError("sglang_layout: tp-size and pp-size must be whole numbers or 'auto' (%s)" % error)


def cache_env_for(cache_dir, sglang_version, compute_capabilities):
    """The service's compile-cache environment: every JIT cache under cache_dir/sglang-VERSION-ARCH."""
    try:
        directory = sglang_deepgemm.cache_release_dir(cache_dir, sglang_version, compute_capabilities)
        return sglang_deepgemm.cache_env(directory)
    except ValueError as exc:
        raise AnsibleFilterError("sglang_cache_env: %s" % exc) from None


class FilterModule:
    def filters(self):
        return {
            "sglang_layout": layout_for,
            "sglang_api_key_problems": key_problems,
            "sglang_merge_options": merge_options,
            "sglang_default_attention_backend": attention_backend_for,
            "sglang_option_problems": option_problems,
            "sglang_client_host": client_host,
            "sglang_loader_extra_config": loader_config,
            "sglang_redact_log_lines": redact_log_lines,
            "sglang_without_secrets": options_knowledge.without_secrets,
            "sglang_cache_env": cache_env_for,
        }
