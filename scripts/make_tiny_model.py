"""Make a tiny model real SGLang can serve on a CPU: offline, in seconds, the same bytes every time.

GPT-2 architecture (RoPE architectures need a platform plugin on CPU), 2 layers, hidden size 64, random weights in
bf16; a byte-level BPE tokenizer trained here with the `tokenizers` library on a built-in corpus; a ChatML chat
template. It answers nonsense, quickly: it exists to prove deployment, not language.

Run it with an interpreter that has torch, transformers and tokenizers (the real-SGLang virtualenv of
scripts/setup_sglang_cpu.sh has them):
    .cache/sglang-venv/bin/python scripts/make_tiny_model.py [OUTPUT_DIR]    (default .cache/tiny-model)
"""
import argparse
import json
import sys
from pathlib import Path

VOCAB_SIZE = 512
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "Say hello to the operator: the server is ready, the model is loaded, the key is masked.",
    "One two three four five six seven eight nine ten eleven twelve.",
    "A tiny model answers every question quickly and never well.",
    "system user assistant: what is the capital of France? Paris.",
    "Deploy, verify, roll back; restart only when the configuration changed.",
]


def train_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(CORPUS * 20, trainer=trainer)
    return tokenizer


def save_tokenizer(tokenizer, out):
    from transformers import PreTrainedTokenizerFast

    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token="<|endoftext|>",
        eos_token="<|im_end|>",
        unk_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=SPECIAL_TOKENS[1:],
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    return fast


def save_model(fast, out):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=len(fast),
        n_positions=2048,
        n_embd=64,
        n_layer=2,
        n_head=2,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
    )
    model = GPT2LMHeadModel(config).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", nargs="?", default=str(Path(__file__).resolve().parents[1] / ".cache" / "tiny-model"))
    out = Path(parser.parse_args(argv).output)
    out.mkdir(parents=True, exist_ok=True)
    fast = save_tokenizer(train_tokenizer(), out)
    save_model(fast, out)
    for path in out.iterdir():
        path.chmod(0o644)  # safetensors writes its file 0600; the service account reads it
    files = sorted(p.name for p in out.iterdir())
    print(json.dumps({"model": str(out), "files": files, "vocab_size": len(fast)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
