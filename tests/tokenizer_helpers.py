"""A real tokenizer for tests: trained here (tokenizers) and saved as a checkpoint ships one."""
from __future__ import annotations

from pathlib import Path


def train_tokenizer(folder: Path, vocab: int) -> None:
    """A real (tiny) HF tokenizer, trained here and saved the way a checkpoint ships one."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    corpus = ["the residual stream carries x through every layer", "hidden states hold the increment",
              "RMSNorm scales each token by the root mean square"] * 20
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=vocab, special_tokens=["<unk>"],
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>").save_pretrained(str(folder))
