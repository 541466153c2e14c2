"""``sbert.heap.steady_heap``: glibc's mmap threshold fixed while training, unless the user set the allocator."""

from __future__ import annotations

import platform

import pytest

from sbert import heap


def test_the_users_own_allocator_settings_are_recognised():
    assert heap.user_set_allocator({"MALLOC_ARENA_MAX": "2"})
    assert heap.user_set_allocator({"GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"})
    assert not heap.user_set_allocator({"PATH": "/usr/bin", "OMP_NUM_THREADS": "2"})


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's allocator")
def test_the_threshold_is_set_on_glibc_and_left_at_glibcs_largest_after(monkeypatch):
    calls = []
    real = heap._mallopt()
    assert real is not None
    monkeypatch.setattr(
        heap, "_mallopt", lambda: lambda option, value: calls.append((option, value)) or real(option, value)
    )
    for key in [key for key in heap.os.environ if heap.user_set_allocator({key: ""})]:
        monkeypatch.delenv(key)
    with heap.steady_heap() as steady:
        assert steady is True
        assert calls == [(heap.M_MMAP_THRESHOLD, 1 << 20)]
    assert calls[-1] == (heap.M_MMAP_THRESHOLD, 32 << 20)


def test_nothing_is_set_when_off_or_when_the_user_set_the_allocator(monkeypatch):
    calls = []
    monkeypatch.setattr(heap, "_mallopt", lambda: lambda option, value: calls.append((option, value)) or 1)
    with heap.steady_heap(enabled=False) as steady:
        assert steady is False
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "65536")
    with heap.steady_heap() as steady:
        assert steady is False
    assert calls == []


def test_another_c_library_is_left_alone(monkeypatch):
    monkeypatch.setattr(heap, "_mallopt", lambda: None)
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    with heap.steady_heap() as steady:
        assert steady is False
