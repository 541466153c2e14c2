"""Moved to ``sbert.distributed`` (the losses use it, and may not import ``sbert.training``). This name
stays, as the very same module: ``sbert.training.distributed is sbert.distributed``."""

from __future__ import annotations

import sys

from sbert import distributed as _distributed

sys.modules[__name__] = _distributed
