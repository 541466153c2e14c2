"""float16 safetensors (one file, or chunks joined in order) -> float32 safetensors, written atomically.

python3 fp32.py OUT PART [PART ...]
"""

import os
import sys
from pathlib import Path

from safetensors.torch import load, save_file

out, parts = sys.argv[1], sys.argv[2:]
tensors = load(b"".join(Path(p).read_bytes() for p in parts))
full = {k: v.float().contiguous() if v.is_floating_point() else v for k, v in tensors.items()}
save_file(full, out + ".tmp", metadata={"format": "pt"})
os.replace(out + ".tmp", out)
print("wrote", out, len(tensors), "tensors from", {str(v.dtype) for v in tensors.values()})
