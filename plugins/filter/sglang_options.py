# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters that turn the sglang_service role's structured variables into SGLang's option mapping.

The mapping is what `python -m sglang.launch_server --config FILE` reads: keys are flag names
without the leading dashes. Layers are merged in order (role defaults, model profile, the user's
overrides); a value of None removes the option. The logic is module_utils/sglang_options's (its one home, which the
preflight rules read too); these filters only say its errors as Ansible's.
"""

import functools

from ansible_collections.k26.deploy.plugins.module_utils import sglang_deepgemm, sglang_layout
from ansible_collections.k26.deploy.plugins.module_utils import sglang_options as options_knowledge
from ansible_collections.k26.deploy.plugins.plugin_utils.k26_bad_input import BadInputError
from ansible_collections.k26.deploy.plugins.module_utils.sglang_options import (
    api_key_problem,
    client_host,
    default_attention_backend,
    redact_log_line,
)


def _filter(function):
    """``function`` (module_utils/sglang_options, the one home of the option logic) as a filter: its OptionsError
    is Ansible's filter error, marked as bad input (BadInputError)."""
    @functools.wraps(function)
    def run(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except options_knowledge.OptionsError as exc:
            raise BadInputError(str(exc)) from None
    return run


merge_options = _filter(options_knowledge.merge_options)
option_problems = _filter(options_knowledge.option_problems)


def attention_backend_for(compute_capability, mla=True):
    """The attention backend SGLang picks for an MLA model on this GPU generation, or '' to let SGLang decide."""
    if compute_capability and options_knowledge.compute_capability_major(compute_capability) is None:
        raise BadInputError("compute capability %r is not like '12.0'" % (compute_capability,))
    return default_attention_backend(compute_capability, mla)


def loader_config(setting, profile_choice, cpus, gpus):
    """model-loader-extra-config for the threads module_utils/sglang_options.load_threads chooses (None: SGLang's)."""
    try:
        return options_knowledge.loader_extra_config(
            options_knowledge.load_threads(setting, profile_choice, cpus, gpus))
    except options_knowledge.LoadThreadsError as exc:
        raise BadInputError(str(exc))


def redact_log_lines(lines, secrets=()):
    """Log lines with the values of every secret option (SGLang's server_args line, flags) and the given secrets
    masked."""
    return options_knowledge.redact([redact_log_line(str(line)) for line in lines or []], list(secrets or []))


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
        raise BadInputError("sglang_layout: tp-size and pp-size must be whole numbers or 'auto' (%s)" % error)


def cache_env_for(cache_dir, sglang_version, compute_capabilities):
    """The service's compile-cache environment: every JIT cache under cache_dir/sglang-VERSION-ARCH."""
    try:
        directory = sglang_deepgemm.cache_release_dir(cache_dir, sglang_version, compute_capabilities)
        return sglang_deepgemm.cache_env(directory)
    except ValueError as exc:
        raise BadInputError("sglang_cache_env: %s" % exc) from None


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
