"""A tiny Qwen3 checkpoint for tests and the demo, read by the same loading code.

Shaped like Qwen3-0.6B in proportion (4 layers, grouped-query attention, a byte-level BPE
tokenizer, an EOS token) and fast on a CPU. Its tokenizer and token embeddings are learned
from the demo corpus's public questions (each token's loadings on the corpus's main word
directions), attention is flat and the MLPs silent, so the SVF layer writes the mean of the
transcript's token embeddings into the read position: a linear head reads the question's
words, as a trained encoder's features carry its meaning.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from evaluator.benchmarks.corpus import load_corpus
from evaluator.coordinator.encoder import random_model, save_checkpoint
from evaluator.rules import BENCHMARKS, OFFICIAL, ROLES

EOS_TOKEN = "<|endoftext|>"
TOKENIZER_VOCAB = 4096
TINY_CONFIG = {
    "hidden_size": 128,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,  # keys and values as wide as the hidden state, as in Qwen3-0.6B
    "intermediate_size": 128,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": True,
    "initializer_range": 0.1,
}
# Qwen3 normalises queries and keys per head, so q_norm's gain alone sets how peaked the
# attention is; random sharp attention reads a few arbitrary tokens, flat attention (0) all.
ATTENTION_GAIN = 0.0
MLP_GAIN = 0.0  # the MLPs' output projections: 0 keeps the words apart (see above)
RANDOM_SHARE = 0.1  # of each token embedding: its own random direction, so none is zero

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


def corpus_questions() -> list[str]:
    """The bundled demo corpus's public questions, which the tiny encoder learns its words from."""
    return [entry.item.prompt for entry in load_corpus(OFFICIAL)]


def build_tokenizer(questions: list[str], vocab_size: int = TOKENIZER_VOCAB) -> Tokenizer:
    """A byte-level BPE tokenizer (any text encodes), trained deterministically on the
    coordinator's own strings and `questions`."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    corpus = [*_CORPUS, OFFICIAL.head_input_suffix, *ROLES, *BENCHMARKS, *OFFICIAL.pool_names]
    corpus += [f"[Turn {k} | {role} | {model}]" for k in range(1, OFFICIAL.max_turns + 1)
               for role in ROLES for model in OFFICIAL.pool_names]
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOS_TOKEN],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tokenizer.train_from_iterator(corpus * 4 + questions, trainer)
    return tokenizer


def word_embeddings(tokenizer: Tokenizer, questions: list[str], width: int,
                    rng: np.random.Generator) -> np.ndarray:
    """(vocabulary, width) unit-RMS rows: each token's loadings on the questions' `width`
    leading TF-IDF singular directions, plus a random share (all of a token no question
    uses, and the directions beyond the questions' count)."""
    vocabulary = tokenizer.get_vocab_size()
    counts = np.zeros((len(questions), vocabulary))
    for row, encoding in enumerate(tokenizer.encode_batch(questions)):
        np.add.at(counts[row], encoding.ids, 1.0)
    idf = np.log((1 + len(questions)) / (1 + (counts > 0).sum(axis=0))) + 1
    weighted = counts * idf
    weighted /= np.linalg.norm(weighted, axis=1, keepdims=True)
    directions = _right_singular_vectors(weighted)[:width]
    loadings = np.zeros((vocabulary, width))
    loadings[:, :len(directions)] = directions.T
    return (1 - RANDOM_SHARE) * _unit_rms(loadings) + RANDOM_SHARE * rng.normal(size=loadings.shape)


_DIRECTIONS: dict[str, np.ndarray] = {}


def _right_singular_vectors(matrix: np.ndarray) -> np.ndarray:
    """The matrix's right singular vectors (rows, largest singular value first), decomposed
    once per process: every seed and width of one corpus reads the same ones.

    A wide matrix (questions × vocabulary) is decomposed through its small Gram matrix: the
    eigenvectors of A·Aᵀ give the left vectors, and Aᵀ·u / s the right ones, twenty times
    faster than an SVD of A. A singular vector's sign is arbitrary, so each is signed to make
    its largest entry positive: the same directions whichever routine found them."""
    key = f"{matrix.shape}:{hashlib.sha256(matrix.tobytes()).hexdigest()}"
    if key not in _DIRECTIONS:
        values, vectors = np.linalg.eigh(matrix @ matrix.T)
        order = np.argsort(values)[::-1]
        values, vectors = values[order], vectors[:, order]
        kept = values > values[0] * 1e-12  # beyond the rank: no direction
        rows = vectors[:, kept].T @ matrix / np.sqrt(values[kept])[:, None]
        largest = rows[np.arange(len(rows)), np.abs(rows).argmax(axis=1)]
        _DIRECTIONS[key] = rows * np.sign(largest)[:, None]
    return _DIRECTIONS[key]


def _unit_rms(rows: np.ndarray) -> np.ndarray:
    rms = np.sqrt((rows ** 2).mean(axis=1, keepdims=True))
    return np.divide(rows, rms, out=np.zeros_like(rows), where=rms > 0)


def make_tiny(out_dir: str | Path, seed: int = 0, hidden_size: int | None = None) -> Path:
    """Write a tiny Qwen3 (safetensors) and its tokenizer; deterministic for a seed.
    `hidden_size` widens the features (the real encoder's are 1,024 wide), to measure what a
    head of that width can fit; the layers stay tiny."""
    questions = corpus_questions()
    tokenizer = build_tokenizer(questions)
    eos_id = tokenizer.token_to_id(EOS_TOKEN)
    width = hidden_size or TINY_CONFIG["hidden_size"]
    # keys and values as wide as the features; RoPE wants an even head_dim (an odd width: less)
    heads = {"hidden_size": width,
             "head_dim": 2 * (width // (2 * TINY_CONFIG["num_key_value_heads"]))}
    config = {**TINY_CONFIG, **heads, "vocab_size": tokenizer.get_vocab_size(),
              "eos_token_id": eos_id, "pad_token_id": eos_id, "bos_token_id": None}
    model = random_model(config, seed)
    rng = np.random.default_rng(seed)
    embeddings = word_embeddings(tokenizer, questions, width, rng) * config["initializer_range"]
    model.model.embed_tokens.weight.data.copy_(torch.from_numpy(embeddings))
    svf_layer = config["num_hidden_layers"] - 2  # the layer encoder_overrides names
    for index, layer in enumerate(model.model.layers):
        layer.self_attn.q_norm.weight.data.fill_(ATTENTION_GAIN)
        layer.mlp.down_proj.weight.data.mul_(MLP_GAIN)
        if index == svf_layer:
            _orthogonal_attention(layer.self_attn, config, rng)
        else:
            layer.self_attn.o_proj.weight.data.zero_()
    return save_checkpoint(out_dir, model, tokenizer, EOS_TOKEN)


def _orthogonal_attention(attention: torch.nn.Module, config: dict, rng: np.random.Generator
                          ) -> None:
    """Value and output projections whose product is a random rotation: the mean of the
    normalised embeddings reaches the read position with no direction shrunk. A key/value
    head's value is read by `repeat` query heads, each writing its share through the same
    columns of the rotation."""
    width, head_dim = config["hidden_size"], config["head_dim"]
    repeat = config["num_attention_heads"] // config["num_key_value_heads"]
    values = config["num_key_value_heads"] * head_dim  # the width, unless it is not a multiple of 4
    value, output = (np.linalg.qr(rng.normal(size=(width, width)))[0] for _ in range(2))
    columns = [output[:, (head // repeat) * head_dim:(head // repeat + 1) * head_dim] / repeat
               for head in range(config["num_attention_heads"])]
    attention.v_proj.weight.data.copy_(torch.from_numpy(value[:values]))
    attention.o_proj.weight.data.copy_(torch.from_numpy(np.concatenate(columns, axis=1)))
