"""What the golden-data scripts share about a checkpoint: the file digest they record and the
tensors the reference does not read (gen_model_golden.py, repoint_golden.py). Standard library only."""

from __future__ import annotations

import hashlib
from pathlib import Path

# Native tensors the pinned reference has no module for (DSpark stages, vision tower, aligner,
# image delimiters): listed, counted in the metadata, not loaded.
SKIPPED_PREFIXES = ("mtp.", "vision.", "aligner.", "image_start", "image_end", "image_newline")


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
