"""A tiny HuggingFace tokenizer for the SGLang simulator: one whitespace-separated word is one token.

The simulator counts prompt tokens as words and emits one word per token, so a load generator that counts with
this tokenizer agrees with the server's usage. Written as plain JSON (tokenizers' WordLevel model with a
WhitespaceSplit pre-tokenizer): no tokenizers library needed to make it.
"""

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "roles" / "sglang" / "files"))

from sglang_simulator.serving import WORDS  # noqa: E402

SPECIAL = ("<unk>", "<s>", "</s>")


def write_tokenizer(directory):
    """Write tokenizer.json and tokenizer_config.json into DIRECTORY (created); return it."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    vocab = {}
    for word in SPECIAL + WORDS:
        vocab.setdefault(word, len(vocab))
    tokenizer = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
                 "pre_tokenizer": {"type": "WhitespaceSplit"}, "post_processor": None,
                 "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": False},
                 "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "<unk>"}}
    (directory / "tokenizer.json").write_text(json.dumps(tokenizer))
    (directory / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "<unk>", "bos_token": "<s>", "eos_token": "</s>",
        "model_max_length": 1000000}))
    return directory
