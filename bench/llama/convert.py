#!/usr/bin/env python3
"""convert.py — run llama.cpp's own converter (convert_hf_to_gguf.py of the tree that
bench/llama/llama.sh unpacked) on a bench release.

  python3 convert.py TREE RELEASE OUTTYPE OUTFILE

The bench releases carry the demo release's small byte-level BPE tokenizer, whose
pre-tokenizer is Qwen2/Qwen3's regex (scripts/demo/make_demo.py). The converter recognises
a pre-tokenizer by hashing how the vocabulary splits a test string, and a 2,048-token vocabulary
splits it unlike any model it knows, so it stops. This wrapper answers that one question:
when the converter does not recognise the hash, the pre-tokenizer is "qwen2" (the same regex;
the prompt token ids then match ours, which the benches check through the answers). Nothing
else of the converter changes; no llama.cpp code is copied here.
"""
import runpy
import sys
from pathlib import Path


def main() -> None:
    tree, release, outtype, outfile = sys.argv[1:5]
    tree = Path(tree).resolve()
    sys.path.insert(0, str(tree))
    sys.path.insert(1, str(tree / "gguf-py"))
    import conversion.base as base

    recognise = base.TextModel.get_vocab_base_pre

    def get_vocab_base_pre(self, tokenizer):
        try:
            return recognise(self, tokenizer)
        except NotImplementedError:
            return "qwen2"

    base.TextModel.get_vocab_base_pre = get_vocab_base_pre
    sys.argv = [str(tree / "convert_hf_to_gguf.py"), release, "--outtype", outtype, "--outfile", outfile]
    runpy.run_path(sys.argv[0], run_name="__main__")


if __name__ == "__main__":
    main()
