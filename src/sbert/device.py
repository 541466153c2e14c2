"""The device a model runs on: the one asked for, checked, or the GPU where torch sees one, else the CPU."""

from __future__ import annotations

from sbert.errors import SbertError


class DeviceError(SbertError, ValueError):
    """A device that is unknown or not present on this machine (the message lists the ones that are)."""


def default_device() -> str:
    """``"cuda"`` if torch can use a GPU, else ``"cpu"``."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def available_devices() -> list[str]:
    """The devices torch can use here: ``cpu``, each ``cuda:N``, and ``mps`` where present."""
    import torch

    found = ["cpu"]
    if torch.cuda.is_available():
        found += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        found.append("mps")
    return found


def resolve_device(device: str | None = None) -> str:
    """``device`` (default: ``default_device()``) once torch has shown it can place a tensor there.

    An unknown name, a device this machine lacks (``cuda`` where torch has no CUDA, ``cuda:3`` with two
    GPUs), or one torch cannot use (a full GPU) raises ``DeviceError`` in one sentence with torch's reason
    and the devices there are."""
    import torch

    if device is None:
        return default_device()
    name = str(device)
    try:
        torch.empty(0, device=torch.device(name))
    except (RuntimeError, AssertionError, ValueError) as err:
        found = available_devices()
        there = ", ".join(found)
        no_cuda = name.startswith("cuda") and not torch.backends.cuda.is_built()
        why = " (this torch was built without CUDA)" if no_cuda else ""
        if not _is_device_type(name):
            known = "not a device name torch knows"
        elif any(name in (d, d.split(":")[0]) for d in found):  # "cuda" where cuda:0 is there
            known = "there, but torch could not use it (out of memory, or held by another process?)"
        else:
            known = "not available here"
        said = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise DeviceError(f"device {name!r}: {known}{why}; torch said: {said}; this machine has: {there}") from err
    return name


def _is_device_type(name: str) -> bool:
    import torch

    try:
        torch.device(name)
    except (RuntimeError, ValueError):
        return False
    return True
