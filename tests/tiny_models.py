"""Tiny random-weight models of every supported family, for tests.

Each builder writes an ordinary transformers folder (config, safetensors weights, tokenizer or image
processor config) built offline from a config, so tests go through the real loading code
(`rollout_core.load_model(folder)`). Weights are seeded: the same folder every time.
Hidden size 32, 2-3 layers, 2-4 heads: a forward pass takes milliseconds.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import torch
import transformers as tf
from tokenizers import pre_tokenizers

WORDS = (
    "the a movie film was is good great bad terrible not very and but i it loved hated boring fun plot acting "
    "cat sat on mat dog ran"
).split()
LETTERS = "abcdefghijklmnopqrstuvwxyz"
TEXT_LABELS = ("NEGATIVE", "NEUTRAL", "POSITIVE")
IMAGE_LABELS = ("circle", "square", "triangle")
IMAGE_SIZE = 32
PATCH = 8
MAX_LENGTH = 64


# ----------------------------------------------------------------------------------------------
# Tokenizers, built offline from small vocabularies


def wordpiece_tokenizer(max_length: int = MAX_LENGTH) -> tf.PreTrainedTokenizerBase:
    """BERT WordPiece tokenizer: whole words, single letters, ##letters, punctuation."""
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, *LETTERS, *(f"##{c}" for c in LETTERS),
             *".,!?'<>/\"-"]
    return tf.BertTokenizer(vocab={t: i for i, t in enumerate(dict.fromkeys(vocab))}, model_max_length=max_length)


def _byte_level_vocab(specials: list[str]) -> tuple[dict[str, int], list[tuple[str, str]]]:
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    merges = [("Ġ", c) for c in LETTERS] + [("h", "e"), ("Ġt", "he")]
    tokens = specials + alphabet + ["".join(m) for m in merges]
    return {t: i for i, t in enumerate(dict.fromkeys(tokens))}, merges


def roberta_tokenizer(cls: type = tf.RobertaTokenizer) -> tf.PreTrainedTokenizerBase:
    """Byte-level BPE with <s> ... </s> (RoBERTa and BART)."""
    vocab, merges = _byte_level_vocab(["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    return cls(vocab=vocab, merges=merges, model_max_length=MAX_LENGTH)


def gpt2_tokenizer() -> tf.PreTrainedTokenizerBase:
    """Byte-level BPE without special tokens around the text (GPT-2); <|endoftext|> only."""
    vocab, merges = _byte_level_vocab(["<|endoftext|>"])
    return tf.GPT2Tokenizer(vocab=vocab, merges=merges, model_max_length=MAX_LENGTH)


def t5_tokenizer() -> tf.PreTrainedTokenizerBase:
    """Unigram (SentencePiece-style) vocabulary with </s> appended (T5)."""
    pieces = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), ("▁", -2.0)]
    pieces += [(f"▁{w}", -1.0) for w in WORDS] + [(c, -3.0) for c in LETTERS + ".,!?"]
    return tf.T5Tokenizer(vocab=pieces, extra_ids=0, model_max_length=MAX_LENGTH)


def llama_tokenizer() -> tf.PreTrainedTokenizerBase:
    """SentencePiece-style BPE with a <s> prefix (Llama)."""
    tokens = ["<unk>", "<s>", "</s>", "▁", *(f"▁{w}" for w in WORDS), *LETTERS]
    vocab = {t: i for i, t in enumerate(dict.fromkeys(tokens))}
    return tf.LlamaTokenizer(vocab=vocab, merges=[], model_max_length=MAX_LENGTH, add_bos_token=True)


def image_processor(height: int = IMAGE_SIZE, width: int = IMAGE_SIZE) -> tf.ViTImageProcessor:
    """Resize to height x width, rescale to [0, 1], normalise with mean 0.5 / std 0.5 (the slow processor)."""
    return tf.ViTImageProcessor(size={"height": height, "width": width}, image_mean=[0.5] * 3, image_std=[0.5] * 3)


# ----------------------------------------------------------------------------------------------
# Configs and model classes per family

_TEXT = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
             max_position_embeddings=MAX_LENGTH + 2)
_LABELS = dict(id2label=dict(enumerate(TEXT_LABELS)), label2id={v: k for k, v in enumerate(TEXT_LABELS)})
_IMAGE = dict(image_size=IMAGE_SIZE, patch_size=PATCH, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
              intermediate_size=64, num_channels=3)
_IMAGE_LABELS = dict(id2label=dict(enumerate(IMAGE_LABELS)), label2id={v: k for k, v in enumerate(IMAGE_LABELS)})


def _vocab_size(tokenizer: tf.PreTrainedTokenizerBase) -> int:
    return len(tokenizer)


Builder = Callable[[], tuple[torch.nn.Module, object]]


def _bert(cls: type, labels: bool, layers: int = 2, max_length: int = MAX_LENGTH) -> Builder:
    def build():
        tok = wordpiece_tokenizer(max_length)
        config = tf.BertConfig(vocab_size=_vocab_size(tok), **{**_TEXT, "num_hidden_layers": layers,
                                                                "max_position_embeddings": max_length + 2},
                               **(_LABELS if labels else {}))
        return cls(config), tok
    return build


def _distilbert():
    tok = wordpiece_tokenizer()
    config = tf.DistilBertConfig(vocab_size=_vocab_size(tok), dim=32, n_layers=2, n_heads=2, hidden_dim=64,
                                 max_position_embeddings=MAX_LENGTH, **_LABELS)
    return tf.DistilBertForSequenceClassification(config), tok


def _roberta(cls: type, labels: bool) -> Builder:
    def build():
        tok = roberta_tokenizer()
        config = tf.RobertaConfig(vocab_size=_vocab_size(tok), pad_token_id=tok.pad_token_id,
                                  bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                                  **{**_TEXT, "num_hidden_layers": 3, "max_position_embeddings": MAX_LENGTH + 2},
                                  **(_LABELS if labels else {}))
        return cls(config), tok
    return build


def _gpt2():
    tok = gpt2_tokenizer()
    config = tf.GPT2Config(vocab_size=_vocab_size(tok), n_embd=32, n_layer=2, n_head=2, n_positions=MAX_LENGTH,
                           bos_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id)
    return tf.GPT2LMHeadModel(config), tok


def _llama():
    tok = llama_tokenizer()
    config = tf.LlamaConfig(vocab_size=_vocab_size(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                            num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                            max_position_embeddings=MAX_LENGTH, bos_token_id=1, eos_token_id=2, pad_token_id=None)
    return tf.LlamaForCausalLM(config), tok


def _t5():
    tok = t5_tokenizer()
    config = tf.T5Config(vocab_size=_vocab_size(tok), d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2,
                         num_heads=4, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                         decoder_start_token_id=tok.pad_token_id)
    return tf.T5ForConditionalGeneration(config), tok


def _bart():
    tok = roberta_tokenizer(tf.BartTokenizer)
    config = tf.BartConfig(vocab_size=_vocab_size(tok), d_model=32, encoder_layers=2, decoder_layers=2,
                           encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
                           decoder_ffn_dim=64, max_position_embeddings=MAX_LENGTH, pad_token_id=tok.pad_token_id,
                           bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                           decoder_start_token_id=tok.eos_token_id, forced_eos_token_id=tok.eos_token_id)
    return tf.BartForConditionalGeneration(config), tok


def _image(cls: type, config_cls: type, labels: bool, height: int = IMAGE_SIZE, width: int = IMAGE_SIZE,
           **extra) -> Builder:
    def build():
        config = config_cls(**{**_IMAGE, **extra}, **(_IMAGE_LABELS if labels else {}))
        return cls(config), image_processor(height, width)
    return build


def _swin():
    config = tf.SwinConfig(image_size=IMAGE_SIZE, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 2],
                           window_size=4)
    return tf.SwinModel(config), image_processor()


BUILDERS: dict[str, Builder] = {
    "bert": _bert(tf.BertForSequenceClassification, labels=True),
    "bert-long": _bert(tf.BertForSequenceClassification, labels=True, layers=12, max_length=256),  # slow flows
    # flows estimated ~30 s (they run ~8 s): the fair-share browser test's heavy request
    "bert-deep": _bert(tf.BertForSequenceClassification, labels=True, layers=24, max_length=256),
    "bert-encoder": _bert(tf.BertModel, labels=False),
    "sentence": _bert(tf.BertModel, labels=False),
    "distilbert": _distilbert,
    "roberta": _roberta(tf.RobertaForSequenceClassification, labels=True),
    "roberta-encoder": _roberta(tf.RobertaModel, labels=False),
    "gpt2": _gpt2,
    "llama": _llama,
    "t5": _t5,
    "bart": _bart,
    "vit": _image(tf.ViTForImageClassification, tf.ViTConfig, labels=True),
    "vit-wide": _image(tf.ViTForImageClassification, tf.ViTConfig, labels=True, height=32, width=48),
    "deit": _image(tf.DeiTForImageClassificationWithTeacher, tf.DeiTConfig, labels=True),
    "dinov2": _image(tf.Dinov2Model, tf.Dinov2Config, labels=False),
    "dinov2-registers": _image(tf.Dinov2WithRegistersModel, tf.Dinov2WithRegistersConfig, labels=False,
                               num_register_tokens=2),
    "beit": _image(tf.BeitForImageClassification, tf.BeitConfig, labels=True),
    "swin": _swin,
}
TEXT_FAMILIES = ("bert", "bert-encoder", "sentence", "distilbert", "roberta", "roberta-encoder", "gpt2", "llama",
                 "t5", "bart")
IMAGE_FAMILIES = ("vit", "vit-wide", "deit", "dinov2", "dinov2-registers", "beit")


def build_tiny(kind: str, folder: Path, seed: int = 0) -> Path:
    """Write the tiny model `kind` (a key of BUILDERS) to `folder` and return the folder."""
    torch.manual_seed(seed)
    model, processor = BUILDERS[kind]()
    folder = Path(folder)
    model.config.attn_implementation = None  # loading must set eager itself
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    if kind == "sentence":  # what sentence-transformers writes beside a mean-pooled encoder
        (folder / "modules.json").write_text(json.dumps([
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
        ]))
        (folder / "1_Pooling").mkdir(exist_ok=True)
        (folder / "1_Pooling" / "config.json").write_text(json.dumps(
            {"word_embedding_dimension": 32, "pooling_mode_mean_tokens": True, "pooling_mode_cls_token": False}))
    return folder
