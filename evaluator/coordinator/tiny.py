"""A tiny random Qwen3 checkpoint for tests and the demo, read by the same loading code.

Small enough to run in milliseconds on a CPU, but not trivial: 4 layers, grouped-query
attention with a key/value rank below the hidden size, a byte-level BPE tokenizer
trained on a fixed routing-flavoured corpus, and an EOS token. Its attention is flat and
its MLPs are silent, so the read position holds a fixed mix of the transcript's token
embeddings: a bag of its words, which a linear head can route by, as it can by a trained
encoder's features. Random MLPs would scramble those words past what a linear head can
read (a fit of the category lookup's choices on such features stayed 6 points below the
lookup on held-out rows). The SVF layer's value and output scales still reweigh the mix.
"""

from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from evaluator.coordinator.encoder import random_model, save_checkpoint
from evaluator.rules import BENCHMARKS, OFFICIAL, ROLES

EOS_TOKEN = "<|endoftext|>"
TOKENIZER_VOCAB = 512
TINY_CONFIG = {
    "hidden_size": 128,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "intermediate_size": 128,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": True,
    # larger than the usual 0.02 so each layer, the SVF one included, visibly moves h
    "initializer_range": 0.1,
}
# Qwen3 normalises queries and keys per head, so q_norm's gain alone sets how peaked the
# attention is; random sharp attention reads a few arbitrary tokens, flat attention (0) all.
ATTENTION_GAIN = 0.0
MLP_GAIN = 0.0  # the MLPs' output projections: 0 keeps the words apart (see above)

_CORPUS = (
    "QUERY:\nWhat is the value of $x$ if $3x + 5 = 20$? Put the final answer in \\boxed{}.",
    "QUERY:\nWhich of the following is a prime number?\nA. 21\nB. 27\nC. 29\nD. 33\nAnswer: C",
    "QUERY:\nWrite a Python function that returns the sum of a list.\n```python\ndef solve(xs):\n"
    "    return sum(xs)\n```",
    "The answer is 42. Let me verify each step of the derivation carefully.",
    "VERDICT: ACCEPT\nVERDICT: REVISE\nThe plan: decompose the problem, then check the result.",
    "0 1 2 3 4 5 6 7 8 9 10 100 1000 \\frac{1}{2} \\sqrt{3} \\pi + - * / = ( ) [ ] { }",
    "the of and to in is that for it as with was on be by this are an or from at which",
)


def build_tokenizer(vocab_size: int = TOKENIZER_VOCAB) -> Tokenizer:
    """A byte-level BPE tokenizer (any text encodes), trained deterministically."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    corpus = [*_CORPUS, OFFICIAL.head_input_suffix, *ROLES, *BENCHMARKS, *OFFICIAL.pool_names]
    corpus += [f"[Turn {k} | {role} | {model}]" for k in range(1, OFFICIAL.max_turns + 1)
               for role in ROLES for model in OFFICIAL.pool_names]
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOS_TOKEN],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tokenizer.train_from_iterator(corpus * 4, trainer)
    return tokenizer


def make_tiny(out_dir: str | Path, seed: int = 0, hidden_size: int | None = None) -> Path:
    """Write a tiny random Qwen3 (safetensors) and its tokenizer; deterministic for a seed.
    `hidden_size` widens the features (the real encoder's are 1,024 wide), to measure what a
    head of that width can fit; the layers stay tiny."""
    tokenizer = build_tokenizer()
    eos_id = tokenizer.token_to_id(EOS_TOKEN)
    width = {} if hidden_size is None else {"hidden_size": hidden_size}
    config = {**TINY_CONFIG, **width, "vocab_size": tokenizer.get_vocab_size(),
              "eos_token_id": eos_id, "pad_token_id": eos_id, "bos_token_id": None}
    model = random_model(config, seed)
    for layer in model.model.layers:
        layer.self_attn.q_norm.weight.data.fill_(ATTENTION_GAIN)
        layer.mlp.down_proj.weight.data.mul_(MLP_GAIN)
    return save_checkpoint(out_dir, model, tokenizer, EOS_TOKEN)
