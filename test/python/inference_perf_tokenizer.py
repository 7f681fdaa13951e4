"""Writes a small word-level tokenizer for inference-perf into a folder (argv[1]), offline.

inference-perf counts prompt and output tokens with a Hugging Face tokenizer and makes its random
prompts from that tokenizer's vocabulary. The bench's model (tiny-llm) answers "You said: ..." word
by word, so a whitespace word-level vocabulary with those words and 994 filler words counts its
tokens as the model sends them, with nothing downloaded from the Hugging Face Hub.
"""
import sys

from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

WORDS = ["[UNK]", "[EOS]", "You", "said:", "Say", "hi"] + [f"w{i}" for i in range(994)]


def main(folder: str) -> None:
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##")
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", eos_token="[EOS]")
    fast.save_pretrained(folder)
    ids = fast("You said: Say hi w12").input_ids
    if ids != [2, 3, 4, 5, 18]:
        raise SystemExit(f"the tokenizer in {folder} reads 'You said: Say hi w12' as {ids}")


if __name__ == "__main__":
    main(sys.argv[1])
