# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the collection knows about SGLang's options, in one place: their names, the secret ones and how a secret is
masked, the attention backends, which addresses are loopback, and the sglang_service role's option logic (the merge
of its layers, the options it reserves, the problems that stop a configuration and the GPUs a node serves with).

Used by the filters (the sglang_service role's option merge), the modules (preflight rules, the argument check,
readiness) and the tests that hold the simulator to the same facts. Checked against SGLang 0.5.23 by
tests/unit/test_simulator_conformance.py and tests/unit/plugins/filter/test_sglang_options.py.
"""

from __future__ import annotations

import ipaddress
import json
import re
from urllib.parse import urlsplit

# ---------------------------------------------------------------------------------------------------- names


def option_key(name):
    """An option's name as the config file and the rules use it: '--pp_size' / 'pp_size' / 'pp-size' -> 'pp-size'.

    Case is kept: SGLang's flags are lower case, and 'PP-size' is no flag of it.
    """
    return str(name).strip().lstrip("-").replace("_", "-")


def option_keys(options):
    """The mapping with dashed keys; of two spellings of one option the later wins, as on a command line."""
    return {option_key(key): value for key, value in (options or {}).items()}


def as_bool(value):
    """A flag option's value as the collection reads it: true, "true", "yes", "on", 1, ... are on."""
    if isinstance(value, bool):
        return value
    if value is None:
        return False
    if isinstance(value, (int, float)):
        return value != 0
    return str(value).strip().lower() in ("1", "true", "yes", "on", "y")


# ---------------------------------------------------------------------------------------------------- secrets
#: options whose values are secrets (dashed form); SGLang 0.5.23 logs them in clear in its start-up server_args
SECRET_OPTION_KEYS = ("api-key", "admin-api-key", "ssl-keyfile-password")
#: what a secret value is replaced by, wherever the collection shows text that held one
SECRET_MASK = "********"
# An API key is made of URL-unreserved characters only: its repr, JSON and URL-encoded forms are then the key itself,
# so masking the exact string masks every form a process prints it in (a backslash was printed escaped and slipped
# past the mask). 16 of them at least, and not a "-" first: SGLang's config merger hands a config file's values to
# argparse as separate words, and argparse takes "-..." for an option ("--api-key: expected one argument").
API_KEY_RE = re.compile(r"\A[A-Za-z0-9._~][A-Za-z0-9._~-]{15,}\Z")


def api_key_problem(key, variable):
    """Why `key` may not be the API key (None when it may; an empty key is judged elsewhere). Never quotes it."""
    if not key or API_KEY_RE.match(str(key)):
        return None
    return ("%s must be 16 or more letters, digits and - . _ ~, not beginning with - (%d characters given, the key "
            "itself is not shown): another character can reach a log in an escaped form the mask does not know, and "
            "SGLang reads a leading - as an option; e.g. generate one with openssl rand -hex 32"
            % (variable, len(str(key))))


_QUOTED = r"'(?:[^'\\]|\\.)*'" + "|" + r'"(?:[^"\\]|\\.)*"'
_UNDERSCORED = "|".join(re.escape(key.replace("-", "_")) for key in SECRET_OPTION_KEYS)
_DASHED = "|".join(re.escape(key) for key in SECRET_OPTION_KEYS)
# Where a secret's value appears in a log line: SGLang 0.5.23's `server_args={'api_key': '...'}` (a dict's repr;
# JSON alike), a dataclass repr `api_key='...'`, and a flag on a command line `--api-key VALUE`.
SECRET_IN_LOG_PATTERNS = (
    re.compile(r"""(['"](?:%s)['"]\s*:\s*)(%s)""" % (_UNDERSCORED, _QUOTED)),
    re.compile(r"""(\b(?:%s)=)(?!None\b)(%s|[^,\s)]+)""" % (_UNDERSCORED, _QUOTED)),
    re.compile(r"(--(?:%s)[= ])(\S+)" % _DASHED),
)
_SECRET_YAML_LINE_RE = re.compile(r"^\s*[\"']?-{0,2}(%s)[\"']?\s*:\s*(.*?)\s*$"
                                  % "|".join(key.replace("-", "[-_]") for key in SECRET_OPTION_KEYS), re.IGNORECASE)


def _masked(match):
    value = match.group(2)
    quote = value[0] if value[:1] in ("'", '"') else "'"
    return match.group(1) + quote + SECRET_MASK + quote


def model_path_of(options):
    """The model the options name (``model-path``, or its ``model`` alias, in any spelling), or None."""
    return next((value for key, value in (options or {}).items() if option_key(key) in ("model-path", "model")), None)


def draft_model_path_of(options):
    """The speculative draft model's path or Hugging Face id in SGLang's options, or None."""
    return str(option_keys(options).get("speculative-draft-model-path") or "").strip() or None


def without_secrets(options):
    """The options without the secret ones: what may be passed to a module (Ansible logs a module's arguments to the
    target's journal) or shown."""
    return {key: value for key, value in (options or {}).items() if option_key(key) not in SECRET_OPTION_KEYS}


# Every terminal escape sequence: CSI (colours, cursor), OSC (window titles, hyperlinks; ended by BEL or ST), the string
# sequences DCS, SOS, PM and APC (ended by ST), and any other ESC with the character after it.
ESCAPE_RE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[PX^_][^\x1b]*(?:\x1b\\)?|\x1b.?",
                       re.DOTALL)
# what is left of the C0 and C1 control characters (carriage return, backspace, bell ...), but newlines
CONTROL_RE = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")


def printable(text):
    """TEXT as a terminal may show it: no escape sequence and no control character but newlines (a tab is a space).
    What a service writes to its journal reaches the operator's terminal through excerpts: it must not move the
    cursor, rewrite a line (\\r), set the window title or plant a hyperlink there."""
    return CONTROL_RE.sub(lambda match: " " if match.group() == "\t" else "", ESCAPE_RE.sub("", text))


def redact_log_line(text):
    """A log line with the values of secret options replaced by the mask (None stays None)."""
    for pattern in SECRET_IN_LOG_PATTERNS:
        text = pattern.sub(_masked, text)
    return text


def secret_values(options, extra_args=None):
    """Values of secret options in a mapping (any spelling) and in an argv-style list."""
    secrets = [str(value) for key, value in (options or {}).items()
               if option_key(key) in SECRET_OPTION_KEYS and value not in (None, "")]
    args = [str(arg) for arg in (extra_args or [])]
    for i, arg in enumerate(args):
        name, sep, inline = arg.partition("=")
        if arg.startswith("--") and option_key(name) in SECRET_OPTION_KEYS:
            if sep and inline:
                secrets.append(inline)
            elif i + 1 < len(args):
                secrets.append(args[i + 1])
    return secrets


def secret_values_in_text(content):
    """Values of secret options in YAML text (top-level `key: value` lines)."""
    secrets = []
    for line in (content or "").splitlines():
        match = _SECRET_YAML_LINE_RE.match(line)
        if match:
            value = match.group(2).strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                value = value[1:-1]
            if value:
                secrets.append(value)
    return secrets


def redact(data, secrets):
    """Every occurrence of the secrets in strings nested in data, replaced by the mask."""
    secrets = [secret for secret in secrets if secret]
    if not secrets:
        return data
    if isinstance(data, str):
        for secret in secrets:
            data = data.replace(secret, SECRET_MASK)
        return data
    if isinstance(data, dict):
        return {key: redact(value, secrets) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return [redact(value, secrets) for value in data]
    return data


# ---------------------------------------------------------------------------------------------------- backends
#: SGLang 0.5.23's --attention-backend choices (roles/sglang/files/sglang_simulator/sglang_server_options.json, from its parser)
ATTENTION_BACKENDS = (
    "triton", "torch_native", "flex_attention", "dsa", "nsa", "qsa", "dsv4", "compressed", "fa3", "fa4",
    "flashinfer", "llada2_cfg_flashinfer", "flashmla", "trtllm_mla", "cutedsl_mla", "tokenspeed_mla", "trtllm_mha",
    "hpc_ops", "minicpm_flashattn", "minicpm_flashinfer", "aiter", "wave", "intel_amx", "ascend", "intel_xpu",
)
#: what SGLang picks for an MLA model (Kimi K2.x) per compute-capability major: SM120 (RTX PRO 6000 Blackwell)
#: triton, SM100 (B200) trtllm_mla, SM90 (H100/H200) fa3
MLA_DEFAULT_BACKEND = {12: "triton", 10: "trtllm_mla", 9: "fa3"}


def compute_capability_major(compute_capability):
    """12 from '12.0'; None when it is not like that."""
    match = re.match(r"\s*(\d+)", str(compute_capability or ""))
    return int(match.group(1)) if match else None


def default_attention_backend(compute_capability, mla=True):
    """The attention backend SGLang picks for an MLA model on this GPU generation, or '' to let SGLang decide."""
    major = compute_capability_major(compute_capability)
    if major is None or not mla:
        return ""
    return MLA_DEFAULT_BACKEND.get(major, "triton" if major >= 8 else "")


# ---------------------------------------------------------------------------------------------------- loading
#: SGLang 0.5.23's threads per rank for multithreaded weight loading (srt/model_loader/loader.py DEFAULT_NUM_THREADS)
SGLANG_LOAD_THREADS = 8


class LoadThreadsError(ValueError):
    pass


def load_threads(setting, profile_choice, cpus, gpus):
    """Threads each rank loads its weights with: ``setting`` (sglang_service_load_threads: "auto", 0 for SGLang's
    own choice, or a number), else the profile's choice ("cores": the host's ``cpus`` shared by its ``gpus`` ranks,
    never fewer than SGLang's default; 0: SGLang's own). 0 means: leave model-loader-extra-config to SGLang."""
    if str(setting).strip().lower() != "auto":
        if isinstance(setting, bool) or not str(setting).strip().isdigit():
            raise LoadThreadsError("sglang_service_load_threads must be auto or a whole number >= 0, not %r"
                                   % (setting,))
        return int(str(setting).strip())
    if profile_choice == "cores":
        return max(SGLANG_LOAD_THREADS, int(cpus or 0) // max(int(gpus or 1), 1))
    return int(profile_choice or 0)


def loader_extra_config(threads):
    """The value of model-loader-extra-config for ``threads`` (None: leave it to SGLang). Multithreaded loading is
    said explicitly: SGLang 0.5.23 turns it off when checkpoint prefetching is on unless the config names it."""
    if not threads:
        return None
    return json.dumps({"enable_multithread_load": True, "num_threads": int(threads)}, sort_keys=True)


# ---------------------------------------------------------------------------------------------------- addresses
#: bind addresses that mean "every interface": clients on the host reach them through loopback
ALL_INTERFACES = ("0.0.0.0", "::", "")


def is_loopback_host(host):
    """True when a server bound to `host` is reachable from this machine only."""
    host = str(host or "").strip("[]").lower()
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name other than localhost: assume reachable from outside


def open_endpoint_problem(host, api_key_set, allow_open, key_variable, allow_variable):
    """Why a server bound to `host` without a key may not start (None when it may): reachable from other machines
    with no key, unless the operator accepted an open endpoint."""
    if is_loopback_host(host) or api_key_set or allow_open:
        return None
    return ("host %s is reachable from other machines but no API key is set: set %s (or %s: true to accept an "
            "open endpoint)" % (host, key_variable, allow_variable))


def is_loopback_url(url):
    """Whether the URL's host is a loopback address (no proxy is used for those)."""
    return is_loopback_host(urlsplit(str(url)).hostname or "")


def client_host(bind_host):
    """Where a client on the same machine reaches a server bound to `bind_host`."""
    return "127.0.0.1" if str(bind_host or "").strip("[]") in ALL_INTERFACES else str(bind_host)


# ---------------------------------------------------------------------------------------------------- the role's options
class OptionsError(ValueError):
    """Options that cannot be merged or read (the filters raise it as Ansible's filter error)."""


# Options that must not be set through the free-form mapping, with what to use instead: the role's readiness
# gate, status and rollback read the structured variables, and secrets must stay out of printed mappings.
RESERVED_OPTIONS = dict((key, "a secret this role does not manage (keep it out of printed options)")
                        for key in SECRET_OPTION_KEYS)
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


def valid_option_key(name):
    """option_key, refusing what is no option name."""
    if not isinstance(name, str) or not name.strip("-_ "):
        raise OptionsError("SGLang option names must be non-empty strings, got %r" % (name,))
    return option_key(name)


def merge_options(base, *layers):
    """Merge option mappings left to right; later layers win, None deletes.

    `base` holds the options the role derives from its structured variables; the later layers (profile, user)
    may not set the reserved ones.
    """
    merged = dict((valid_option_key(name), value) for name, value in (base or {}).items() if value is not None)
    for layer in layers:
        if layer is None:
            continue
        if not isinstance(layer, dict):
            raise OptionsError("SGLang options must be a mapping, got %s" % type(layer).__name__)
        for name, value in layer.items():
            key = valid_option_key(name)
            if key in RESERVED_OPTIONS:
                # Refused here, before the merged mapping (which would carry a secret) can be shown anywhere.
                raise OptionsError("SGLang option '%s' cannot be set in the options: use %s instead"
                                   % (key, RESERVED_OPTIONS[key]))
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = value
    return dict(sorted(merged.items()))


def gpus_per_node(tp, pp, nnodes):
    """The GPUs each node of an instance serves with, tp-size x pp-size / nnodes; None where nnodes is below 1 or
    does not divide tp-size x pp-size (SGLang asserts (tp_size * pp_size) % nnodes == 0 and does not start)."""
    if nnodes < 1 or (tp * pp) % nnodes:
        return None
    return tp * pp // nnodes


def _int(options, key, default):
    value = options.get(key, default)
    try:
        return int(value)
    except (TypeError, ValueError):
        raise OptionsError("SGLang option %s must be an integer, got %r" % (key, value))


# Speculative algorithms whose draft is a model of its own (SGLang 0.5.23, srt/arg_groups/speculative_hook.py;
# Kimi K2.6 carries no NEXTN layers of its own to draft with).
DRAFT_MODEL_ALGORITHMS = ("EAGLE", "EAGLE3", "DFLASH", "STANDALONE")


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
        per_node = gpus_per_node(tp, pp, nnodes)
        if gpus % pp != 0 and nnodes == 1:
            problems.append("pp-size %d does not divide the %d GPUs: choose a pp-size among %s"
                            % (pp, gpus, [d for d in range(1, gpus + 1) if gpus % d == 0]))
        if per_node is None:
            problems.append("tp-size %d x pp-size %d = %d is not divisible by nnodes %d (SGLang asserts this)"
                            % (tp, pp, tp * pp, nnodes))
        elif per_node > gpus:
            problems.append("tp-size %d x pp-size %d needs %d GPUs per node but the node has %d"
                            % (tp, pp, per_node, gpus))
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
    attn_dp = _int(options, "attn-dp-size", 1)
    if attn_dp < 1 or (tp >= 1 and tp % attn_dp):
        # srt/arg_groups/parallel_hook.py asserts tp_size % attn_dp_size == 0 when SGLang resolves its options
        problems.append("attn-dp-size %d does not divide tp-size %d (SGLang asserts it at start): choose one of %s"
                        % (attn_dp, tp, [d for d in range(1, tp + 1) if tp % d == 0]))
    algorithm = str(options.get("speculative-algorithm") or "").upper()
    if algorithm in DRAFT_MODEL_ALGORITHMS and not str(options.get("speculative-draft-model-path") or "").strip():
        problems.append("speculative-algorithm %s needs a draft model: set sglang_service_speculative_draft_model_path "
                        "(the kimi_k26_latency profile's draft is lightseekorg/kimi-k2.6-eagle3.1-mla; the "
                        "sglang_model role stages and verifies it)" % algorithm)
    workers = _int(options, "tokenizer-worker-num", 1)
    if workers > 1:
        # srt/entrypoints/http_server.py: "API key is not supported in multi-tokenizer mode", asserted at start,
        # and no auth of its own: with a key it fails after the change is written, without one nothing guards it
        problems.append("tokenizer-worker-num %d: SGLang 0.5.23 serves several tokenizer workers only without an API "
                        "key (it asserts so at start) and then with no authentication at all: keep it at 1" % workers)
    open_endpoint = open_endpoint_problem(options.get("host", "127.0.0.1"), api_key_set, allow_public_without_key,
                                          "sglang_service_api_key", "sglang_service_allow_public_without_key")
    return problems + ([open_endpoint] if open_endpoint else [])
